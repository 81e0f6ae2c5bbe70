package gossip

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestReplicator_CaughtUp_everyPeer checks that a member without peers is
// not caught up, and that once it has peers CaughtUp closes only when it
// holds what each of them holds: a and b hold different keys (they do not
// know each other) and the late member links to both.
func TestReplicator_CaughtUp_everyPeer(t *testing.T) {
	a, b := startReplNode(t, "a", nil), startReplNode(t, "b", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const keys = 3000 // more than one pull chunk on each
	for i := range keys {
		if _, err := a.cli.Put(ctx, fmt.Sprint("a/", i), "v"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.cli.Put(ctx, fmt.Sprint("b/", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	late := startReplNode(t, "late", nil)
	// Several digest intervals (100 ms) without a peer.
	select {
	case <-late.repl.CaughtUp():
		t.Fatal("CaughtUp closed on a member without peers")
	case <-time.After(500 * time.Millisecond):
	}
	a.peers.set([]Peer{late.asPeer()})
	b.peers.set([]Peer{late.asPeer()})
	late.peers.set([]Peer{a.asPeer(), b.asPeer()})
	select {
	case <-late.repl.CaughtUp():
	case <-time.After(10 * time.Second):
		t.Fatal("CaughtUp not closed within 10s of its peers appearing")
	}
	for _, key := range []string{"a/0", fmt.Sprint("a/", keys-1), "b/0", fmt.Sprint("b/", keys-1)} {
		if got := value(t, late, key); got != "v" {
			t.Errorf("%s on the late member when CaughtUp closed: got %s, want v", key, got)
		}
	}
}
