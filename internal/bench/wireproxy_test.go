package bench

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// startUpstream serves handle on every connection to a free loopback
// port until the test ends, then closes the listener and every
// connection and waits for the handlers.
func startUpstream(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { handle(c) })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// startTestProxy starts a wire proxy in front of upstream, stopped when
// the test ends.
func startTestProxy(t *testing.T, upstream string, idle time.Duration) *wireProxy {
	t.Helper()
	p, err := startWireProxy(upstream, idle)
	if err != nil {
		t.Fatalf("startWireProxy: %v", err)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return p
}

// digestReply is what the digest upstream answers a request of n bytes
// with digest sum: the digest, then n/3 bytes of 'r'.
func digestReply(sum [sha256.Size]byte, n int) []byte {
	return append(sum[:], bytes.Repeat([]byte{'r'}, n/3)...)
}

// digestUpstream reads a connection to its end, answers digestReply and
// closes it.
func digestUpstream(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil {
		return
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	_, _ = c.Write(digestReply(sum, int(n)))
}

// TestWireProxy_counts sends requests of several sizes through the proxy
// at once, each on its own connection that it half-closes after the
// request: every request must reach the upstream intact, every answer the
// client, and the counts must be exactly the bytes of each way.
func TestWireProxy_counts(t *testing.T) {
	p := startTestProxy(t, startUpstream(t, digestUpstream), time.Minute)
	sizes := []int{0, 1, 1000, 100_000, 1 << 20}
	var wantSent, wantReceived int64
	errs := make([]error, len(sizes))
	var wg sync.WaitGroup
	for i, n := range sizes {
		req := make([]byte, n)
		_, _ = rand.Read(req)
		want := digestReply(sha256.Sum256(req), n)
		wantSent += int64(n)
		wantReceived += int64(len(want))
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", p.addr(), 5*time.Second)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(req); err != nil {
				errs[i] = err
				return
			}
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				errs[i] = err
				return
			}
			got, err := io.ReadAll(c)
			switch {
			case err != nil:
				errs[i] = err
			case !bytes.Equal(got, want):
				errs[i] = errors.New("the answer is not the digest of the request as sent")
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request of %d bytes: %v", sizes[i], err)
		}
	}
	got := p.counts()
	if want := (wireCounts{sent: wantSent, received: wantReceived, conns: int64(len(sizes))}); got != want {
		t.Errorf("counts: got %+v, want %+v", got, want)
	}
}

// TestWireProxy_stop_closesOpenConnections stops the proxy while a
// client and the upstream both hold a connection open: stop must close
// it and return, and the client must see its end.
func TestWireProxy_stop_closesOpenConnections(t *testing.T) {
	held := make(chan struct{})
	up := startUpstream(t, func(c net.Conn) {
		defer c.Close()
		if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
			return
		}
		close(held)
		_, _ = io.Copy(io.Discard, c) // until the proxy closes its end
	})
	p, err := startWireProxy(up, time.Minute)
	if err != nil {
		t.Fatalf("startWireProxy: %v", err)
	}
	c, err := net.DialTimeout("tcp", p.addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatalf("write: %v", err)
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream got no hello within 10s")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- p.stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("stop: got %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return within 10s with a connection open")
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("client read after stop: got %d bytes, %v; want the connection's end", n, err)
	}
	if err := p.stop(); err != nil {
		t.Errorf("second stop: got %v, want nil", err)
	}
	if got := p.counts(); got.sent != 5 || got.conns != 1 {
		t.Errorf("counts: got %+v, want 5 bytes sent on 1 connection", got)
	}
	if _, err := net.DialTimeout("tcp", p.addr(), time.Second); err == nil {
		t.Errorf("dial after stop: got a connection, want none")
	}
}

// TestWireProxy_upstreamDown closes a client's connection at once when
// the upstream refuses it, and counts no connection.
func TestWireProxy_upstreamDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	down := l.Addr().String()
	_ = l.Close()
	p := startTestProxy(t, down, time.Minute)
	c, err := net.DialTimeout("tcp", p.addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read: got %d bytes, %v; want EOF", n, err)
	}
	if got := p.counts(); got != (wireCounts{}) {
		t.Errorf("counts: got %+v, want none", got)
	}
}

func TestWireCounts_sub(t *testing.T) {
	got := wireCounts{sent: 10, received: 7, conns: 3}.sub(wireCounts{sent: 4, received: 2, conns: 1})
	if want := (wireCounts{sent: 6, received: 5, conns: 2}); got != want {
		t.Errorf("sub: got %+v, want %+v", got, want)
	}
}

func TestStartWireProxy_badIdle(t *testing.T) {
	if p, err := startWireProxy("127.0.0.1:1", 0); err == nil {
		_ = p.stop()
		t.Errorf("startWireProxy with no idle timeout: got nil error")
	}
}
