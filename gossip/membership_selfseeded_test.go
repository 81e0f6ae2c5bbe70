package gossip

import (
	"net"
	"testing"

	"chute/internal/testutil"
)

// TestMembership_SelfSeeded checks the three ways a node starts: without
// seeds it is self-seeded from New; with a seed that is itself under
// another name (a DNS name of a one-node cluster) it is self-seeded after
// its first join round, and not joined; with a seed where nothing
// listens it is neither.
func TestMembership_SelfSeeded(t *testing.T) {
	lone := newTestMember(t, "lone", gossipTestAddr(t, "127.0.1.11"), nil)
	if !lone.SelfSeeded() {
		t.Error("node without seeds: SelfSeeded false, want true")
	}

	addrSelf := gossipTestAddr(t, "127.0.0.1") // reached by the name "localhost"
	_, port, _ := net.SplitHostPort(addrSelf)
	self := newTestMember(t, "self", addrSelf, joining("localhost:"+port))
	if self.SelfSeeded() {
		t.Error("node seeded by its own DNS name: SelfSeeded true before any join round")
	}
	self.Start()
	testutil.EventuallyTrue(t, settle, "self to find only itself at its seed", func() bool { return self.logs.count("only this node answered") >= 1 })
	if !self.SelfSeeded() {
		t.Error("node seeded by its own DNS name: SelfSeeded false after a round, want true")
	}
	if isClosed(self.Joined()) {
		t.Error("node seeded by its own DNS name: Joined closed, want open")
	}

	nowhere := gossipTestAddr(t, "127.0.1.12") // free: nothing listens
	lost := newTestMember(t, "lost", gossipTestAddr(t, "127.0.1.13"), joining(nowhere))
	lost.Start()
	testutil.EventuallyTrue(t, settle, "lost to fail joining twice", func() bool { return lost.logs.count("join failed") >= 2 })
	if lost.SelfSeeded() {
		t.Error("node whose seed does not answer: SelfSeeded true, want false")
	}
}
