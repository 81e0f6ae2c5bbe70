//go:build e2e

package e2e

import (
	"context"
	"os"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRaft_forceNewClusterRecovers follows operations.md's recovery of
// a cluster that lost its majority for good: two of three nodes killed
// with their disks, the survivor restarted with --force-new-cluster and
// its usual flags (--join naming a dead node), the others wiped and
// started again, then the flag removed. The survivor must be ready
// (/readyz) and serve its keys on its own: it said "gossip not joined"
// until a seed answered, so a StatefulSet never saw it ready and never
// went on to the next step.
func TestRaft_forceNewClusterRecovers(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes, clis := c.startThreeRaft()
	a, b, cc := nodes[0], nodes[1], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	for i := range 5 {
		if _, err := clis[i%3].Put(ctx, "kept/"+string(rune('a'+i)), "x"); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range nodes {
		p.Kill()
	}
	// b survives; a and c lost their disks.
	b.Args = append(b.Args, "--force-new-cluster")
	b.Restart(t) // waits for /readyz
	cli := clusterClient(t, b.ClientAddr)
	if _, err := cli.Put(ctx, "after/recovery", "x"); err != nil {
		t.Fatalf("put on the survivor: %v", err)
	}
	resp, err := cli.Get(ctx, "kept/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 5 {
		t.Fatalf("the survivor holds %v keys (%v), want 5", resp, err)
	}

	// The others come back on empty data dirs, joining the survivor;
	// then the flag comes out (a restart with it would cut the cluster
	// down to the survivor again).
	for _, p := range []*Proc{a, cc} {
		if err := os.RemoveAll(p.DataDir); err != nil {
			t.Fatal(err)
		}
		if _, ok := flagValue(p.Args, "join"); !ok {
			p.Args = append(p.Args, "--join", b.GossipAddr)
		}
		p.Restart(t)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Args = slices.DeleteFunc(b.Args, func(s string) bool { return s == "--force-new-cluster" })
	b.Restart(t)
	all := []*Proc{a, b, cc}
	waitMembers(t, all, all)
	clis = clientsOf(t, all...)
	waitLeader(t, all, clis)
	requireOneKeySpace(t, all, clis)
	for i, cl := range clis {
		resp, err := cl.Get(ctx, "kept/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 5 {
			t.Errorf("%s holds %v kept keys (%v), want 5", all[i].Name, resp, err)
		}
	}
}
