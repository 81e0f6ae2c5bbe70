package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// wireMaxConns bounds the connections a wire proxy forwards at once;
	// one more is closed as soon as it is accepted. A chute node keeps a
	// few inserts in flight per queue, one connection each.
	wireMaxConns = 256
	// wireIdleTimeout closes a proxied connection one of whose ends sent
	// nothing for this long: longer than chute's 30 s insert timeout, so
	// an insert ClickHouse is slow to answer is not cut short.
	wireIdleTimeout = 2 * time.Minute
	// wireDialTimeout bounds the proxy's connection to its upstream.
	wireDialTimeout = 5 * time.Second
	// wireBufSize is the copy buffer of one direction of a connection.
	wireBufSize = 32 << 10
)

// wireCounts are what a wire proxy forwarded.
type wireCounts struct {
	// sent is the bytes written to the upstream (client to server),
	// received the bytes written back to the clients.
	sent, received int64
	// conns is the connections forwarded: accepted and dialled through.
	conns int64
}

// sub is c less an earlier reading.
func (c wireCounts) sub(before wireCounts) wireCounts {
	return wireCounts{sent: c.sent - before.sent, received: c.received - before.received, conns: c.conns - before.conns}
}

// wireProxy is a TCP proxy on 127.0.0.1 in front of one upstream address
// that counts the bytes it forwards each way. Put between a chute node
// and ClickHouse, it measures what the node's requests carried on the
// wire, compressed or not, without relying on the node's own figures.
//
// It owns one goroutine that accepts and, per connection, two that copy
// (one each way); stop closes the listener and every connection and waits
// for all of them. Its methods may be called from several goroutines.
type wireProxy struct {
	upstream string
	l        net.Listener
	idle     time.Duration

	sent, received, conns atomic.Int64

	mu      sync.Mutex            // guards open and stopped
	open    map[net.Conn]struct{} // both ends of every forwarded connection
	stopped bool

	wg        sync.WaitGroup // the accept loop and every connection's goroutines
	acceptErr error          // why the accept loop ended early; read after wg.Wait
	stopOnce  sync.Once
}

// startWireProxy listens on a free port of 127.0.0.1 and forwards every
// connection to upstream (host:port) until stop; a connection one of
// whose ends sent nothing for idle is closed.
func startWireProxy(upstream string, idle time.Duration) (*wireProxy, error) {
	if idle <= 0 {
		return nil, fmt.Errorf("bench: wire proxy: idle timeout %v, want positive", idle)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: wire proxy: %w", err)
	}
	p := &wireProxy{upstream: upstream, l: l, idle: idle, open: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// addr is the proxy's host:port.
func (p *wireProxy) addr() string { return p.l.Addr().String() }

// counts is what the proxy forwarded so far: the bytes a direction's
// copy wrote, so every byte counted has left the proxy.
func (p *wireProxy) counts() wireCounts {
	return wireCounts{sent: p.sent.Load(), received: p.received.Load(), conns: p.conns.Load()}
}

// stop closes the listener and every connection and waits for the
// proxy's goroutines. It is idempotent; it reports an accept loop that
// ended for another reason than stop.
func (p *wireProxy) stop() error {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.stopped = true
		for c := range p.open {
			_ = c.Close() // unblocks its copy
		}
		p.mu.Unlock()
		_ = p.l.Close() // unblocks Accept
	})
	p.wg.Wait()
	if p.acceptErr != nil {
		return fmt.Errorf("bench: wire proxy: %w", p.acceptErr)
	}
	return nil
}

// acceptLoop accepts connections until the listener is closed; an
// accept error other than that ends it early, and stop reports it.
func (p *wireProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.acceptErr = err
			}
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// track adds c to the open connections; false when the proxy is stopping
// or already holds wireMaxConns client connections' ends.
func (p *wireProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || len(p.open) >= 2*wireMaxConns {
		return false
	}
	p.open[c] = struct{}{}
	return true
}

// untrack closes c and forgets it.
func (p *wireProxy) untrack(c net.Conn) {
	_ = c.Close() // the copies are done, or never started
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
}

// forward dials the upstream for client and copies both ways until both
// directions have ended, then closes both ends.
func (p *wireProxy) forward(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	up, err := net.DialTimeout("tcp", p.upstream, wireDialTimeout)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	p.conns.Add(1)
	var toClient sync.WaitGroup
	toClient.Go(func() { p.copyConn(client, up, &p.received) })
	p.copyConn(up, client, &p.sent)
	toClient.Wait()
}

// copyConn copies src to dst, adding every byte written to n. At src's
// end it half-closes dst, so the peer sees the end too and may still
// answer; on any other failure, or when src sent nothing for p.idle, it
// closes both, which ends the other direction as well.
func (p *wireProxy) copyConn(dst, src net.Conn, n *atomic.Int64) {
	buf := make([]byte, wireBufSize)
	for {
		if err := src.SetReadDeadline(time.Now().Add(p.idle)); err != nil {
			break
		}
		r, rerr := src.Read(buf)
		if r > 0 {
			w, werr := dst.Write(buf[:r])
			n.Add(int64(w))
			if werr != nil {
				break
			}
		}
		if errors.Is(rerr, io.EOF) {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			break
		}
		if rerr != nil {
			break
		}
	}
	_ = src.Close()
	_ = dst.Close()
}
