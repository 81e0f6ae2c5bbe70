package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ProxyMode is what a Proxy does with a connection it accepts.
type ProxyMode int

const (
	// Forward connects to the target, after the proxy's latency, and
	// copies bytes both ways.
	Forward ProxyMode = iota
	// Hold keeps the connection open and reads nothing from it, as a
	// server that hangs, until the mode changes; then the new mode applies
	// to it.
	Hold
	// Refuse resets the connection at once, as a port nobody listens on.
	Refuse
)

func (m ProxyMode) String() string {
	switch m {
	case Forward:
		return "forward"
	case Hold:
		return "hold"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("ProxyMode(%d)", int(m))
}

// Proxy is a loopback TCP proxy in front of one target, such as
// ClickHouse's HTTP port, that can slow, hang or refuse the connections
// it accepts. chute's --clickhouse-url points at Proxy.URL. Since chute
// sends one request per connection (Connection: close), the latency is
// added to every insert. Its methods may be called from any goroutine.
type Proxy struct {
	dial DialFunc
	ln   net.Listener
	wg   sync.WaitGroup // the accept loop and every connection's goroutines

	mu      sync.Mutex // guards mode, latency, changed, conns, closed, records
	mode    ProxyMode
	latency time.Duration
	changed chan struct{} // closed and replaced at every SetMode and Close
	conns   map[net.Conn]struct{}
	closed  bool
	records []ConnRecord
}

// DialFunc connects a Proxy to its target.
type DialFunc func(ctx context.Context) (net.Conn, error)

// ConnRecord is one connection a Proxy forwarded, kept once it ended.
type ConnRecord struct {
	// Remote is the client's address.
	Remote string
	// Start is when the target answered the connection, End when the
	// connection closed.
	Start, End time.Time
	// Head is the first line the client sent, such as an HTTP request
	// line, cut at 512 bytes.
	Head string
}

// NewProxy listens on a free port of 127.0.0.1 and forwards what it
// accepts to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: proxy: %w", err)
	}
	return NewProxyListener(ln, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	}), nil
}

// NewProxyListener is a Proxy that accepts on ln, which it closes on
// Close, and connects with dial: a port forward into or out of a
// network namespace (Network.Dial, Network.ListenHub).
func NewProxyListener(ln net.Listener, dial DialFunc) *Proxy {
	p := &Proxy{dial: dial, ln: ln, changed: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	return p
}

// maxRecords bounds the connections a Proxy records: a long run keeps
// the first ones only.
const maxRecords = 1 << 16

// Records returns the connections forwarded so far that have ended, in
// the order they ended; at most maxRecords, the first ones.
func (p *Proxy) Records() []ConnRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ConnRecord(nil), p.records...)
}

// Addr is the proxy's address, such as "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is "http://" and Addr.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// SetMode changes what happens to connections accepted from now on, and
// to those held.
func (p *Proxy) SetMode(m ProxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	close(p.changed)
	p.changed = make(chan struct{})
}

// SetLatency makes every forwarded connection wait d before the proxy
// connects it to the target. Zero: none.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// Cut closes every connection open now, forwarded or held.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close() // ends its copy goroutines
	}
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines. It may be called more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.changed)
		p.changed = make(chan struct{})
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track adds c to the open connections, unless the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

// state returns the mode, latency and change signal, and whether the
// proxy is closed.
func (p *Proxy) state() (ProxyMode, time.Duration, <-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.latency, p.changed, p.closed
}

// serve handles one accepted connection until it ends.
func (p *Proxy) serve(c net.Conn) {
	defer p.untrack(c)
	for {
		mode, latency, changed, closed := p.state()
		if closed {
			return
		}
		switch mode {
		case Refuse:
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, not a polite close
			}
			return
		case Hold:
			<-changed
			continue
		}
		if latency > 0 {
			select {
			case <-changed:
				continue // the mode may have changed meanwhile
			case <-time.After(latency):
			}
		}
		p.forward(c)
		return
	}
}

// forward connects c to the target and copies both ways until either side
// closes.
func (p *Proxy) forward(c net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	up, err := p.dial(ctx)
	cancel()
	if err != nil {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // as the target refused us
		}
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	rec := ConnRecord{Remote: c.RemoteAddr().String(), Start: time.Now()}
	head := &headWriter{max: 512}
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(io.MultiWriter(up, head), c) // ends when c closes or fails
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	})
	_, _ = io.Copy(c, up)
	_ = c.Close() // ends the other copy
	wg.Wait()
	rec.End, rec.Head = time.Now(), head.line()
	p.mu.Lock()
	if len(p.records) < maxRecords {
		p.records = append(p.records, rec)
	}
	p.mu.Unlock()
}

// headWriter keeps the first max bytes written to it. It is written by
// one goroutine and read once that one has ended.
type headWriter struct {
	max int
	buf []byte
}

func (h *headWriter) Write(b []byte) (int, error) {
	if room := h.max - len(h.buf); room > 0 {
		h.buf = append(h.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// line is the first line kept, without its line end.
func (h *headWriter) line() string {
	line, _, _ := bytes.Cut(h.buf, []byte("\n"))
	return string(bytes.TrimSuffix(line, []byte("\r")))
}
