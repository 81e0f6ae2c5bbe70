//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"chute/internal/testutil"
)

// installHint ends the message of a test that finds etcd or etcdctl missing.
const installHint = "install it with: make deps (apt-get install etcd-client etcd-server)"

// Bounds of the harness's waits. Each is polled, never slept through.
const (
	readyTimeout = 10 * time.Second // chute's /readyz, etcd's endpoint health
	stopTimeout  = 10 * time.Second // SIGTERM to exit, then SIGKILL
	pollInterval = 20 * time.Millisecond
	startTries   = 3 // starts retried when a free port was taken meanwhile
)

// chuteBin is the chute binary built by TestMain.
var chuteBin string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests builds chute into a temporary directory, runs the tests,
// checks that they left no goroutine running (goleak) and removes the
// directory. E2E_CHUTE_BIN names a binary to test instead.
func runTests(m *testing.M) int {
	if bin := os.Getenv("E2E_CHUTE_BIN"); bin != "" {
		chuteBin = bin
		return noLeaks(m.Run())
	}
	dir, err := os.MkdirTemp("", "chute-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := testutil.Build(dir, "chute/cmd/chute")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	chuteBin = bin
	return noLeaks(m.Run())
}

// noLeaks returns code, or 1 when the tests passed but left goroutines
// running (goleak.VerifyTestMain's check, after the tests' own
// cleanups).
func noLeaks(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: goroutines left running after the tests: %v\n", err)
		return 1
	}
	return 0
}

// lookTool returns the path of etcd or etcdctl, failing the test with the
// install hint when it is not installed.
func lookTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("e2e: %s is not installed (%v): %s", name, err, installHint)
	}
	return path
}

// Proc is a chute or etcd process started by a test. The test's cleanup
// stops it (Stop) and, when the test failed, logs its output. Its methods
// are meant for the test's goroutine: Stop, Kill and Restart must not run
// at the same time.
type Proc struct {
	Kind        string   // "chute" or "etcd"
	Name        string   // --name
	ClientAddr  string   // host:port of the etcd API
	PeerAddr    string   // host:port of the peer listener
	GossipAddr  string   // chute only: serf's host:port
	MetricsAddr string   // chute only: /metrics, /healthz, /readyz
	DataDir     string   // --data-dir: kept across Restart
	LogPath     string   // stdout and stderr of every run of the process
	Args        []string // the command line, less the binary
	Env         []string // added to the test's environment, KEY=value

	bin   string
	ready func() error // nil once the process serves
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
	err   error         // cmd.Wait's result, set before done closes

	mu       sync.Mutex
	signaled bool // Stop, Kill or Signal was called since the last start
}

func (p *Proc) String() string { return fmt.Sprintf("%s %s (%s)", p.Kind, p.Name, p.ClientAddr) }

// ClientURL is the etcd API's URL.
func (p *Proc) ClientURL() string { return "http://" + p.ClientAddr }

// PeerURL is the peer listener's URL.
func (p *Proc) PeerURL() string { return "http://" + p.PeerAddr }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM (and SIGCONT, for a process stopped by SIGSTOP), waits
// up to stopTimeout for the process to exit, then sends SIGKILL. It returns
// the process's exit error (nil: exit status 0). It may be called more
// than once.
func (p *Proc) Stop() error {
	p.markSignaled()
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // fails only if it already exited
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
		return p.err
	case <-time.After(stopTimeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s did not exit within %v of SIGTERM: killed", p, stopTimeout)
}

// WaitExit waits up to timeout for a process expected to exit on its own
// and returns its exit code; it fails the test when the process is still
// running then. The test's cleanup then accepts any exit status.
func (p *Proc) WaitExit(t testing.TB, timeout time.Duration) int {
	t.Helper()
	p.markSignaled()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("e2e: %s still running %v later, want it to exit", p, timeout)
	}
	if p.err == nil {
		return 0
	}
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) {
		t.Fatalf("e2e: %s: %v", p, p.err)
	}
	return exit.ExitCode()
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Proc) Kill() {
	p.markSignaled()
	_ = p.cmd.Process.Kill() // fails only if it already exited
	<-p.done
}

// Signal sends sig, such as SIGSTOP or SIGCONT, to the process.
func (p *Proc) Signal(sig os.Signal) error {
	p.markSignaled()
	return p.cmd.Process.Signal(sig)
}

// Restart starts the process again, with the same command line, ports and
// data directory, once it has exited (after Stop or Kill), and waits until
// it serves.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	default:
		t.Fatalf("e2e: restart %s: it is still running", p)
	}
	if err := p.start(t); err != nil {
		t.Fatalf("e2e: restart %s: %v", p, err)
	}
	if err := p.waitReady(readyTimeout); err != nil {
		t.Fatalf("e2e: restart %s: %v", p, err)
	}
}

func (p *Proc) markSignaled() {
	p.mu.Lock()
	p.signaled = true
	p.mu.Unlock()
}

func (p *Proc) wasSignaled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signaled
}

// Output returns everything the process has written so far, for tests
// that search it; Log is for showing it.
func (p *Proc) Output() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("<cannot read %s: %v>", p.LogPath, err)
	}
	return string(b)
}

// Log returns what the process has written so far: at most its first
// 16 KiB and its last 48 KiB. The start says how the process joined (a
// leader adding a member, the first election), the end how it failed
// and stopped; a process that logs a lot in between loses the middle.
func (p *Proc) Log() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("<cannot read %s: %v>", p.LogPath, err)
	}
	const head, tail = 16 << 10, 48 << 10
	if len(b) <= head+tail {
		return string(b)
	}
	return fmt.Sprintf("%s\n<%d bytes cut>\n%s", b[:head], len(b)-head-tail, b[len(b)-tail:])
}

// errPortTaken reports that a process could not bind a port that was free
// when freePort chose it; the start is retried on new ports.
var errPortTaken = errors.New("a port was taken meanwhile")

// chuteNames numbers the default names of chute nodes.
var chuteNames atomic.Int64

// StartChute starts the chute binary with the flags --name,
// --listen-client-urls, --listen-peer-urls, --gossip-listen and
// --metrics-listen on free loopback ports and --data-dir in a temporary
// directory, then args. A flag of that list
// given in args replaces the harness's value. It returns once GET /readyz
// answers 200, and stops the process when the test ends.
func StartChute(t testing.TB, args ...string) *Proc {
	t.Helper()
	return StartChuteEnv(t, nil, args...)
}

// StartChuteEnv is StartChute with env (KEY=value) added to the process's
// environment: OTEL_* variables, CHUTE_* settings.
func StartChuteEnv(t testing.TB, env []string, args ...string) *Proc {
	t.Helper()
	if chuteBin == "" {
		t.Fatal("e2e: the chute binary is not built (TestMain builds it)")
	}
	var err error
	for range startTries {
		var p *Proc
		if p, err = startChuteOnce(t, args, env); err == nil {
			return p
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("e2e: start chute: %v", err)
	return nil
}

func startChuteOnce(t testing.TB, extra, env []string) (*Proc, error) {
	p, err := launchChute(t, extra, env)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(readyTimeout); err != nil {
		return nil, err
	}
	return p, nil
}

// launchChute starts chute like StartChuteEnv but returns at once, without
// waiting for it to serve.
func launchChute(t testing.TB, extra, env []string) (*Proc, error) {
	p := &Proc{Kind: "chute", bin: chuteBin, Env: env}
	var args []string
	set := func(flagName string, def func() string) string {
		if v, ok := flagValue(extra, flagName); ok {
			return v
		}
		v := def()
		args = append(args, "--"+flagName, v)
		return v
	}
	p.Name = set("name", func() string { return fmt.Sprintf("chute-%d", chuteNames.Add(1)) })
	p.ClientAddr = urlHost(set("listen-client-urls", func() string { return "http://" + testutil.FreeAddr(t) }))
	p.PeerAddr = urlHost(set("listen-peer-urls", func() string { return "http://" + testutil.FreeAddr(t) }))
	p.GossipAddr = set("gossip-listen", func() string { return testutil.FreeAddr(t) })
	p.MetricsAddr = set("metrics-listen", func() string { return testutil.FreeAddr(t) })
	p.DataDir = set("data-dir", func() string { return t.TempDir() })
	p.Args = append(args, extra...)

	readyz := "http://" + p.MetricsAddr + "/readyz"
	client := &http.Client{Timeout: time.Second}
	if _, ok := flagValue(extra, "metrics-cert-file"); ok {
		// Readiness only: the test checks the certificate itself.
		readyz = "https://" + p.MetricsAddr + "/readyz"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	}
	p.ready = func() error {
		resp, err := client.Get(readyz)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", readyz, resp.Status)
		}
		return nil
	}
	if err := p.start(t); err != nil {
		return nil, err
	}
	return p, nil
}

// StartEtcd starts a real single-member etcd (the name "default") in a
// temporary data directory on free loopback ports, then args. It returns
// once `etcdctl endpoint health` succeeds, and stops etcd when the test
// ends. A missing etcd or etcdctl fails the test.
func StartEtcd(t testing.TB, args ...string) *Proc {
	t.Helper()
	etcd := lookTool(t, "etcd")
	etcdctlPath := lookTool(t, "etcdctl")
	var err error
	for range startTries {
		var p *Proc
		if p, err = startEtcdOnce(t, etcd, etcdctlPath, args); err == nil {
			return p
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("e2e: start etcd: %v", err)
	return nil
}

func startEtcdOnce(t testing.TB, etcd, etcdctlPath string, extra []string) (*Proc, error) {
	p := &Proc{
		Kind:       "etcd",
		Name:       "default",
		ClientAddr: testutil.FreeAddr(t),
		PeerAddr:   testutil.FreeAddr(t),
		DataDir:    t.TempDir(),
		bin:        etcd,
	}
	if err := os.Chmod(p.DataDir, 0o700); err != nil { // etcd warns of a wider mode
		return nil, err
	}
	p.Args = append([]string{
		"--name", p.Name,
		"--data-dir", p.DataDir,
		"--listen-client-urls", p.ClientURL(),
		"--advertise-client-urls", p.ClientURL(),
		"--listen-peer-urls", p.PeerURL(),
		"--initial-advertise-peer-urls", p.PeerURL(),
		"--initial-cluster", p.Name + "=" + p.PeerURL(),
		"--unsafe-no-fsync", // a test's data need not survive a power cut
		"--logger", "zap",
		"--log-level", "warn",
	}, extra...)
	p.ready = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, etcdctlPath, "--endpoints", p.ClientAddr,
			"--dial-timeout=1s", "--command-timeout=2s", "endpoint", "health")
		cmd.Env = etcdctlEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("etcdctl endpoint health: %v: %s", err, out)
		}
		return nil
	}
	if err := p.start(t); err != nil {
		return nil, err
	}
	if err := p.waitReady(readyTimeout); err != nil {
		return nil, err
	}
	return p, nil
}

// start runs p.bin with p.Args, its output appended to p.LogPath. The
// first start registers the cleanup that stops the process and, if the
// test failed, logs its output.
func (p *Proc) start(t testing.TB) error {
	first := p.LogPath == ""
	if first {
		p.LogPath = filepath.Join(t.TempDir(), p.Kind+".log")
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	p.cmd = exec.Command(p.bin, p.Args...)
	if len(p.Env) > 0 {
		p.cmd.Env = append(os.Environ(), p.Env...)
	}
	p.cmd.Dir = filepath.Dir(p.LogPath)
	p.cmd.Stdout = logFile
	p.cmd.Stderr = logFile
	setDeathSignal(p.cmd)
	p.mu.Lock()
	p.signaled = false
	p.mu.Unlock()
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	done := make(chan struct{})
	p.done = done
	cmd := p.cmd
	go func() {
		p.err = cmd.Wait()
		close(done)
	}()
	if first {
		t.Cleanup(func() {
			signaled := p.wasSignaled()
			err := p.Stop()
			if p.Kind == "chute" && !signaled && err != nil {
				t.Errorf("%s: after SIGTERM: %v, want exit status 0", p, err)
			}
			if t.Failed() {
				t.Logf("%s: %s %s\n%s", p, p.bin, strings.Join(p.Args, " "), p.Log())
			}
		})
	}
	return nil
}

// waitReady polls p.ready until it returns nil, the process exits or
// timeout passes. A process that exited complaining of a port in use gives
// errPortTaken.
func (p *Proc) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := p.ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			p.markSignaled() // the start failed: the caller reports it
			log := p.Log()
			if strings.Contains(p.Output(), "address already in use") {
				return fmt.Errorf("%s: %w:\n%s", p, errPortTaken, log)
			}
			return fmt.Errorf("%s exited before it was ready (%v):\n%s", p, p.err, log)
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("%s not ready after %v: %v\n%s", p, timeout, err, p.Log())
		}
		time.Sleep(pollInterval)
	}
}

// flagValue returns the value of --name (or -name) in args, written as
// "--name value" or "--name=value".
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// urlHost returns the host:port of the first URL of a comma list.
func urlHost(urls string) string {
	first, _, _ := strings.Cut(urls, ",")
	first = strings.TrimPrefix(strings.TrimPrefix(first, "http://"), "https://")
	host, _, _ := strings.Cut(first, "/")
	return host
}

// TestHarness_chute_stopKillRestart checks the harness's process control
// on chute: SIGTERM exits 0, a killed node restarts on its
// ports, and readiness is polled again.
func TestHarness_chute_stopKillRestart(t *testing.T) {
	t.Parallel()
	p := StartChute(t)
	etcdctlPath := lookTool(t, "etcdctl")
	health := func() error {
		res, err := runEtcdctl(etcdctlPath, p.ClientAddr, "", "endpoint", "health")
		if err == nil && res.Code != 0 {
			err = fmt.Errorf("exit %d: %s", res.Code, res.Stderr)
		}
		return err
	}
	if err := health(); err != nil {
		t.Fatalf("endpoint health of a started node: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: got %v, want exit status 0", err)
	}
	p.Restart(t)
	if err := health(); err != nil {
		t.Fatalf("endpoint health after Restart: %v", err)
	}
	p.Kill()
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is open after Kill")
	}
	p.Restart(t)
	if err := health(); err != nil {
		t.Fatalf("endpoint health after Kill and Restart: %v", err)
	}
}

func TestHarness_etcd_start(t *testing.T) {
	t.Parallel()
	p := StartEtcd(t)
	res, err := runEtcdctl(lookTool(t, "etcdctl"), p.ClientAddr, "", "member", "list")
	if err != nil || res.Code != 0 || !strings.Contains(res.Stdout, ", started, default, "+p.PeerURL()+", "+p.ClientURL()) {
		t.Errorf("member list: got %+v, %v; want one started member default at %s", res, err, p.ClientURL())
	}
}

func TestHarness_flagValue(t *testing.T) {
	args := []string{"--name", "n1", "-join=a:1,b:2", "--x"}
	for _, tc := range []struct {
		name   string
		want   string
		wantOK bool
	}{
		{"name", "n1", true},
		{"join", "a:1,b:2", true},
		{"x", "", false},
		{"cluster", "", false},
	} {
		if got, ok := flagValue(args, tc.name); got != tc.want || ok != tc.wantOK {
			t.Errorf("flagValue(%q): got %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}
