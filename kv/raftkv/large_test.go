package raftkv

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
	"chute/kv/raftpeer"
)

// TestLargeEntries_reachAJoiningVoter: a member added after a run of
// entries of the largest size gets them all, and the cluster of two
// commits again. With MaxAppendEntries at 32, 32 such entries made a
// request over the transport's 64 MiB bound; raft resent it unchanged
// for ever, so the second voter never caught up and nothing committed.
// At 16 the requests fit, but took longer than the fast lease.
func TestLargeEntries_reachAJoiningVoter(t *testing.T) {
	big := func(c *Config) { c.MaxCommandBytes = DefaultMaxCommandBytes }
	// A lease of seconds: under the race detector and make test's load,
	// encoding requests of 9 MiB outlasted the loopback lease of 250 ms,
	// and the leader stepped down before every catch-up finished.
	lease := func(c *raft.Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	}
	m1 := startRaft(t, "m1", testutil.FreeAddr(t), 0xabc, newDisk(), big, lease)
	m2 := startRaft(t, "m2", testutil.FreeAddr(t), 0xabc, newDisk(), big, lease)
	if err := m1.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: m1.id, Address: raft.ServerAddress(m1.addr)}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, m1)
	for i := range 32 {
		cmd := bytes.Repeat([]byte{'a' + byte(i%26)}, DefaultMaxCommandBytes)
		if err := m1.c.Propose(testCtx(t), cmd); err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
	}
	// What raftnode's reconcile does for a second member.
	if err := m1.raft.AddVoter(m2.id, raft.ServerAddress(m2.addr), 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("adding the second voter: %v", err)
	}
	// Catching up moves 72 MiB: under the race detector and make test's
	// load that takes seconds, beyond one write's apply timeout.
	testutil.Eventually(t, 60*time.Second, "a small write after the second voter joined", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return m1.c.Propose(ctx, []byte("small"))
	})
	want := m1.sm.Applied()
	testutil.EventuallyTrue(t, 30*time.Second, "the new voter applies what the leader did", func() bool {
		return m2.sm.Applied() >= want
	})
}

// TestMaxAppendEntries_withinTheMessageBound: MaxAppendEntries entries
// of the largest command fit in one message of the peer link.
func TestMaxAppendEntries_withinTheMessageBound(t *testing.T) {
	if fit := raftpeer.EntriesPerRequest(raftpeer.DefaultMaxMessageBytes, DefaultMaxCommandBytes); MaxAppendEntries > fit {
		t.Fatalf("MaxAppendEntries %d: at most %d entries of %d bytes fit in %d", MaxAppendEntries, fit, DefaultMaxCommandBytes, raftpeer.DefaultMaxMessageBytes)
	}
}
