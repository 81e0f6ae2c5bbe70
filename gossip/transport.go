package gossip

import (
	"fmt"
	"log"
	"net"
	"sync"

	"github.com/hashicorp/memberlist"
)

// gatedTransport is memberlist's own UDP and TCP transport with its
// inbound side held until open: what arrives before waits in the
// kernel's buffers and the listeners, and reaches memberlist after.
//
// memberlist.Create starts its listeners before it adds the local node
// to its own member list (setAlive). A message about our name handled
// in between, as from the other members still gossiping about this
// node's previous run when it restarts at the same address, makes
// memberlist add us as a dead node and raise our incarnation to refute
// it; setAlive's alive, older than that, is then ignored, and the node
// stays dead in its own list. A node dead to itself never refutes a
// suspicion again, so the first probe the others lose marks it failed
// for good, in every view but its own. Opened after serf.Create (which
// returns after setAlive), the transport hands memberlist those
// messages when it is alive, and it refutes them as it should.
type gatedTransport struct {
	*memberlist.NetTransport

	packets chan *memberlist.Packet
	streams chan net.Conn

	opened    chan struct{} // closed by open
	openOnce  sync.Once
	done      chan struct{} // closed when Shutdown starts
	innerDown chan struct{} // closed when the NetTransport has stopped
	downOnce  sync.Once
	shutErr   error
	wg        sync.WaitGroup // the two pumps
}

var _ memberlist.NodeAwareTransport = (*gatedTransport)(nil)

// newGatedTransport binds host:port (UDP and TCP) and returns the
// transport, closed to inbound messages until open.
func newGatedTransport(host string, port int, logger *log.Logger) (*gatedTransport, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{host},
		BindPort:  port,
		Logger:    logger,
	})
	if err != nil {
		return nil, fmt.Errorf("could not set up network transport: %w", err)
	}
	t := &gatedTransport{
		NetTransport: nt,
		packets:      make(chan *memberlist.Packet),
		streams:      make(chan net.Conn),
		opened:       make(chan struct{}),
		done:         make(chan struct{}),
		innerDown:    make(chan struct{}),
	}
	t.wg.Add(2)
	go pump(t, nt.PacketCh(), t.packets, func(*memberlist.Packet) {})
	go pump(t, nt.StreamCh(), t.streams, func(c net.Conn) { _ = c.Close() })
	return t, nil
}

// open lets inbound messages through. Safe to call more than once.
func (t *gatedTransport) open() {
	t.openOnce.Do(func() { close(t.opened) })
}

func (t *gatedTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

func (t *gatedTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown stops the NetTransport and the pumps. Safe to call more than
// once (memberlist calls it, and New after a failed serf.Create).
func (t *gatedTransport) Shutdown() error {
	t.downOnce.Do(func() {
		close(t.done)
		t.shutErr = t.NetTransport.Shutdown()
		close(t.innerDown)
		t.wg.Wait()
	})
	return t.shutErr
}

// pump hands what arrives on in to out once t is open. From Shutdown on
// it discards what memberlist no longer takes and keeps reading until the
// NetTransport has stopped: its listeners block on an unbuffered send,
// and its Shutdown waits for them.
func pump[T any](t *gatedTransport, in <-chan T, out chan<- T, discard func(T)) {
	defer t.wg.Done()
	select {
	case <-t.opened:
	case <-t.done:
	}
	for {
		select {
		case v := <-in:
			select {
			case out <- v:
			case <-t.done:
				discard(v)
			}
		case <-t.innerDown:
			return
		}
	}
}
