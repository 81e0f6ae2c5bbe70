//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestCluster_joinAnyOrder starts three nodes in an order no seed list
// foresees: c joins a before a exists, then a starts alone, then b joins
// c. --join retries until a seed answers, so they end as one
// cluster: etcdctl member list on each shows the three names and client
// URLs.
func TestCluster_joinAnyOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	planA, planC := c.plan("a"), c.plan("c")
	// c serves alone while a is missing, not ready (ready_test.go).
	nc := c.startServing(planC, "--join", planA.GossipAddr)
	waitMembers(t, []*Proc{nc}, []*Proc{nc})
	na := c.start(planA)
	nb := c.startNode("b", "--join", nc.GossipAddr)
	all := []*Proc{na, nb, nc}
	waitMembers(t, all, all)

	// One cluster: a put on b reaches a, which nobody named as b's seed.
	clis := clientsOf(t, all...)
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := clis[1].Put(ctx, "joined", "b"); err != nil {
		t.Fatalf("put on b: %v", err)
	}
	waitConverged(t, all, clis, map[string]string{"joined": "b"}, convergeTimeout)
}

// intruderWindow is how long the wrong-key and wrong-cluster test watches
// the intruders keep trying to join: several rounds of --join's backoff.
const intruderWindow = 3 * time.Second

// TestCluster_wrongKeyOrClusterCannotJoin runs an encrypted two-node
// cluster and three nodes that try to join it: one with another
// --gossip-key, one with none, one with the right key but another
// --cluster. For intruderWindow none of them enters the cluster's member
// list, each one's list shows only itself, its writes fail (it never
// bootstraps a key space alone) and no data crosses. Then a node with the right key and cluster joins, which shows the
// window was long enough for a join.
func TestCluster_wrongKeyOrClusterCannotJoin(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	key, otherKey := gossipKey(t), gossipKey(t)
	na := c.startNode("a", "--gossip-key", key)
	nb := c.startNode("b", "--gossip-key", key, "--join", na.GossipAddr)
	members := []*Proc{na, nb}
	waitMembers(t, members, members)
	clis := clientsOf(t, members...)
	put := func(cli *clientv3.Client, p *Proc, key, val string) {
		t.Helper()
		ctx, cancel := rpcCtx()
		defer cancel()
		if _, err := cli.Put(ctx, key, val); err != nil {
			t.Fatalf("put %s on %s: %v", key, p.Name, err)
		}
	}
	put(clis[0], na, "cluster-data", "1")

	seeds := na.GossipAddr + "," + nb.GossipAddr
	// Never let in, the intruders are never ready: they only serve.
	intruders := []*Proc{
		c.startServing(c.plan("wrong-key"), "--gossip-key", otherKey, "--join", seeds),
		c.startServing(c.plan("no-key"), "--join", seeds),
		c.startServing(c.plan("other-cluster"), "--gossip-key", key, "--cluster", c.name+"-other", "--join", seeds),
	}
	intruderClis := clientsOf(t, intruders...)
	// A node whose seeds never answered never starts a key space of its
	// own: its writes fail, as etcd's do without a leader.
	for i, cli := range intruderClis {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Put(ctx, "intruder-data", intruders[i].Name)
		cancel()
		if err == nil {
			t.Fatalf("put on %s, whose seeds never answered: succeeded, want no leader", intruders[i].Name)
		}
	}

	wantMembers := []string{"a", "b"}
	deadline := time.Now().Add(intruderWindow)
	for polls := 0; ; polls++ {
		for i, cli := range clis {
			got, err := memberNames(cli)
			if err != nil {
				t.Fatalf("member list of %s: %v", members[i].Name, err)
			}
			if !slices.Equal(got, wantMembers) {
				t.Fatalf("member list of %s after %d polls: got %q, want %q", members[i].Name, polls, got, wantMembers)
			}
		}
		for i, cli := range intruderClis {
			got, err := memberNames(cli)
			if err != nil {
				t.Fatalf("member list of %s: %v", intruders[i].Name, err)
			}
			if want := []string{intruders[i].Name}; !slices.Equal(got, want) {
				t.Fatalf("member list of %s after %d polls: got %q, want %q", intruders[i].Name, polls, got, want)
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	etcdctl := lookTool(t, "etcdctl")
	for _, p := range intruders {
		got, err := ctlMembers(etcdctl, p.ClientAddr)
		if want := memberLines([]*Proc{p}); err != nil || !slices.Equal(got, want) {
			t.Errorf("etcdctl member list on %s: got %q, %v; want %q", p.Name, got, err, want)
		}
		// The window means something only if the intruder kept trying.
		log := p.Output()
		if n := strings.Count(log, "join failed"); n < 2 || strings.Contains(log, "joined cluster") {
			t.Errorf("%s: log shows %d failed join attempts (want 2 or more) and joined=%v:\n%s",
				p.Name, n, strings.Contains(log, "joined cluster"), log)
		}
	}

	// Data stays on its side.
	if err := sameData(members, clis, map[string]string{"cluster-data": "1"}); err != nil {
		t.Errorf("cluster holds intruders' data: %v", err)
	}

	// The control: the right key and cluster join within the same kind of window.
	nc := c.startNode("c", "--gossip-key", key, "--join", seeds)
	members = append(members, nc)
	waitMembers(t, members, members)
	for _, p := range intruders {
		waitMembers(t, []*Proc{p}, []*Proc{p})
	}
}

// gossipKey returns a random base64 AES-128 key for --gossip-key.
func gossipKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}
