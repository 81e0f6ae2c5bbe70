//go:build e2e

package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"chute/internal/testutil"
)

// Bounds of the runs of the binary; each wait is polled.
const (
	runTimeout   = 15 * time.Second // one validation run
	readyTimeout = 15 * time.Second // /readyz of a started node
	stopTimeout  = 15 * time.Second // SIGTERM to exit
	pollInterval = 20 * time.Millisecond
)

// chuteBin is the binary TestMain builds; root is the module's directory.
var chuteBin, root string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root = filepath.Dir(wd) // this package is deploy/
	dir, err := os.MkdirTemp("", "chute-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	chuteBin = filepath.Join(dir, "chute")
	cmd := exec.Command("go", "build", "-o", chuteBin, "chute/cmd/chute")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "deploy: go build chute/cmd/chute: %v\n%s", err, out)
		return 1
	}
	before := dataDirsIn(wd, root)
	code := m.Run()
	for _, d := range dataDirsIn(wd, root) {
		if !slices.Contains(before, d) {
			fmt.Fprintf(os.Stderr, "deploy: the tests left the data dir %s in the repository: run chute with a temporary --data-dir\n", d)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "deploy: goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// dataDirsIn lists the default data dirs (<name>.chute) in dirs: a node
// started without --data-dir in its working directory leaves one.
func dataDirsIn(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, "*.chute"))
		out = append(out, m...)
	}
	return out
}

// repoFile returns the path of a file given relative to the module root.
func repoFile(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

// readRepoFile reads a file of the repository or fails the test.
func readRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoFile(rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// helpText caches the output of chute --help.
var helpText = sync.OnceValues(func() (string, error) {
	out, err := exec.Command(chuteBin, "--help").Output()
	return string(out), err
})

// flagSets are the flags chute --help lists: chute's own, etcd's that
// are accepted and ignored, and etcd's security flags it refuses.
type flagSets struct {
	own     map[string]bool // name without dashes: "listen-client-urls"
	etcd    map[string]bool
	refused map[string]bool
}

var ownFlagLine = regexp.MustCompile(`^  --([a-z0-9-]+)`)

// chuteFlags parses chute --help.
func chuteFlags(t testing.TB) flagSets {
	t.Helper()
	help, err := helpText()
	if err != nil {
		t.Fatalf("chute --help: %v", err)
	}
	fs := flagSets{own: map[string]bool{}, etcd: map[string]bool{}, refused: map[string]bool{}}
	var list map[string]bool // the section of etcd flags being read
	for line := range strings.Lines(help) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "Flags accepted for etcd compatibility"):
			list = fs.etcd
			continue
		case strings.HasPrefix(line, "Security flags of etcd"):
			list = fs.refused
			continue
		}
		if list == nil {
			if m := ownFlagLine.FindStringSubmatch(line); m != nil {
				fs.own[m[1]] = true
			}
			continue
		}
		for _, f := range strings.Fields(line) {
			if !strings.HasPrefix(f, "--") {
				t.Fatalf("chute --help: %q in a list of etcd flags:\n%s", f, help)
			}
			list[strings.TrimPrefix(f, "--")] = true
		}
	}
	if !fs.own["name"] || !fs.own["join"] || !fs.own["config"] || !fs.own["cert-file"] || !fs.etcd["wal-dir"] || !fs.refused["cors"] {
		t.Fatalf("chute --help did not parse: own %v, etcd %v, refused %v\n%s", fs.own, fs.etcd, fs.refused, help)
	}
	return fs
}

// subcommandFlags parses the flags of `chute <sub> -h` (package flag's
// usage: lines "  -name type").
func subcommandFlags(t testing.TB, sub string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(chuteBin, sub, "-h").CombinedOutput()
	flags := map[string]bool{}
	re := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("chute %s -h lists no flags:\n%s", sub, out)
	}
	return flags
}

// envName returns the CHUTE_* variable of a flag.
func envName(flag string) string {
	return "CHUTE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagsIn returns the flag names (without dashes or values) of a command
// line's arguments, in order.
func flagsIn(args []string) []string {
	var out []string
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		out = append(out, name)
	}
	return out
}

// launch is how one deployment starts chute: its arguments, environment
// and the files it reads, by the path the deployment gives them.
type launch struct {
	name  string
	args  []string
	env   map[string]string
	files map[string]string // path in the deployment -> path here
	// client is the TLS identity of the deployment's etcd clients (a CA
	// and a client certificate); nil for a plain etcd API.
	client *tls.Config
}

// localize replaces the deployment's paths by the files here.
func (l launch) localize(s string) string {
	for from, to := range l.files {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

func (l launch) localArgs() []string {
	out := make([]string, len(l.args))
	for i, a := range l.args {
		out[i] = l.localize(a)
	}
	return out
}

func (l launch) localEnv() []string {
	var out []string
	for k, v := range l.env {
		out = append(out, k+"="+l.localize(v))
	}
	sort.Strings(out)
	return out
}

// configFile returns the config file the launch names (--config or
// CHUTE_CONFIG), as a path here, or "".
func (l launch) configFile() string {
	args := l.args
	for i, a := range args {
		switch {
		case a == "--config" && i+1 < len(args):
			return l.localize(args[i+1])
		case strings.HasPrefix(a, "--config="):
			return l.localize(strings.TrimPrefix(a, "--config="))
		}
	}
	if p, ok := l.env["CHUTE_CONFIG"]; ok {
		return l.localize(p)
	}
	return ""
}

// otelVars are the OTEL_* variables chute reads (otel/env.go) and those
// the SDK's batch span processor reads itself (OTEL_BSP_*).
var otelVars = sync.OnceValues(func() (map[string]bool, error) {
	src, err := os.ReadFile(repoFile("otel/env.go"))
	if err != nil {
		return nil, err
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(OTEL_[A-Z_]+[A-Z])"`).FindAllStringSubmatch(string(src), -1) {
		vars[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`either\("([A-Z]+)"\)`).FindAllStringSubmatch(string(src), -1) {
		vars["OTEL_EXPORTER_OTLP_"+m[1]] = true
		vars["OTEL_EXPORTER_OTLP_TRACES_"+m[1]] = true
	}
	if !vars["OTEL_SERVICE_NAME"] || !vars["OTEL_EXPORTER_OTLP_ENDPOINT"] || !vars["OTEL_EXPORTER_OTLP_PROTOCOL"] {
		return nil, fmt.Errorf("otel/env.go: found only %v", vars)
	}
	return vars, nil
})

func isOtelVar(t testing.TB, name string) bool {
	vars, err := otelVars()
	if err != nil {
		t.Fatal(err)
	}
	return vars[name] || strings.HasPrefix(name, "OTEL_BSP_")
}

// checkLaunch checks a deployment's way of starting chute: its flags and
// variables exist, its files exist, its configuration loads, and a node
// started from it serves and leaves cleanly.
func checkLaunch(t *testing.T, l launch) {
	t.Helper()
	fs := chuteFlags(t)
	for _, f := range flagsIn(l.args) {
		switch {
		case fs.etcd[f]:
			t.Errorf("%s: --%s is an etcd flag chute ignores; use chute's own flags", l.name, f)
		case fs.refused[f]:
			t.Errorf("%s: --%s is an etcd flag chute refuses", l.name, f)
		case !fs.own[f]:
			t.Errorf("%s: --%s is not a flag of chute --help", l.name, f)
		}
	}
	for k := range l.env {
		switch {
		case strings.HasPrefix(k, "CHUTE_"):
			if !fs.own[strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "CHUTE_")), "_", "-")] {
				t.Errorf("%s: %s names no flag of chute --help", l.name, k)
			}
		case strings.HasPrefix(k, "OTEL_"):
			if !isOtelVar(t, k) {
				t.Errorf("%s: %s is not an OTEL_* variable chute reads (otel/env.go)", l.name, k)
			}
		}
	}
	for from, to := range l.files {
		if _, err := os.Stat(to); err != nil {
			t.Errorf("%s: %s (for %s): %v", l.name, to, from, err)
		}
	}
	if cfg := l.configFile(); cfg == "" {
		t.Logf("%s: no config file", l.name)
	} else if _, err := os.Stat(cfg); err != nil {
		t.Errorf("%s: config file: %v", l.name, err)
	}
	checkDataDir(t, l)
	if t.Failed() {
		return
	}
	t.Run("loads", func(t *testing.T) {
		t.Parallel()
		checkLoads(t, l)
	})
	t.Run("starts", func(t *testing.T) {
		t.Parallel()
		checkStarts(t, l)
	})
}

// dataDirOf returns the data dir the launch gives chute: --data-dir in
// its arguments, else CHUTE_DATA_DIR, else data_dir in its config file;
// "" when none does.
func dataDirOf(t testing.TB, l launch) string {
	if v, ok := flagArg(l.args, "data-dir"); ok {
		return v
	}
	if v := l.env[envName("data-dir")]; v != "" {
		return v
	}
	if cfg := l.configFile(); cfg != "" {
		var m map[string]any
		if err := yaml.Unmarshal(mustReadAbs(t, cfg), &m); err != nil {
			t.Fatalf("%s: %s: %v", l.name, cfg, err)
		}
		if v, ok := m["data_dir"].(string); ok {
			return v
		}
	}
	return ""
}

// checkDataDir: the launch names an absolute data dir. Without one,
// chute keeps its raft log in <name>.chute under whatever its working
// directory is: a read-only root in a container, a path nobody backs up.
func checkDataDir(t *testing.T, l launch) {
	t.Helper()
	switch dir := dataDirOf(t, l); {
	case dir == "":
		t.Errorf("%s: no --data-dir, CHUTE_DATA_DIR or data_dir: the raft log would go to <name>.chute in the working directory", l.name)
	case !filepath.IsAbs(dir):
		t.Errorf("%s: data dir %q: want an absolute path", l.name, dir)
	}
}

// sentinel is an invalid flag appended to a launch: the binary validates
// everything before it binds anything, and reports every invalid setting,
// so an exit naming this flag alone proves the rest valid.
var sentinel = []string{"--max-key-bytes=0"}

const sentinelError = "chute: --max-key-bytes: 0 is not positive"

// checkLoads runs the binary with the launch's arguments, environment and
// config file plus the sentinel flag, and requires the sentinel's error
// and no other.
func checkLoads(t *testing.T, l launch) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, chuteBin, append(l.localArgs(), sentinel...)...)
	cmd.Env = append(cleanEnv(), l.localEnv()...)
	cmd.Dir = t.TempDir() // whatever a failure writes stays out of the repository
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("%s: got %v, want exit status 2 (a usage error); output:\n%s", l.name, err, out.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if first != sentinelError {
		t.Errorf("%s: the configuration does not load:\n%s\nwant only %q", l.name, out.String(), sentinelError)
	}
}

// cleanEnv is this process's environment without CHUTE_* and OTEL_*
// variables, which would change what a launch means.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHUTE_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// checkStarts starts a node from the launch with every address moved to
// free loopback ports, no gossip seeds and --bootstrap-expect 1 (a
// cluster of one), its data dir and working directory moved to temporary
// ones, and ClickHouse and OTLP endpoints on a closed loopback port, so
// it reaches nothing but itself; it must serve /readyz, keep its raft log
// in the data dir, log no error, and exit 0 on SIGTERM.
func checkStarts(t *testing.T, l launch) {
	var lastErr error
	for range 3 { // a free port may be taken meanwhile
		log, err := startOnce(t, l)
		if err == nil {
			if strings.Contains(log, "level=ERROR") {
				t.Errorf("%s: the node logged errors:\n%s", l.name, log)
			}
			return
		}
		lastErr = err
		if !strings.Contains(log, "address already in use") {
			break
		}
	}
	t.Fatalf("%s: %v", l.name, lastErr)
}

func startOnce(t *testing.T, l launch) (string, error) {
	client, peer, gossip, metrics := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	cs, ps := listenScheme(t, l, "listen-client-urls"), listenScheme(t, l, "listen-peer-urls")
	dataDir := t.TempDir()
	args := append(l.localArgs(),
		"--listen-client-urls="+cs+"://"+client, "--advertise-client-urls="+cs+"://"+client,
		"--listen-peer-urls="+ps+"://"+peer, "--advertise-peer-urls="+ps+"://"+peer,
		"--gossip-listen="+gossip, "--gossip-advertise="+gossip,
		"--metrics-listen="+metrics, "--join=", "--bootstrap-expect=1", "--data-dir="+dataDir)
	env := cleanEnv()
	for _, kv := range l.localEnv() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CHUTE_CLICKHOUSE_URL":
			v = "http://user:password@127.0.0.1:1"
		case "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":
			v = "http://127.0.0.1:1"
		}
		env = append(env, k+"="+v)
	}
	// No spans: the RPCs of checkEtcdTLS would leave some for the closed
	// collector, and the shutdown waits for their export until its deadline.
	env = append(env, "OTEL_TRACES_SAMPLER=always_off")
	var out testutil.Buffer
	cmd := exec.Command(chuteBin, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return err
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("no exit within %v of SIGTERM", stopTimeout)
		}
	}
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := hc.Get("http://" + metrics + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			return out.String(), fmt.Errorf("exited before it was ready (%v):\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = stop()
			return out.String(), fmt.Errorf("not ready within %v:\n%s", readyTimeout, out.String())
		}
		time.Sleep(pollInterval)
	}
	if l.client != nil {
		if err := checkEtcdTLS(client, l.client); err != nil {
			_ = stop()
			return out.String(), fmt.Errorf("etcd API at %s://%s: %v:\n%s", cs, client, err, out.String())
		}
	}
	if err := stop(); err != nil {
		return out.String(), fmt.Errorf("after SIGTERM: %v, want exit status 0:\n%s", err, out.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft", "raft.db")); err != nil {
		return out.String(), fmt.Errorf("the raft log is not in --data-dir: %v", err)
	}
	return out.String(), nil
}

// listenScheme returns the scheme of the launch's flag (listen-client-urls
// or listen-peer-urls): from its arguments, else its environment, else its
// config file; http when none sets it.
func listenScheme(t testing.TB, l launch, flag string) string {
	v, ok := flagArg(l.args, flag)
	if !ok || v == "" {
		v, ok = l.env[envName(flag)]
	}
	if cfg := l.configFile(); (!ok || v == "") && cfg != "" {
		var m map[string]any
		if err := yaml.Unmarshal(mustReadAbs(t, cfg), &m); err != nil {
			t.Fatalf("%s: %s: %v", l.name, cfg, err)
		}
		switch x := m[strings.ReplaceAll(flag, "-", "_")].(type) {
		case string:
			v = x
		case []any:
			if len(x) > 0 {
				v = fmt.Sprint(x[0])
			}
		}
	}
	if strings.HasPrefix(strings.TrimSpace(v), "https://") {
		return "https"
	}
	return "http"
}

// checkEtcdTLS reads a key over the etcd API at addr with the client's
// certificate, and requires a client without one to be refused.
func checkEtcdTLS(addr string, client *tls.Config) error {
	get := func(c *tls.Config) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(c)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = pb.NewKVClient(conn).Range(ctx, &pb.RangeRequest{Key: []byte("deploy-tls-check")})
		return err
	}
	if err := get(client.Clone()); err != nil {
		return fmt.Errorf("Range with the client certificate: %w", err)
	}
	anon := client.Clone()
	anon.Certificates = nil
	if err := get(anon); err == nil {
		return errors.New("Range without a client certificate succeeded: the etcd API does not require one")
	}
	return nil
}

// freeAddr returns 127.0.0.1:port with the port free for TCP and UDP a
// moment ago (gossip binds both).
func freeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePortOn(t, "127.0.0.1", true)))
}

// parseEnvFile reads KEY=VALUE lines (systemd's EnvironmentFile, without
// quotes or continuations); blank lines and # comments are skipped.
func parseEnvFile(t testing.TB, data []byte) map[string]string {
	t.Helper()
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`).MatchString(k) {
			t.Errorf("line %d: %q is not KEY=VALUE", n, line)
			continue
		}
		env[k] = v
	}
	return env
}
