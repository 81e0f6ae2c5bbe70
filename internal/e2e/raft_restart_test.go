//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"

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
