package chtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// readyTimeout bounds the wait for /ping after a launch. A start takes
	// 0.1-0.5 s on an idle 2-core machine and has taken 10 s under load.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a graceful stop before SIGKILL; 18.16 usually
	// exits about 1 s after SIGTERM.
	stopTimeout = 15 * time.Second
	// killTimeout bounds the wait for the process to go after SIGKILL.
	killTimeout = 10 * time.Second
	// launchAttempts is how often Start picks new ports when another
	// process took one between picking and the server's bind.
	launchAttempts = 3
	// maxPortPicks bounds the ports pickPorts asks the kernel for in one call.
	maxPortPicks = 64
	// errLogTail is how many lines of the error log a failed test shows.
	errLogTail = 40
)

// missingBinary is Start's whole message when clickhouse-server is absent.
const missingBinary = "clickhouse-server not found: install it with: make deps (apt-get install clickhouse-server)"

// errPortInUse means the server exited because a port was taken.
var errPortInUse = errors.New("chtest: port already in use")

// Server is one private clickhouse-server process with its own directory
// and loopback ports. Its methods may be called from several goroutines;
// Stop, Kill and Restart are serialized.
type Server struct {
	ext    *external // the server EnvURL names; nil: a process of this package
	bin    string
	dir    string
	ports  ports
	claims *portClaims // on ports; nil for ext
	opts   Options     // of Start, for the config Restart may write again
	client *http.Client

	// lifecycle serializes Stop, Kill, Restart and cleanup, so one process
	// is stopped or started at a time. Taken before mu.
	lifecycle sync.Mutex
	// mu guards proc.
	mu   sync.Mutex
	proc *process // the current or last process; nil before the first launch
}

// process is one run of the server binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned; err is set before
	err  error
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Start launches a clickhouse-server in a directory under t.TempDir() on
// free 127.0.0.1 ports and returns once GET /ping answers "Ok.". It stops
// the server when the test ends and, if the test failed, logs the tail of
// the server's error log. At most one Options may be given. A missing
// binary fails the test; it never skips.
func Start(t testing.TB, opts ...Options) *Server {
	t.Helper()
	if !e2eBuild {
		// go test ./... without the tag must need nothing installed: a
		// test starting ClickHouse belongs in a file built with it.
		t.Fatal("chtest: Start in a test built without the e2e tag; put the test in a file with //go:build e2e")
	}
	var o Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		t.Fatalf("chtest: Start takes at most one Options, got %d", len(opts))
	}
	if err := o.validate(); err != nil {
		t.Fatalf("chtest: %v", err)
	}
	if raw := os.Getenv(EnvURL); raw != "" {
		return startExternal(t, raw, o)
	}
	bin, err := findBinary()
	if err != nil {
		t.Fatal(missingBinary)
	}
	claims, err := openPortClaims()
	if err != nil {
		t.Fatalf("chtest: %v", err)
	}
	s := newServer(nil)
	s.bin, s.dir, s.opts, s.claims = bin, t.TempDir(), o, claims
	// Registered after t.TempDir, so it runs before the directory goes.
	t.Cleanup(func() { s.cleanup(t) })

	n := 2
	if o.TLSCertFile != "" {
		n = 3
	}
	for attempt := 1; ; attempt++ {
		s.releasePorts(s.ports)
		got, err := pickPorts(n, claims, nil, listenLoopback)
		if err != nil {
			t.Fatalf("chtest: %v", err)
		}
		p := ports{HTTP: got[0], TCP: got[1]}
		if n == 3 {
			p.HTTPS = got[2]
		}
		s.ports = p
		if err := writeConfig(s.dir, p, o); err != nil {
			t.Fatalf("chtest: write config: %v", err)
		}
		err = s.launch()
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortInUse) || attempt == launchAttempts {
			t.Fatalf("chtest: start clickhouse-server: %v\n%s", err, s.errLogTail())
		}
	}
}

// newServer returns a Server with its HTTP client, for ext or, with nil,
// for a process to launch.
func newServer(ext *external) *Server {
	return &Server{
		ext: ext,
		// No keep-alive: a pooled connection to a killed server would fail
		// the next request after Restart.
		client: &http.Client{
			Transport: &http.Transport{DisableKeepAlives: true},
			Timeout:   time.Minute,
		},
	}
}

// findBinary looks for clickhouse-server on PATH, then where Debian puts
// it: /usr/sbin, which is not on an ordinary user's PATH.
func findBinary() (string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New(missingBinary)
}

// pickPorts asks the kernel for n distinct free loopback ports and claims
// them in c, passing over the ports skip names and those another Server
// claimed: that server may be stopped, to bind them again. The kernel may
// give the ports to anyone once pickPorts returns; launch reports
// errPortInUse if another process bound one first.
func pickPorts(n int, c *portClaims, skip func(port int) bool, listen func() (net.Listener, error)) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var got []int
	fail := func(err error) ([]int, error) {
		for _, port := range got {
			c.release(port)
		}
		return nil, err
	}
	for len(got) < n {
		if len(ls) == maxPortPicks {
			return fail(fmt.Errorf("no free port unclaimed by another test's server in %d picks", maxPortPicks))
		}
		l, err := listen()
		if err != nil {
			return fail(fmt.Errorf("free port: %w", err))
		}
		// Held until the end, so that the kernel gives another port next.
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if skip != nil && skip(port) {
			continue
		}
		ok, err := c.claim(port)
		if err != nil {
			return fail(err)
		}
		if ok {
			got = append(got, port)
		}
	}
	return got, nil
}

// listenLoopback listens on a port of the kernel's choice, for pickPorts.
func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// releasePorts gives the claims on p up, before Start picks others.
func (s *Server) releasePorts(p ports) {
	for _, port := range []int{p.HTTP, p.TCP, p.HTTPS} {
		if port != 0 {
			s.claims.release(port)
		}
	}
}

// launch starts the binary on the written config and waits for /ping.
// On failure the process is gone when launch returns.
func (s *Server) launch() error {
	errLog := filepath.Join(s.dir, "log", "server.err.log")
	var errLogStart int64
	if fi, err := os.Stat(errLog); err == nil {
		errLogStart = fi.Size()
	}
	out, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.dir, "config.xml"))
	cmd.Dir = s.dir
	cmd.Stdout = out
	cmd.Stderr = out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if err := s.waitReady(p); err != nil {
		s.stopProcess(p, syscall.SIGKILL, killTimeout)
		if logContains(errLog, errLogStart, "Address already in use") {
			return fmt.Errorf("%w: %v", errPortInUse, err)
		}
		return err
	}
	return nil
}

// logContains reports whether the file at path holds substr past offset.
func logContains(path string, offset int64, substr string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	return err == nil && strings.Contains(string(b), substr)
}

// waitReady polls GET /ping until it answers "Ok.\n", the process exits or
// readyTimeout passes.
func (s *Server) waitReady(p *process) error {
	ping := &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true},
		Timeout:   time.Second,
	}
	url := s.URL() + "/ping"
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("clickhouse-server exited before it was ready: %v", p.err)
		default:
		}
		if resp, err := ping.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "Ok.\n" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clickhouse-server not ready on %s after %v", s.HTTPAddr(), readyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopProcess sends sig and waits up to timeout for p to exit, then sends
// SIGKILL and waits up to killTimeout. It reports whether p exited on sig.
func (s *Server) stopProcess(p *process, sig syscall.Signal, timeout time.Duration) (bool, error) {
	if p == nil || !p.running() {
		return true, nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && p.running() {
		return false, fmt.Errorf("signal %v to pid %d: %w", sig, p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
		return true, nil
	case <-time.After(timeout):
	}
	if err := p.cmd.Process.Kill(); err != nil && p.running() {
		return false, fmt.Errorf("kill pid %d: %w", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
		return false, nil
	case <-time.After(killTimeout):
		return false, fmt.Errorf("pid %d still running %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
	}
}

func (s *Server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// cleanup stops the server for good at the end of the test.
func (s *Server) cleanup(t testing.TB) {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	defer s.client.CloseIdleConnections()
	if p := s.current(); p != nil {
		if graceful, err := s.stopProcess(p, syscall.SIGTERM, stopTimeout); err != nil {
			t.Errorf("chtest: stop clickhouse-server: %v", err)
		} else if !graceful {
			t.Logf("chtest: clickhouse-server ignored SIGTERM for %v; killed", stopTimeout)
		}
	}
	if t.Failed() {
		t.Logf("chtest: clickhouse-server on %s, files in %s; error log tail:\n%s", s.HTTPAddr(), s.dir, s.errLogTail())
	}
	if err := s.claims.close(); err != nil {
		t.Errorf("chtest: %v", err)
	}
}

// HTTPAddr is the server's HTTP address, "127.0.0.1:port".
func (s *Server) HTTPAddr() string {
	if s.ext != nil {
		return s.ext.addr
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports.HTTP))
}

// TCPAddr is the server's native-protocol address, "127.0.0.1:port", for
// clickhouse-client --host 127.0.0.1 --port port.
func (s *Server) TCPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports.TCP))
}

// HTTPSAddr is the server's https address, "127.0.0.1:port", or "" when
// Options gave it no certificate.
func (s *Server) HTTPSAddr() string {
	if s.ports.HTTPS == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports.HTTPS))
}

// URL is the server's HTTP base URL, "http://127.0.0.1:port", without
// credentials.
func (s *Server) URL() string {
	return "http://" + s.HTTPAddr()
}

// Dir is the server's directory: config.xml, users.xml, data/, log/.
func (s *Server) Dir() string {
	return s.dir
}

// Pid is the process id of the running server, or of the last one once it
// was stopped or killed.
func (s *Server) Pid() int {
	if p := s.current(); p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Stop stops the server with SIGTERM and waits for it to exit. After
// stopTimeout it falls back to SIGKILL and says so in the test log. The
// data directory is kept for Restart. Stopping a stopped server does
// nothing.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.needsProcess(t, "Stop")
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	p := s.current()
	graceful, err := s.stopProcess(p, syscall.SIGTERM, stopTimeout)
	if err != nil {
		t.Fatalf("chtest: stop clickhouse-server: %v", err)
	}
	if !graceful {
		t.Logf("chtest: clickhouse-server ignored SIGTERM for %v; killed", stopTimeout)
	}
}

// Kill ends the server with SIGKILL and waits for the process to go. The
// data directory is kept for Restart. Killing a stopped server does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.needsProcess(t, "Kill")
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if _, err := s.stopProcess(s.current(), syscall.SIGKILL, killTimeout); err != nil {
		t.Fatalf("chtest: kill clickhouse-server: %v", err)
	}
}

// Restart starts the server again on the same HTTP (and HTTPS) port,
// configuration and data directory and waits for /ping. A running server
// is stopped first, as Stop does. The native protocol's port (TCPAddr)
// may change: while the server was down, another process may have been
// given it as the local port of a connection (it is in the kernel's
// ephemeral range), and nothing here needs it kept.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.needsProcess(t, "Restart")
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if graceful, err := s.stopProcess(s.current(), syscall.SIGTERM, stopTimeout); err != nil {
		t.Fatalf("chtest: stop clickhouse-server: %v", err)
	} else if !graceful {
		t.Logf("chtest: clickhouse-server ignored SIGTERM for %v; killed", stopTimeout)
	}
	for attempt := 1; ; attempt++ {
		err := s.launch()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortInUse) || attempt == launchAttempts {
			t.Fatalf("chtest: restart clickhouse-server on %s: %v\n%s", s.HTTPAddr(), err, s.errLogTail())
		}
		if err := s.newTCPPort(); err != nil {
			t.Fatalf("chtest: restart clickhouse-server on %s: %v", s.HTTPAddr(), err)
		}
	}
}

// newTCPPort moves the native protocol to another free port, keeping the
// others, and writes the config again. The caller holds lifecycle.
func (s *Server) newTCPPort() error {
	mine := func(port int) bool {
		return port == s.ports.HTTP || port == s.ports.HTTPS || port == s.ports.TCP
	}
	got, err := pickPorts(1, s.claims, mine, listenLoopback)
	if err != nil {
		return err
	}
	old := s.ports.TCP
	s.mu.Lock()
	s.ports.TCP = got[0]
	s.mu.Unlock()
	if err := s.claims.release(old); err != nil {
		return err
	}
	return writeConfig(s.dir, s.ports, s.opts)
}

// errLogTail returns the last errLogTail lines of the server's error log,
// without the stack-trace frames 18.16 writes after every exception.
func (s *Server) errLogTail() string {
	f, err := os.Open(filepath.Join(s.dir, "log", "server.err.log"))
	if err != nil {
		return fmt.Sprintf("(no error log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || isStackFrame(line) {
			continue
		}
		lines = append(lines, line)
		if len(lines) > 2*errLogTail {
			lines = lines[len(lines)-errLogTail:]
		}
	}
	if len(lines) > errLogTail {
		lines = lines[len(lines)-errLogTail:]
	}
	if len(lines) == 0 {
		return "(error log empty)"
	}
	return strings.Join(lines, "\n")
}

// isStackFrame reports whether line looks like "12. /lib/...(...)".
func isStackFrame(line string) bool {
	line = strings.TrimLeft(line, " ")
	i := 0
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	return i > 0 && strings.HasPrefix(line[i:], ". ")
}
