package gossip

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"chute/gossip/peer"
	"chute/kv"

	"chute/internal/testutil"
)

// staticPeers is a PeerSource the test edits.
type staticPeers struct {
	mu    sync.Mutex
	peers []Peer
}

func (s *staticPeers) Peers() []Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Peer(nil), s.peers...)
}

func (s *staticPeers) set(p []Peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peers = p
}

// replNode is one member of an in-process replicated cluster.
type replNode struct {
	id    uint64
	kv    *kv.Server
	repl  *Replicator
	link  *peer.Server // the peer listener, serving repl
	peers *staticPeers
	cli   *clientv3.Client
}

// startReplNode starts a kv server and its replicator on loopback.
func startReplNode(t *testing.T, name string, mutate func(*ReplicatorConfig)) *replNode {
	t.Helper()
	id := MemberID(name)
	rcfg := ReplicatorConfig{
		ClusterID:      ClusterID("test"),
		MemberID:       id,
		DigestInterval: 100 * time.Millisecond,
		PeersInterval:  20 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&rcfg)
	}
	repl, err := NewReplicator(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	link, err := peer.NewServer(peer.Config{ListenURLs: []string{"http://127.0.0.1:0"}, ClusterID: rcfg.ClusterID})
	if err != nil {
		t.Fatal(err)
	}
	kcfg := kv.DefaultConfig()
	kcfg.Name = name
	kcfg.MemberID = id
	kcfg.ClusterID = ClusterID("test")
	kcfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	kcfg.MinLeaseTTL = 1
	kcfg.Replicator = repl
	srv, err := kv.New(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	n := &replNode{id: id, kv: srv, repl: repl, link: link, peers: &staticPeers{}}
	repl.Start(srv, n.peers, link)
	t.Cleanup(func() { n.stop(t) })
	if err := link.Start(); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientAddrs()[0].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	n.cli = cli
	return n
}

func (n *replNode) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.repl.Shutdown(ctx); err != nil {
		t.Errorf("replicator shutdown: %v", err)
	}
	if err := n.link.Shutdown(ctx); err != nil {
		t.Errorf("peer listener shutdown: %v", err)
	}
	if err := n.kv.Shutdown(ctx); err != nil {
		t.Errorf("kv shutdown: %v", err)
	}
}

func (n *replNode) asPeer() Peer { return Peer{ID: n.id, Addr: n.link.Addrs()[0].String()} }

// mesh makes every node a peer of every other.
func mesh(nodes ...*replNode) {
	for _, n := range nodes {
		var ps []Peer
		for _, o := range nodes {
			if o != n {
				ps = append(ps, o.asPeer())
			}
		}
		n.peers.set(ps)
	}
}

// converged reports whether all nodes hold the same key space.
func converged(nodes ...*replNode) bool {
	d0 := fmt.Sprint(nodes[0].kv.Digest())
	for _, n := range nodes[1:] {
		if fmt.Sprint(n.kv.Digest()) != d0 {
			return false
		}
	}
	return true
}

func value(t *testing.T, n *replNode, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := n.cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return "<none>"
	}
	return string(r.Kvs[0].Value)
}

// TestReplicator_putsReachEveryNode spreads puts and deletes over three
// nodes and checks that all end with the same keys and values, and that a
// watch on one node sees puts made on another.
func TestReplicator_putsReachEveryNode(t *testing.T) {
	a, b, c := startReplNode(t, "a", nil), startReplNode(t, "b", nil), startReplNode(t, "c", nil)
	mesh(a, b, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wc := c.cli.Watch(ctx, "k/", clientv3.WithPrefix())
	nodes := []*replNode{a, b, c}
	const n = 300
	for i := range n {
		if _, err := nodes[i%3].cli.Put(ctx, fmt.Sprintf("k/%03d", i), fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.cli.Delete(ctx, "k/000"); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 10*time.Second, "three nodes to converge", func() bool { return converged(a, b, c) })
	for _, nd := range nodes {
		if got := value(t, nd, "k/299"); got != "v299" {
			t.Fatalf("k/299 on %x: got %s", nd.id, got)
		}
		if got := value(t, nd, "k/000"); got != "<none>" {
			t.Fatalf("deleted k/000 on %x: got %s", nd.id, got)
		}
	}
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < n {
		select {
		case resp := <-wc:
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					seen[string(ev.Kv.Key)] = true
				}
			}
		case <-deadline:
			t.Fatalf("watch on c saw %d of %d puts", len(seen), n)
		}
	}
}

// TestReplicator_concurrentWritesConverge writes one key on two nodes at once
// many times and checks that all nodes end with one value.
func TestReplicator_concurrentWritesConverge(t *testing.T) {
	a, b, c := startReplNode(t, "a", nil), startReplNode(t, "b", nil), startReplNode(t, "c", nil)
	mesh(a, b, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, nd := range []*replNode{a, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if _, err := nd.cli.Put(ctx, "same", fmt.Sprintf("%x-%d", nd.id, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testutil.EventuallyTrue(t, 10*time.Second, "convergence", func() bool { return converged(a, b, c) })
	va, vb, vc := value(t, a, "same"), value(t, b, "same"), value(t, c, "same")
	if va != vb || vb != vc {
		t.Fatalf("values differ: a=%s b=%s c=%s", va, vb, vc)
	}
}

// TestReplicator_lateJoinerAndLostWrites checks that a node that joins late
// pulls the whole state, and that changes dropped on a full queue are
// repaired by digest exchanges.
func TestReplicator_lateJoinerAndLostWrites(t *testing.T) {
	tiny := func(c *ReplicatorConfig) { c.QueueWrites = 1; c.BatchWrites = 1 }
	a, b := startReplNode(t, "a", tiny), startReplNode(t, "b", tiny)
	mesh(a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 500 {
		if _, err := a.cli.Put(ctx, fmt.Sprint("x/", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	testutil.EventuallyTrue(t, 10*time.Second, "a and b to converge despite drops", func() bool { return converged(a, b) })
	if a.repl.Dropped() == 0 {
		t.Log("no change was dropped; the queue did not fill")
	}
	late := startReplNode(t, "late", nil)
	mesh(a, b, late)
	testutil.EventuallyTrue(t, 10*time.Second, "the late node to pull everything", func() bool { return converged(a, b, late) })
	if got := value(t, late, "x/499"); got != "v" {
		t.Fatalf("x/499 on the late node: got %s", got)
	}
}

// TestReplicator_leaseOfFailedMemberExpires checks that keys attached to a
// lease of a member that failed vanish elsewhere once the TTL passed, and
// that a member back in time keeps them.
func TestReplicator_leaseOfFailedMemberExpires(t *testing.T) {
	a, b := startReplNode(t, "a", nil), startReplNode(t, "b", nil)
	mesh(a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := a.cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Put(ctx, "eph", "1", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	ka, err := a.cli.KeepAlive(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()
	testutil.EventuallyTrue(t, 5*time.Second, "eph on b", func() bool { return value(t, b, "eph") == "1" })

	b.kv.ExpireLeasesOf(a.id)
	b.kv.KeepLeasesOf(a.id) // a came back before the TTL passed
	time.Sleep(1500 * time.Millisecond)
	if got := value(t, b, "eph"); got != "1" {
		t.Fatalf("eph on b after a came back: got %s, want 1", got)
	}
	start := time.Now()
	b.kv.ExpireLeasesOf(a.id)
	testutil.EventuallyTrue(t, 5*time.Second, "eph to vanish on b", func() bool { return value(t, b, "eph") == "<none>" })
	if d := time.Since(start); d < time.Second {
		t.Fatalf("eph vanished after %v, before the 1s TTL", d)
	}
}
