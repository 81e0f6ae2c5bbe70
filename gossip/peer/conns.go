package peer

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
)

// ErrConnsClosed is returned by Conns.Get after Close.
var ErrConnsClosed = errors.New("peer: connections closed")

// Conns keeps one client connection per peer address, opened with Dial
// and opts on first use and kept until Close: the members a node calls
// are few. It is safe for concurrent use.
type Conns struct {
	opts []grpc.DialOption

	mu     sync.Mutex // guards conns and closed
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewConns returns an empty set whose connections Dial opens with opts.
func NewConns(opts ...grpc.DialOption) *Conns {
	return &Conns{opts: opts, conns: make(map[string]*grpc.ClientConn)}
}

// Get returns the connection to addr, dialing it on first use;
// ErrConnsClosed once Close was called.
func (c *Conns) Get(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrConnsClosed
	}
	if conn, ok := c.conns[addr]; ok {
		return conn, nil
	}
	conn, err := Dial(addr, c.opts...)
	if err != nil {
		return nil, fmt.Errorf("peer: dial %s: %w", addr, err)
	}
	c.conns[addr] = conn
	return conn, nil
}

// Close closes every connection; later Gets fail. It is safe to call
// more than once.
func (c *Conns) Close() {
	c.mu.Lock()
	conns := c.conns
	c.conns, c.closed = nil, true
	c.mu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
}
