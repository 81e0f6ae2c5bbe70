package kv

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRequireLeader: calls and streams that ask for a leader
// (clientv3.WithRequireLeader) fail with "etcdserver: no leader" on a
// member that knows none, a running watch once it lost its leader for
// three checks; the others are served as before.
func TestRequireLeader(t *testing.T) {
	const check = 20 * time.Millisecond
	c := newOneMember(1)
	_, cli := startServerWith(t, func(cfg *Config) { cfg.LeaderCheckInterval = check },
		func(s *Server) { c.srv = s; s.SetConsensus(c) })
	ctx := testCtx(t, 10*time.Second)
	req := clientv3.WithRequireLeader(ctx)

	if _, err := cli.Put(req, "k", "v"); err != nil {
		t.Fatalf("put asking for a leader, with one: %v", err)
	}
	wctx, cancel := context.WithCancel(req)
	defer cancel()
	required := cli.Watch(wctx, "k")
	plain := cli.Watch(ctx, "k")
	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}
	for name, wch := range map[string]clientv3.WatchChan{"asking for a leader": required, "plain": plain} {
		if resp := <-wch; resp.Err() != nil || len(resp.Events) != 1 {
			t.Fatalf("watch %s: %+v, %v; want the put", name, resp, resp.Err())
		}
	}

	c.leader.Store(0)
	start := time.Now()
	// Straight through the connection: clientv3 would try it again
	// for a while, as it does with etcd.
	kvc := pb.NewKVClient(cli.ActiveConnection())
	if _, err := kvc.Range(req, &pb.RangeRequest{Key: []byte("k")}); !errors.Is(rpctypes.Error(err), rpctypes.ErrNoLeader) {
		t.Errorf("get asking for a leader, without one: %v, want %v", err, rpctypes.ErrNoLeader)
	}
	if _, err := cli.Get(ctx, "k"); err != nil {
		t.Errorf("plain get without a leader: %v", err)
	}
	select {
	case resp, ok := <-required:
		if !ok || !errors.Is(resp.Err(), rpctypes.ErrNoLeader) {
			t.Errorf("watch asking for a leader, after losing it: %+v (open %v), want %v", resp, ok, rpctypes.ErrNoLeader)
		}
		// The first of the checks may be a tick the ticker was late
		// to deliver, due before the leader went: the last one comes
		// at least noLeaderChecks-2 intervals after it.
		if took := time.Since(start); took < (noLeaderChecks-2)*check {
			t.Errorf("watch ended %v after the leader went, want %d checks of %v", took, noLeaderChecks, check)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch asking for a leader still open 5s after losing it")
	}
	if _, err := cli.Put(ctx, "k", "v3"); err != nil {
		t.Fatal(err)
	}
	if resp := <-plain; resp.Err() != nil || len(resp.Events) != 1 {
		t.Errorf("plain watch without a leader: %+v, %v; want the put", resp, resp.Err())
	}
	// A new stream asking for a leader is refused at once.
	refused := cli.Watch(clientv3.WithRequireLeader(ctx), "k")
	select {
	case resp := <-refused:
		if !errors.Is(resp.Err(), rpctypes.ErrNoLeader) {
			t.Errorf("new watch asking for a leader, without one: %+v, want %v", resp, rpctypes.ErrNoLeader)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("new watch asking for a leader not refused in 5s")
	}
}
