package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// etcdClusterToken names the etcd cluster the KV group starts.
const etcdClusterToken = "chute-bench"

// etcdTargets are three etcd members, etcd-1 to etcd-3, of one new
// cluster on six free ports (client and peer, member by member), each
// with its data in data/<name>.etcd. They keep etcd's defaults otherwise,
// fsync included: the floor chute's KV puts are held to.
func etcdTargets(exe string, ports []int, data string, environ []string) []*target {
	env := childEnv(environ)
	peers := make([]string, 3)
	for i := range peers {
		peers[i] = etcdName(i) + "=http://" + loopback(ports[2*i+1])
	}
	initial := strings.Join(peers, ",")
	members := make([]*target, 3)
	for i := range members {
		name := etcdName(i)
		members[i] = &target{
			name:     name,
			endpoint: "http://" + loopback(ports[2*i]),
			exe:      exe,
			argv:     etcdCommand(name, filepath.Join(data, name+".etcd"), ports[2*i], ports[2*i+1], initial),
			env:      env,
		}
	}
	return members
}

// etcdName is the name of member i of etcdTargets.
func etcdName(i int) string {
	return "etcd-" + strconv.Itoa(i+1)
}

// etcdCommand is the command line (after the executable) of the etcd
// member called name, with its data in dataDir, serving clients on
// client and peers on peer of the loopback address, one of the new
// cluster initial.
func etcdCommand(name, dataDir string, client, peer int, initial string) []string {
	clientURL, peerURL := "http://"+loopback(client), "http://"+loopback(peer)
	return []string{
		"--name", name,
		"--data-dir", dataDir,
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", initial,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", etcdClusterToken,
		"--logger", "zap",
		"--log-level", "warn",
	}
}

// etcdVersionTimeout bounds `etcd --version`.
const etcdVersionTimeout = 5 * time.Second

// etcdVersion is the version `exe --version` prints ("3.4.23"); empty
// when it cannot tell.
func etcdVersion(ctx context.Context, exe string) string {
	ctx, cancel := context.WithTimeout(ctx, etcdVersionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "--version").Output()
	if err != nil {
		return ""
	}
	return parseEtcdVersion(out)
}

// parseEtcdVersion finds "etcd Version: X" in the output of etcd
// --version; empty when there is none.
func parseEtcdVersion(out []byte) string {
	for line := range bytes.Lines(out) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("etcd Version:")); ok {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}
