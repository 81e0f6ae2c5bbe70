package raftnode

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

// TestNode_twoRaftClustersNeverMerge: a cluster of a and b, and c
// bootstrapped on its own (as with --bootstrap-expect too low), come to
// see each other (gossip joined them under one cluster name). Neither
// leader adds the other's members, and each keeps its own log: c's
// entries are not overwritten by a's, nor a's cluster blocked by a voter
// that refuses it.
func TestNode_twoRaftClustersNeverMerge(t *testing.T) {
	w := &world{}
	a, b := newMember(t, w, "a"), newMember(t, w, "b")
	c := newMember(t, w, "c")
	c.side = 2
	a.start(t, w, true, nil)
	b.start(t, w, true, nil)
	c.start(t, w, true, nil)
	testutil.Eventually(t, 30*time.Second, "two clusters", func() error {
		cfg, err := a.node.Configuration()
		if err != nil {
			return err
		}
		if want := map[raft.ServerID]raft.ServerSuffrage{a.node.ID(): raft.Voter, b.node.ID(): raft.Voter}; !equalSuffrages(suffrages(cfg), want) {
			return fmt.Errorf("a has %v", suffrages(cfg))
		}
		if !c.node.IsLeader() {
			return fmt.Errorf("c does not lead")
		}
		return nil
	})
	if a.node.RaftCluster() == "" || b.node.RaftCluster() != a.node.RaftCluster() {
		t.Fatalf("a has raft cluster %q, b %q: want one, the same", a.node.RaftCluster(), b.node.RaftCluster())
	}
	if c.node.RaftCluster() == "" || c.node.RaftCluster() == a.node.RaftCluster() {
		t.Fatalf("c has raft cluster %q, a %q: want another", c.node.RaftCluster(), a.node.RaftCluster())
	}
	one := func() []*member { return []*member{a, b} }
	two := func() []*member { return []*member{c} }
	cmds1 := applyAmong(t, one, "one", 3)
	cmds2 := applyAmong(t, two, "two", 3)

	// Gossip joins them: every member sees the three.
	w.mu.Lock()
	w.merged = true
	w.notifyLocked()
	w.mu.Unlock()

	// Many reconcile rounds (100 ms) go by; then each cluster still
	// commits on its own, with its own configuration.
	time.Sleep(2 * time.Second)
	cmds1 = append(cmds1, applyAmong(t, one, "one-after", 1)...)
	cmds2 = append(cmds2, applyAmong(t, two, "two-after", 1)...)
	for _, x := range []struct {
		n    *Node
		want map[raft.ServerID]raft.ServerSuffrage
	}{
		{waitLeaderAmong(t, one), map[raft.ServerID]raft.ServerSuffrage{a.node.ID(): raft.Voter, b.node.ID(): raft.Voter}},
		{c.node, map[raft.ServerID]raft.ServerSuffrage{c.node.ID(): raft.Voter}},
	} {
		cfg, err := x.n.Configuration()
		if err != nil {
			t.Fatal(err)
		}
		if got := suffrages(cfg); !equalSuffrages(got, x.want) {
			t.Fatalf("%s: configuration %v, want %v", x.n.ID(), got, x.want)
		}
	}
	waitApplied(t, a, cmds1)
	waitApplied(t, b, cmds1)
	waitApplied(t, c, cmds2)
	for _, m := range []*member{a, c} {
		if !strings.Contains(m.log.String(), "belongs to another raft cluster") {
			t.Errorf("%s logged nothing of the other raft cluster's members", m.name)
		}
	}

	// A new member d, without raft state, comes up seen by both: it takes
	// one's id and ends up in that cluster alone, and both go on
	// committing. (Which leader adds it first is up to timing; that the
	// other adds it only as a non-voter, so that it never blocks that
	// cluster's majority, is TestPlanChange_foreign's.)
	d := newMember(t, w, "d")
	d.start(t, w, true, nil)
	testutil.Eventually(t, 30*time.Second, "d in one raft cluster", func() error {
		id := d.node.RaftCluster()
		if id == "" {
			return fmt.Errorf("d has no raft cluster id")
		}
		for _, l := range []*Node{a.node, c.node} {
			cfg, err := l.Configuration()
			if err != nil {
				return err
			}
			in := slices.ContainsFunc(cfg.Servers, func(s raft.Server) bool { return s.ID == d.node.ID() })
			if mine := l.RaftCluster() == id; in != mine {
				return fmt.Errorf("%s (raft cluster %s) has d (of %s) in its configuration: %v", l.ID(), l.RaftCluster(), id, in)
			}
		}
		return nil
	})
	// d is in one of the two: both go on committing, d's with d counted.
	withD := func(ms ...*member) func() []*member {
		return func() []*member {
			if slices.ContainsFunc(ms, func(m *member) bool { return m.node.RaftCluster() == d.node.RaftCluster() }) {
				return append(slices.Clone(ms), d)
			}
			return ms
		}
	}
	applyAmong(t, withD(a, b), "one-after-d", 1)
	applyAmong(t, withD(c), "two-after-d", 1)
}

// TestNode_mintsClusterID: members whose state predates the raft cluster
// id (cleared from their stores here) get one: the leader proposes it,
// and every member takes it from the log, published as TagCluster.
func TestNode_mintsClusterID(t *testing.T) {
	w := &world{}
	ms, _ := startThree(t, w, nil)
	cmds := applyOn(t, w, "x", 2)
	old := ms[0].node.RaftCluster()
	for _, m := range ms {
		m.kill(t, w)
		clearClusterID(t, m)
	}
	for _, m := range ms {
		m.start(t, w, true, nil)
	}
	var id string
	testutil.Eventually(t, 30*time.Second, "one raft cluster id on every member", func() error {
		id = ms[0].node.RaftCluster()
		for _, m := range ms {
			if got := m.node.RaftCluster(); got == "" || got != id {
				return fmt.Errorf("%s has %q, a %q", m.name, got, id)
			}
			if got := m.node.Tags()[TagCluster]; got != id {
				return fmt.Errorf("%s publishes %q", m.name, got)
			}
		}
		return nil
	})
	if id == old {
		t.Fatalf("the minted id is the bootstrap's %s", old)
	}
	cmds = append(cmds, applyOn(t, w, "y", 2)...)
	for _, m := range ms {
		waitApplied(t, m, cmds)
	}
}

// TestNode_leaderWithoutIDTakesTheClusters: a member whose raft cluster
// id is gone (cleared here; a member down while the id came, its entry
// since in a snapshot) and elected first at a restart takes the id its
// configuration's servers publish, rather than minting one of its own,
// which would have made it remove every voter that kept the old one.
func TestNode_leaderWithoutIDTakesTheClusters(t *testing.T) {
	w := &world{}
	ms, want := startThree(t, w, nil)
	cmds := applyOn(t, w, "x", 2)
	id := ms[0].node.RaftCluster()
	for _, m := range ms {
		m.kill(t, w)
	}
	clearClusterID(t, ms[0])
	slow := func(c *Config) { // a wins the election
		c.Raft.HeartbeatTimeout, c.Raft.ElectionTimeout = 2*time.Second, 2*time.Second
	}
	ms[0].start(t, w, true, nil)
	ms[1].start(t, w, true, slow)
	testutil.EventuallyTrue(t, 30*time.Second, "a leads", ms[0].node.IsLeader)
	time.Sleep(500 * time.Millisecond) // reconcile rounds of a with c unknown
	ms[2].start(t, w, true, slow)
	testutil.Eventually(t, 30*time.Second, "a takes the cluster's id", func() error {
		if got := ms[0].node.RaftCluster(); got != id {
			return fmt.Errorf("a has %q, want %q", got, id)
		}
		return nil
	})
	time.Sleep(time.Second) // reconcile rounds: no voter removed
	waitConfiguration(t, w, want)
	cmds = append(cmds, applyOn(t, w, "y", 2)...)
	for _, m := range ms {
		if got := m.node.RaftCluster(); got != id {
			t.Errorf("%s has raft cluster %q, want %q", m.name, got, id)
		}
		waitApplied(t, m, cmds)
	}
}

// TestNode_leftBeforeTheIDComesBack: members whose state predates the
// raft cluster id left one after the other (a rolling stop of a chute
// version before it, SIGTERM), so that the configuration shrank to the
// last one; started again, that one mints an id alone. The others, with
// raft state and none, are not foreign: each takes the id a server of
// its own configuration publishes, and the leader adds them back. Before,
// they were refused for good, their data dirs to be wiped.
func TestNode_leftBeforeTheIDComesBack(t *testing.T) {
	w := &world{}
	ms, want := startThree(t, w, nil)
	cmds := applyOn(t, w, "x", 2)
	left := maps.Clone(want)
	for _, m := range ms[:2] {
		delete(left, m.node.ID())
		m.leave(t, w, left)
	}
	ms[2].leave(t, w, nil)
	for _, m := range ms {
		clearClusterID(t, m)
	}
	ms[2].start(t, w, true, nil)
	testutil.EventuallyTrue(t, 30*time.Second, "c mints an id", func() bool { return ms[2].node.RaftCluster() != "" })
	for _, m := range ms[:2] {
		m.start(t, w, true, nil)
	}
	waitConfiguration(t, w, want)
	id := ms[2].node.RaftCluster()
	cmds = append(cmds, applyOn(t, w, "y", 2)...)
	for _, m := range ms {
		if got := m.node.RaftCluster(); got != id {
			t.Errorf("%s has raft cluster %q, want %q", m.name, got, id)
		}
		waitApplied(t, m, cmds)
		if strings.Contains(m.log.String(), "member not added") {
			t.Errorf("%s logged a member of the cluster as not added", m.name)
		}
	}
}

// clearClusterID clears the raft cluster id in the stores of m, stopped,
// as a data dir of a chute version before the id has none, and in the
// tags its last node shows the others.
func clearClusterID(t *testing.T, m *member) {
	t.Helper()
	empty := ""
	m.node.cluster.v.Store(&empty)
	b := openBolt(t, filepath.Join(m.dir, raftDir, stableFile))
	if err := b.Set(clusterKey, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNode_idWithoutStateIsForgotten: a member that kept a raft cluster
// id and no raft state (a crash between keeping a bootstrap's id and
// the bootstrap) starts without it, and joins the cluster it finds: it
// refused that cluster's leader before, and never bootstrapped with the
// members it saw anew either.
func TestNode_idWithoutStateIsForgotten(t *testing.T) {
	w := &world{}
	a, x := newMember(t, w, "a"), newMember(t, w, "x")
	if err := os.MkdirAll(filepath.Join(x.dir, raftDir), 0o700); err != nil {
		t.Fatal(err)
	}
	b := openBolt(t, filepath.Join(x.dir, raftDir, stableFile))
	if err := b.Set(clusterKey, []byte("00000000000000e1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	a.start(t, w, true, nil)
	waitLeader(t, w)
	x.start(t, w, true, nil)
	waitConfiguration(t, w, map[raft.ServerID]raft.ServerSuffrage{a.node.ID(): raft.Voter, x.node.ID(): raft.Voter})
	if got, want := x.node.RaftCluster(), a.node.RaftCluster(); got != want {
		t.Fatalf("x has raft cluster %q, a %q", got, want)
	}
}
