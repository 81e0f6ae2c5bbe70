//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"chute/gossip"
)

// TestRaft_allStoppedBeforeTheIDStartAgain: three nodes whose data dirs
// are of a chute version before the raft cluster id (the id cleared from
// their raft.db here), stopped one after the other with SIGTERM, so that
// the raft configuration shrank to the last one, then all started again
// on this version. The last one leads alone and mints an id; the other
// two take it from the servers of their own configuration and are added
// back, every key there. Before, the leader refused them for good (raft
// state and no id) and they never became ready.
func TestRaft_allStoppedBeforeTheIDStartAgain(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes, clis := c.startThreeRaft()
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	want := map[string]string{}
	for i := range 3 {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
		if _, err := clis[i].Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	// One after the other, each out of the configuration before the
	// next stops: the last one is left alone in it.
	for i, p := range nodes {
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
		if i < len(nodes)-1 {
			waitRaftLogLine(t, nodes[i+1:], convergeTimeout, "configuration changed", "reason=left", fmt.Sprintf("peer=%016x-", gossip.MemberID(p.Name)))
		}
	}
	for _, p := range nodes {
		clearRaftClusterID(t, p.DataDir)
	}
	for _, p := range nodes {
		relaunch(t, p)
	}
	waitAllReady(t, nodes...)
	// a and b, out of the configuration, took the id from c.
	for _, p := range nodes[:2] {
		waitRaftLogLine(t, []*Proc{p}, convergeTimeout, "raft cluster id taken from the servers of this member's configuration")
	}
	waitMembers(t, nodes, nodes)
	clis = clientsOf(t, nodes...)
	waitLeader(t, nodes, clis)
	if _, err := clis[0].Put(ctx, "after", "x"); err != nil {
		t.Fatalf("put after the restart: %v", err)
	}
	want["after"] = "x"
	waitConverged(t, nodes, clis, want, convergeTimeout)
	waitEveryNode(t, convergeTimeout, "one raft cluster id", nodes, func(p *Proc) error {
		st, err := statusOf(p)
		if err != nil {
			return err
		}
		ids := map[string]bool{}
		for _, m := range st.Members {
			ids[m.RaftCluster] = true
		}
		if len(st.Members) != 3 || len(ids) != 1 || ids[""] {
			return fmt.Errorf("/status members %d, raft cluster ids %v: want 3 members of one id", len(st.Members), ids)
		}
		return nil
	})
}

// clearRaftClusterID removes the raft cluster id from the raft.db of
// the stopped node whose data dir is dir, as a data dir of a chute
// version before the id has none.
func clearRaftClusterID(t testing.TB, dir string) {
	t.Helper()
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft", "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte("chute-raft-cluster"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
