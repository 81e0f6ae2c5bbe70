//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/testutil"
)

// A lease is one object of the cluster: granted on a, used on b, kept
// alive on c and revoked on b, its key is gone everywhere once the revoke
// returns.
func TestRaft_lease_acrossNodes(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	a, b, c := clis[0], clis[1], clis[2]

	ctx, cancel := rpcCtx()
	defer cancel()
	grant, err := a.Grant(ctx, 30)
	if err != nil {
		t.Fatalf("grant on a: %v", err)
	}
	if _, err := b.Put(ctx, "lease/k", "v", clientv3.WithLease(grant.ID)); err != nil {
		t.Fatalf("put --lease on b: %v", err)
	}
	ka, err := c.KeepAliveOnce(ctx, grant.ID)
	if err != nil {
		t.Fatalf("keep-alive on c: %v", err)
	}
	if ka.TTL != 30 {
		t.Errorf("keep-alive on c: got TTL %d, want 30", ka.TTL)
	}
	for i, cli := range clis {
		ttl, err := cli.TimeToLive(ctx, grant.ID, clientv3.WithAttachedKeys())
		if err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 1 {
			t.Errorf("%s: timetolive: got %+v, %v; want the lease with lease/k", nodes[i].Name, ttl, err)
		}
	}
	if _, err := b.Revoke(ctx, grant.ID); err != nil {
		t.Fatalf("revoke on b: %v", err)
	}
	// Linearizable reads right after the revoke: gone on every node.
	for i, cli := range clis {
		resp, err := cli.Get(ctx, "lease/k")
		if err != nil || len(resp.Kvs) != 0 {
			t.Errorf("%s: get after revoke: got %v, %v; want no key", nodes[i].Name, resp, err)
		}
		if ttl, err := cli.TimeToLive(ctx, grant.ID); err != nil || ttl.TTL != -1 {
			t.Errorf("%s: timetolive after revoke: got %+v, %v; want TTL -1", nodes[i].Name, ttl, err)
		}
	}
	// Serializable reads are local: each node applied the revoke at once
	// or very soon after.
	for i, cli := range clis {
		testutil.Eventually(t, time.Second, nodes[i].Name+": serializable get after revoke", func() error {
			resp, err := cli.Get(ctx, "lease/k", clientv3.WithSerializable())
			if err != nil {
				return err
			}
			if len(resp.Kvs) != 0 {
				return fmt.Errorf("got %d keys, want none", len(resp.Kvs))
			}
			return nil
		})
	}
}

// A lease nobody keeps alive expires within TTL + 1 s on every node, and
// still does when the leader is killed halfway through its TTL.
func TestRaft_lease_expiry(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	const ttl = 6

	t.Run("quiet", func(t *testing.T) {
		start := leaseKeptOnce(t, clis, ttl, "expiry/quiet")
		times := waitKeyGone(t, nodes, clis, "expiry/quiet", start, ttl)
		t.Logf("expired %v after the last keep-alive (ttl %ds)", times, ttl)
	})

	t.Run("leader killed", func(t *testing.T) {
		start := leaseKeptOnce(t, clis, ttl, "expiry/killed")
		leader, term := waitLeader(t, nodes, clis)
		for time.Since(start) < ttl*time.Second/2 {
			time.Sleep(pollInterval)
		}
		nodes[leader].Kill()
		t.Logf("killed leader %s (term %d) %v after the keep-alive", nodes[leader].Name, term, time.Since(start).Round(time.Millisecond))
		var live []*Proc
		var liveClis []*clientv3.Client
		for i := range nodes {
			if i != leader {
				live, liveClis = append(live, nodes[i]), append(liveClis, clis[i])
			}
		}
		times := waitKeyGone(t, live, liveClis, "expiry/killed", start, ttl)
		t.Logf("expired %v after the last keep-alive (ttl %ds)", times, ttl)

		nodes[leader].Restart(t)
		ctx, cancel := rpcCtx()
		defer cancel()
		if resp, err := clis[leader].Get(ctx, "expiry/killed"); err != nil || len(resp.Kvs) != 0 {
			t.Errorf("%s restarted: get: got %v, %v; want no key", nodes[leader].Name, resp, err)
		}
	})
}

// Leases kept alive through the other two nodes outlive a leader frozen
// (SIGSTOP) for longer than their TTL and then resumed (SIGCONT), twice.
// The resumed member's own deadlines went stale while it was frozen:
// until it hears of the new term it still believes it leads, and the
// revokes it then decides on must die with its term, neither committed
// by it nor handed to the new leader.
func TestRaft_lease_leaderFrozen(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	// Runs before the cluster's cleanup stops the nodes: a stopped
	// process takes no SIGTERM.
	t.Cleanup(func() {
		for _, p := range nodes {
			_ = p.Signal(syscall.SIGCONT)
		}
	})
	const ttl, leases = 6, 16
	for round := range 2 {
		leader, _ := waitLeader(t, nodes, clis)
		others := othersThan(leader)
		keeper := clusterClient(t, nodes[others[0]].ClientAddr, nodes[others[1]].ClientAddr)
		kctx, stopKeeping := context.WithCancel(context.Background())
		ids := make([]clientv3.LeaseID, leases)
		for i := range ids {
			ctx, cancel := rpcCtx()
			grant, err := keeper.Grant(ctx, ttl)
			if err == nil {
				_, err = keeper.Put(ctx, fmt.Sprintf("frozen/%d/%d", round, i), "v", clientv3.WithLease(grant.ID))
			}
			cancel()
			if err != nil {
				t.Fatalf("round %d: lease %d: %v", round+1, i, err)
			}
			ids[i] = grant.ID
			kch, err := keeper.KeepAlive(kctx, grant.ID)
			if err != nil {
				t.Fatalf("round %d: keep-alive of lease %d: %v", round+1, i, err)
			}
			go func() { // ends when stopKeeping closes kch
				for range kch {
				}
			}()
		}
		if err := nodes[leader].Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("round %d: SIGSTOP %s: %v", round+1, nodes[leader].Name, err)
		}
		next := raftLeader(t, nodes, clis, others)
		t.Logf("round %d: %s frozen, %s leads", round+1, nodes[leader].Name, nodes[next].Name)
		time.Sleep((ttl + 2) * time.Second) // every deadline the frozen member knows passes
		if err := nodes[leader].Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("round %d: SIGCONT %s: %v", round+1, nodes[leader].Name, err)
		}
		time.Sleep(3 * time.Second) // the resumed member's lease checks run
		ctx, cancel := rpcCtx()
		resp, err := keeper.Get(ctx, fmt.Sprintf("frozen/%d/", round), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != leases {
			t.Errorf("round %d: keys of kept leases after %s resumed: got %v, %v; want %d", round+1, nodes[leader].Name, resp, err, leases)
		}
		for i, id := range ids {
			if left, err := keeper.TimeToLive(ctx, id); err != nil || left.TTL <= 0 {
				t.Errorf("round %d: lease %d after %s resumed: got %+v, %v; want it alive", round+1, i, nodes[leader].Name, left, err)
			}
		}
		cancel()
		stopKeeping()
	}
}

// leaseKeptOnce grants a lease of ttl seconds on the first node, puts key
// with it on the second and keeps it alive once on the third, and returns
// when that keep-alive was answered, once every node holds key.
func leaseKeptOnce(t *testing.T, clis []*clientv3.Client, ttl int64, key string) time.Time {
	t.Helper()
	ctx, cancel := rpcCtx()
	defer cancel()
	grant, err := clis[0].Grant(ctx, ttl)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	if _, err := clis[1].Put(ctx, key, "v", clientv3.WithLease(grant.ID)); err != nil {
		t.Fatalf("put --lease: %v", err)
	}
	if _, err := clis[2].KeepAliveOnce(ctx, grant.ID); err != nil {
		t.Fatalf("keep-alive: %v", err)
	}
	kept := time.Now()
	// Linearizable gets: every node applied the put before the test
	// polls its local copy.
	for i, cli := range clis {
		if resp, err := cli.Get(ctx, key); err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s through node %d: got %v, %v; want the key", key, i, resp, err)
		}
	}
	return kept
}

// waitKeyGone polls a serializable get of key on every node until it is
// gone, and fails the test when a node still has it TTL + 1 s after start
// or lost it before the TTL (less a poll's slack): a renewal is answered
// once every member knows it, so no member expires the lease early. It
// returns when each node lost it.
func waitKeyGone(t *testing.T, nodes []*Proc, clis []*clientv3.Client, key string, start time.Time, ttl int64) []time.Duration {
	t.Helper()
	deadline := start.Add(time.Duration(ttl)*time.Second + time.Second)
	gone := make([]time.Duration, len(nodes))
	left := len(nodes)
	for left > 0 {
		for i, cli := range clis {
			if gone[i] != 0 {
				continue
			}
			ctx, cancel := rpcCtx()
			resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
			cancel()
			if err == nil && len(resp.Kvs) == 0 {
				gone[i] = time.Since(start)
				left--
			}
		}
		if left > 0 && time.Now().After(deadline) {
			t.Fatalf("%s still on some node %v after the last keep-alive (ttl %ds, want gone within ttl + 1s); gone at %v", key, time.Since(start), ttl, gone)
		}
		time.Sleep(pollInterval)
	}
	for i, d := range gone {
		if d < time.Duration(ttl)*time.Second-100*time.Millisecond {
			t.Errorf("%s: %s gone %v after the last keep-alive, before its ttl of %ds", nodes[i].Name, key, d, ttl)
		}
	}
	return gone
}
