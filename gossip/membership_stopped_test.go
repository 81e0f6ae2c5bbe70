package gossip

import (
	"context"
	"errors"
	"testing"

	"chute/internal/testutil"
)

// A serf that shuts down without Shutdown asking (what serf does when it
// loses its own name-conflict vote) closes Stopped with ErrSerfStopped;
// Leave then has nothing to do and Shutdown still succeeds.
func TestMembership_Stopped_serfShutDownUnderneath(t *testing.T) {
	a, b, _ := startTrio(t, 12, nil)
	if isClosed(b.Stopped()) || b.Err() != nil {
		t.Fatalf("b: Stopped closed (%v) before serf stopped", b.Err())
	}
	if err := b.serf.Shutdown(); err != nil {
		t.Fatalf("serf.Shutdown: %v", err)
	}
	testutil.EventuallyTrue(t, settle, "b to report serf stopped", func() bool { return isClosed(b.Stopped()) })
	if err := b.Err(); !errors.Is(err, ErrSerfStopped) {
		t.Errorf("b.Err() = %v, want ErrSerfStopped", err)
	}
	testutil.EventuallyTrue(t, settle, "a to see b failed", func() bool { return statusOf(a, "b") == StatusFailed })
	if err := b.Leave(context.Background()); err != nil {
		t.Errorf("Leave after serf stopped: %v, want nil", err)
	}
	if err := b.Shutdown(); err != nil {
		t.Errorf("Shutdown after serf stopped: %v", err)
	}
	if isClosed(a.Stopped()) {
		t.Errorf("a: Stopped closed: %v", a.Err())
	}
}

// Shutdown is asked for: Stopped stays open.
func TestMembership_Stopped_notByShutdown(t *testing.T) {
	a := newTestMember(t, "a", gossipTestAddr(t, "127.0.12.10"), nil)
	a.Start()
	if err := a.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if isClosed(a.Stopped()) || a.Err() != nil {
		t.Errorf("Stopped closed after Shutdown: %v", a.Err())
	}
}
