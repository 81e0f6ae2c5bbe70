package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of the processes a cell meters besides the server's nodes.
const (
	// procClickHouse is the ClickHouse server the nodes insert into.
	procClickHouse = "clickhouse"
	// procClient is the bench's own process: the load generator.
	procClient = "bench client"
)

// maxProcScan bounds the processes listenerPID looks through.
const maxProcScan = 1 << 16

// errNoListener marks a port no process this user can see listens on.
var errNoListener = errors.New("bench: no process found listening")

// sideProcs are the processes a cell meters besides its nodes: this
// process, the client, and the ClickHouse process chPID unless zero.
func sideProcs(chPID int) []proc {
	ps := []proc{{name: procClient, pid: os.Getpid()}}
	if chPID > 0 {
		ps = append(ps, proc{name: procClickHouse, pid: chPID})
	}
	return ps
}

// clickHousePID is the ClickHouse process the matrix meters: pid when
// given (--clickhouse-pid), else the process that listens on the port
// of url, found through /proc.
func clickHousePID(pid int, url string) (int, error) {
	if pid > 0 {
		return pid, nil
	}
	upstream, _, err := clickHouseUpstream(url)
	if err != nil {
		return 0, err
	}
	_, p, err := net.SplitHostPort(upstream)
	if err != nil {
		return 0, fmt.Errorf("bench: clickhouse url %q: %w", url, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return 0, fmt.Errorf("bench: clickhouse url %q: port %q", url, p)
	}
	return listenerPID(port)
}

// listenerPID returns the process that holds a TCP socket listening on
// port (any address, IPv4 or IPv6): the socket's inode from
// /proc/net/tcp{,6}, then the process whose /proc/<pid>/fd links to it.
// Only processes whose fds this user may read are seen. Linux only.
func listenerPID(port int) (int, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // no IPv6, say
		}
		for _, ino := range listenInodes(b, port) {
			inodes["socket:["+ino+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("%w on port %d", errNoListener, port)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	for i, e := range procs {
		if i >= maxProcScan {
			break
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := filepath.Join("/proc", e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or another user's
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && inodes[link] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("%w on port %d: its socket belongs to no process this user can read", errNoListener, port)
}

// listenInodes returns the inodes of the sockets in LISTEN state on port
// in the contents of /proc/net/tcp or /proc/net/tcp6.
func listenInodes(table []byte, port int) []string {
	const listen = "0A" // TCP_LISTEN
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != listen {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if !ok || err != nil || int(p) != port {
			continue
		}
		out = append(out, f[9])
	}
	return out
}
