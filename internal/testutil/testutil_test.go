package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestEventually_succeedsOnceCondHolds(t *testing.T) {
	calls := 0
	f := &fatalTB{TB: t}
	Eventually(f, 5*time.Second, "third call", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if f.msg != "" || calls != 3 {
		t.Errorf("got %d calls and failure %q, want 3 calls and no failure", calls, f.msg)
	}
}

func TestEventually_failsWithLastError(t *testing.T) {
	calls := 0
	f := &fatalTB{TB: t}
	start := time.Now()
	Eventually(f, 100*time.Millisecond, "never", func() error {
		calls++
		return fmt.Errorf("call %d", calls)
	})
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %v, want about 100ms", d)
	}
	want := fmt.Sprintf("never: not within 100ms: call %d", calls)
	if f.msg != want || calls < 2 {
		t.Errorf("got failure %q after %d calls, want %q after several", f.msg, calls, want)
	}
}

func TestFreePort_neverTwice(t *testing.T) {
	seen := make(map[int]bool)
	for range 50 {
		p := FreePort(t)
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("FreePort: got %d, want a port not seen before (%d seen)", p, len(seen))
		}
		seen[p] = true
	}
}

func TestFreeAddr_listenable(t *testing.T) {
	addr := FreeAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("FreeAddr: got %q, want 127.0.0.1:<port>", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on FreeAddr's %s: %v", addr, err)
	}
	_ = l.Close()
}

func TestFreePortOn_udp(t *testing.T) {
	p := FreePortOn(t, "127.0.0.1", true)
	pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("UDP on FreePortOn's port %d: %v", p, err)
	}
	_ = pc.Close()
}

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	bin, err := Build(dir, "./testdata/hello")
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if bin != filepath.Join(dir, "hello") {
		t.Errorf("Build: got %s, want %s", bin, filepath.Join(dir, "hello"))
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("built binary: %v, mode %v; want an executable", err, st)
	}
	if _, err := Build(dir, "./testdata/nope"); err == nil || !strings.Contains(err.Error(), "go build ./testdata/nope") {
		t.Errorf("Build of a missing package: got %v, want a go build error", err)
	}
}
