//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// After SIGKILL of every node and a restart in reverse order on the same
// data dirs, every acknowledged key, lease and queue setting is back and
// revisions go on from where they were.
func TestRaft_restart_allKilled(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()

	want := map[string]string{}
	var lastRev int64
	put := func(cli *clientv3.Client, key, val string, opts ...clientv3.OpOption) {
		t.Helper()
		resp, err := cli.Put(ctx, key, val, opts...)
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		want[key] = val
		lastRev = resp.Header.Revision
	}
	for i := range 30 {
		put(clis[i%3], fmt.Sprintf("keep/%02d", i), strconv.Itoa(i))
	}
	const settings = `{"ack":"replicated"}`
	put(clis[1], "/config/queues/ch:events", settings)
	grant, err := clis[2].Grant(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	put(clis[0], "leased/1", "x", clientv3.WithLease(grant.ID))
	put(clis[1], "leased/2", "y", clientv3.WithLease(grant.ID))

	for _, p := range nodes {
		p.Kill()
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		relaunch(t, nodes[i])
	}
	waitAllReady(t, nodes...)
	waitLeader(t, nodes, clis)

	ctx, cancel = context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	if err := sameData(nodes, clis, want); err != nil {
		t.Errorf("after restart: %v", err)
	}
	for i, cli := range clis {
		ttl, err := cli.TimeToLive(ctx, grant.ID, clientv3.WithAttachedKeys())
		if err != nil {
			t.Errorf("%s: timetolive: %v", nodes[i].Name, err)
			continue
		}
		keys := map[string]bool{}
		for _, k := range ttl.Keys {
			keys[string(k)] = true
		}
		if ttl.TTL <= 0 || ttl.TTL > 300 || ttl.GrantedTTL != 300 || len(keys) != 2 || !keys["leased/1"] || !keys["leased/2"] {
			t.Errorf("%s: timetolive after restart: got ttl %d of %d with keys %q, want a ttl of 300 at most with leased/1 and leased/2",
				nodes[i].Name, ttl.TTL, ttl.GrantedTTL, ttl.Keys)
		}
	}
	resp, err := clis[0].Put(ctx, "after", "restart")
	if err != nil {
		t.Fatalf("put after restart: %v", err)
	}
	if resp.Header.Revision <= lastRev {
		t.Errorf("put after restart: got revision %d, want more than the last acknowledged %d", resp.Header.Revision, lastRev)
	}
}

// TestRaft_restart_afterFrozenLeader: a leader frozen (SIGSTOP) with
// writes in flight has entries in its log that the next leader never
// got; resumed, it has raft replace them ("clearing log suffix"). Stopped
// and started again on its data dir, it must come back: with the log in
// raft-wal v0.4.0, which sealed the truncated segment without its index,
// it panicked at that start, for good. Whether a suffix was replaced in a
// run is logged; kv/raftnode's TestStores_moveWAL_truncatedTail and
// raft.db's own truncation are checked there on every run.
func TestRaft_restart_afterFrozenLeader(t *testing.T) {
	c := newCluster(t)
	nodes := c.startRaftThree()
	clis := clientsOf(t, nodes...)
	t.Cleanup(func() {
		for _, p := range nodes {
			_ = p.Signal(syscall.SIGCONT)
		}
	})
	leader := raftLeader(t, nodes, clis, []int{0, 1, 2})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 { // writers through the leader: entries appended when it freezes
		cli := clusterClient(t, nodes[leader].ClientAddr)
		wg.Go(func() {
			for n := 0; n < 100_000; n++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = cli.Put(ctx, fmt.Sprintf("w%d", w), strconv.Itoa(n))
				cancel()
			}
		})
	}
	time.Sleep(time.Second)
	if err := nodes[leader].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next := raftLeader(t, nodes, clis, othersThan(leader))
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	for i := range 50 {
		if _, err := clis[next].Put(ctx, "after", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[leader].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	time.Sleep(3 * time.Second) // the resumed node catches up
	t.Logf("the resumed leader's log mentions clearing a suffix: %v", strings.Contains(nodes[leader].Log(), "clearing log suffix"))
	if err := nodes[leader].Stop(); err != nil {
		t.Logf("stop: %v", err)
	}
	nodes[leader].Restart(t)
	cli := clusterClient(t, nodes[leader].ClientAddr)
	resp, err := cli.Get(ctx, "after")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "49" {
		t.Fatalf("get after through the restarted node: %v, %v; want 49", resp, err)
	}
}
