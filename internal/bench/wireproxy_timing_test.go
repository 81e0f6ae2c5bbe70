package bench

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestWireProxy_idle closes a connection whose client sends nothing for
// the idle timeout, though the upstream keeps it open.
func TestWireProxy_idle(t *testing.T) {
	up := startUpstream(t, func(c net.Conn) {
		defer c.Close()
		_, _ = io.Copy(io.Discard, c)
	})
	const idle = 100 * time.Millisecond
	p := startTestProxy(t, up, idle)
	start := time.Now() // the proxy's idle clock starts after the dial's
	c, err := net.DialTimeout("tcp", p.addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read: got %d bytes, %v; want EOF once idle", n, err)
	}
	if d := time.Since(start); d < idle {
		t.Errorf("closed after %v, want at least the idle timeout %v", d, idle)
	}
}
