//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRaft_twoRaftClustersUnderOneName: a and b each bootstrapped a raft
// cluster of their own under one --cluster name (no --join between
// them, as a --bootstrap-expect too low can leave nodes started
// together); then b restarts with --join naming a, and gossip joins
// them. Neither adds the other to its raft cluster: both say so in their
// logs, each keeps its own keys and takes writes. Before the raft
// cluster id, a's leader added b as a voter and a's cluster stopped
// taking writes, b's log then at the mercy of a's leader.
func TestRaft_twoRaftClustersUnderOneName(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("a")
	planB := c.plan("b")
	b := c.start(planB)
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	cliA, cliB := clusterClient(t, a.ClientAddr), clusterClient(t, b.ClientAddr)
	if _, err := cliA.Put(ctx, "ka", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cliB.Put(ctx, "kb", "b"); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b = c.start(planB, "--data-dir", b.DataDir, "--join", a.GossipAddr)
	both := []*Proc{a, b}
	waitMembers(t, both, both)
	time.Sleep(2 * time.Second) // leaders' reconcile rounds: 500 ms each

	// Each puts one key more, then holds its own two keys and no other:
	// the old leader took b's log as its own where index and term
	// matched, and each then held some of the other's keys.
	for _, x := range []struct {
		p   *Proc
		own string
	}{{a, "ka"}, {b, "kb"}} {
		if _, err := clusterClient(t, x.p.ClientAddr).Put(ctx, x.own+"/after", "x"); err != nil {
			t.Fatalf("put on %s after gossip joined the two: %v", x.p.Name, err)
		}
	}
	for _, x := range []struct {
		p   *Proc
		own string
	}{{a, "ka"}, {b, "kb"}} {
		resp, err := clusterClient(t, x.p.ClientAddr).Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatalf("get on %s: %v", x.p.Name, err)
		}
		var got []string
		for _, kv := range resp.Kvs {
			got = append(got, string(kv.Key))
		}
		if want := []string{x.own, x.own + "/after"}; !slices.Equal(got, want) {
			t.Errorf("%s holds keys %q, want %q", x.p.Name, got, want)
		}
	}
	// /status shows each member's raft cluster: two ids, one each.
	st, err := statusOf(a)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, m := range st.Members {
		ids[m.Name] = m.RaftCluster
	}
	if len(ids) != 2 || ids["a"] == "" || ids["b"] == "" || ids["a"] == ids["b"] {
		t.Errorf("/status of a: raft clusters by member %v, want two different ids", ids)
	}
	waitRaftLogLine(t, []*Proc{a}, convergeTimeout, "member not added", "belongs to another raft cluster")
	waitRaftLogLine(t, []*Proc{b}, convergeTimeout, "member not added", "belongs to another raft cluster")
}
