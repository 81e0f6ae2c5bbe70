package dispatch

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
)

// onePeer is a Cluster of one other member at addr.
type onePeer struct{ addr string }

func (p onePeer) Peers() []gossip.Peer { return []gossip.Peer{{ID: 2, Addr: p.addr}} }

func (p onePeer) Lookup(id uint64) (gossip.Peer, bool) {
	if id != 2 {
		return gossip.Peer{}, false
	}
	return p.Peers()[0], true
}

// TestManager_forwarderFor_afterShutdown: a put that reaches forwarderFor
// while Shutdown runs gets no forwarder. One made after Shutdown closed
// the others would run until the process ends, and Shutdown, waiting for
// it, would never return.
func TestManager_forwarderFor_afterShutdown(t *testing.T) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.cluster = onePeer{addr: "127.0.0.1:1"} // nothing listens: the forwarder only dials lazily
	done := make(chan error, 1)
	go func() { done <- m.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown of an idle manager did not return")
	}
	if _, err := m.forwarderFor(2); status.Code(err) != codes.Unavailable {
		t.Fatalf("forwarderFor after Shutdown: got %v, want Unavailable", err)
	}
	m.mu.Lock()
	n := len(m.forwarders)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d forwarders made after Shutdown", n)
	}
}
