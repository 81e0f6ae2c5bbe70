//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/testutil"
)

// leaseTTL is the TTL, in seconds, of the leases whose owner the lease
// tests kill.
const leaseTTL = 3

// keptLease is a lease a test keeps alive.
type keptLease struct {
	ID   clientv3.LeaseID
	stop context.CancelFunc // stops the keep-alives
	last atomic.Int64       // unix nanoseconds of the last keep-alive answer
}

// lastAnswer returns when the last keep-alive answer came.
func (k *keptLease) lastAnswer() time.Time { return time.Unix(0, k.last.Load()) }

// keepLease grants a lease of ttl seconds through cli and keeps it alive
// until stop, the end of the test, or cli's node dying.
func keepLease(t *testing.T, cli *clientv3.Client, ttl int64) *keptLease {
	t.Helper()
	ctx, cancel := rpcCtx()
	defer cancel()
	lease, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	kaCtx, kaCancel := context.WithCancel(context.Background())
	t.Cleanup(kaCancel)
	k := &keptLease{ID: lease.ID, stop: kaCancel}
	k.last.Store(time.Now().UnixNano())
	ka, err := cli.KeepAlive(kaCtx, lease.ID)
	if err != nil {
		t.Fatalf("keep-alive: %v", err)
	}
	go func() {
		for range ka { // drained until stopped, the node dies or the test ends
			k.last.Store(time.Now().UnixNano())
		}
	}()
	return k
}

// TestCluster_leaseKeysVanishAfterOwnerKilled grants a lease through a,
// keeps it alive through a and attaches keys to it: b and c show them,
// also after more than the TTL while the lease is kept alive. After kill
// -9 of a (the raft leader, and the only way to the lease's holder) the
// keys vanish on b and c, not before the TTL has passed since the last
// keep-alive and not long after the TTL plus a new leader's election; a
// key without a lease stays.
func TestCluster_leaseKeysVanishAfterOwnerKilled(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	cliA := clusterClient(t, a.ClientAddr)
	others := []*Proc{b, cc}
	clis := clientsOf(t, others...)

	kept := keepLease(t, cliA, leaseTTL)
	lease := kept.ID
	ctx, cancel := rpcCtx()
	defer cancel()
	const leased = 5
	for i := range leased {
		if _, err := cliA.Put(ctx, fmt.Sprintf("leased/%d", i), "v", clientv3.WithLease(lease)); err != nil {
			t.Fatalf("put with lease on a: %v", err)
		}
	}
	if _, err := cliA.Put(ctx, "plain", "v"); err != nil {
		t.Fatalf("put on a: %v", err)
	}
	count := func(cli *clientv3.Client) (int64, error) {
		ctx, cancel := rpcCtx()
		defer cancel()
		resp, err := cli.Get(ctx, "leased/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return resp.Count, nil
	}
	for i, cli := range clis {
		testutil.Eventually(t, convergeTimeout, "leased keys on "+others[i].Name, func() error {
			if n, err := count(cli); err != nil || n != leased {
				return fmt.Errorf("%d keys, %v; want %d", n, err, leased)
			}
			return nil
		})
	}

	// A live owner keeps its keys everywhere past the TTL.
	hold := time.Now().Add(leaseTTL*time.Second + time.Second)
	for time.Now().Before(hold) {
		for i, cli := range clis {
			if n, err := count(cli); err != nil || n != leased {
				t.Fatalf("%s while a keeps the lease alive: %d leased keys, %v; want %d", others[i].Name, n, err, leased)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	killed := time.Now()
	a.Kill()
	// first: when a node first misses a leased key; gone: when it has none.
	// A lease lives its TTL from the last keep-alive the leader took.
	var first, gone [2]time.Duration
	var detected time.Duration
	lower := kept.lastAnswer().Add(leaseTTL*time.Second - 100*time.Millisecond).Sub(killed)
	upper := leaseTTL*time.Second + fastDetection + 3*time.Second
	for gone[0] == 0 || gone[1] == 0 {
		for i, cli := range clis {
			if gone[i] != 0 {
				continue
			}
			n, err := count(cli)
			if err != nil {
				t.Fatalf("count on %s: %v", others[i].Name, err)
			}
			if n < leased && first[i] == 0 {
				first[i] = time.Since(killed)
			}
			if n == 0 {
				gone[i] = time.Since(killed)
			}
		}
		if detected == 0 && !listsMember(t, clis[0], "a") {
			detected = time.Since(killed)
		}
		if time.Since(killed) > upper+time.Second {
			t.Fatalf("leased keys still there %v after kill -9 of their owner (all gone from b, c after %v), want within %v", time.Since(killed), gone, upper)
		}
		time.Sleep(clusterPoll)
	}
	t.Logf("kill -9 a (lease TTL %ds): a gone from b's member list after %v; leased keys vanished on b after %v, on c after %v",
		leaseTTL, detected, gone[0], gone[1])
	for i := range clis {
		if first[i] < lower || gone[i] > upper {
			t.Errorf("leased keys vanished on %s from %v to %v after kill -9 of a, want between %v and %v",
				others[i].Name, first[i], gone[i], lower, upper)
		}
	}
	for i, cli := range clis {
		d, err := dump(cli)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"plain": "v"}; dumpDiff(want, d) != "" {
			t.Errorf("%s after a's lease expired: %s", others[i].Name, dumpDiff(want, d))
		}
	}
}

// TestCluster_restartedOwnerNewLeaseKeepsKeys kills a, through which a
// client keeps a lease with a key alive, and the client with it, and
// restarts a on its data dir once b and c have seen it fail. A lease
// granted on the restarted a then keeps its own key on every node (its id
// is new), while the old lease's key, which nobody renews, vanishes.
func TestCluster_restartedOwnerNewLeaseKeepsKeys(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	all := []*Proc{a, b, cc}
	put := func(cli *clientv3.Client, key string, lease clientv3.LeaseID) {
		t.Helper()
		ctx, cancel := rpcCtx()
		defer cancel()
		if _, err := cli.Put(ctx, key, "up", clientv3.WithLease(lease)); err != nil {
			t.Fatalf("put %s on a: %v", key, err)
		}
	}
	has := func(cli *clientv3.Client, key string) (bool, error) {
		ctx, cancel := rpcCtx()
		defer cancel()
		resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
		return err == nil && resp.Count == 1, err
	}
	waitHas := func(clis []*clientv3.Client, key string) {
		t.Helper()
		for i, cli := range clis {
			testutil.Eventually(t, convergeTimeout, key+" on "+all[i].Name, func() error {
				if ok, err := has(cli, key); !ok {
					return fmt.Errorf("missing (%v)", err)
				}
				return nil
			})
		}
	}

	clis := clientsOf(t, all...)
	oldLease := keepLease(t, clis[0], leaseTTL)
	old := oldLease.ID
	put(clis[0], "svc/old", old)
	waitHas(clis, "svc/old")

	killed := time.Now()
	a.Kill()
	oldLease.stop() // the holder goes with its node
	waitGoneFrom(t, "a", []*Proc{b, cc}, clis[1:], killed, membershipTimeout)
	a.Restart(t)
	restarted := time.Now()
	clis[0] = clusterClient(t, a.ClientAddr)
	waitMembers(t, all, all)

	renewed := keepLease(t, clis[0], 60).ID
	if renewed == old {
		t.Fatalf("lease granted after the restart has the old lease's id %016x", old)
	}
	put(clis[0], "svc/new", renewed)
	t.Logf("lease before the restart %016x, after %016x", old, renewed)
	waitHas(clis, "svc/new")

	// Watch past the old lease's TTL counted from the restart (and from
	// the failure detection before it), plus slack.
	until := restarted.Add(leaseTTL*time.Second + fastDetection + 2*time.Second)
	oldGone := make([]time.Duration, len(all))
	for time.Now().Before(until) || slices.Contains(oldGone, 0) {
		for i, cli := range clis {
			if ok, err := has(cli, "svc/new"); err != nil || !ok {
				t.Fatalf("svc/new, attached to lease %016x granted on the restarted a (TTL 60 s, kept alive), is gone from %s %v after the restart (%v); the old lease %016x had TTL %d s",
					renewed, all[i].Name, time.Since(restarted), err, old, leaseTTL)
			}
			if oldGone[i] == 0 {
				if ok, err := has(cli, "svc/old"); err != nil {
					t.Fatal(err)
				} else if !ok {
					oldGone[i] = time.Since(killed)
				}
			}
		}
		if time.Now().After(until.Add(5 * time.Second)) {
			t.Fatalf("svc/old, whose lease died with the old a, still there %v after the kill (gone after %v)", time.Since(killed), oldGone)
		}
		time.Sleep(clusterPoll)
	}
	t.Logf("svc/old gone %v after the kill; svc/new kept", oldGone)
}
