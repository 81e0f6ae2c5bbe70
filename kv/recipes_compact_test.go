package kv

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/kv/v3electionpb"
)

// TestInternalWatch_compactedWhileFull: an internal watcher whose buffer
// is full when its history is compacted gets the cancel after the
// responses it holds. The store dropped the cancel, removed the
// watcher, and a recv then waited for ever.
func TestInternalWatch_compactedWhileFull(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := testCtx(t, 20*time.Second)
	w := srv.watchInternal(&pb.WatchCreateRequest{Key: []byte("k"), StartRevision: srv.store.Rev() + 1})
	defer w.stop()
	var last int64
	for i := range 3 * watchSignalBuffer {
		r, err := cli.Put(ctx, "k", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Header.Revision
	}
	if _, err := cli.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := w.recv(rctx, nil)
		cancel()
		if err != nil {
			t.Fatalf("after %d responses: %v, want the compaction's cancel", n, err)
		}
		if resp.CompactRevision != 0 {
			if n < watchSignalBuffer {
				t.Errorf("the cancel came after %d responses, want the %d held first", n, watchSignalBuffer)
			}
			return
		}
	}
}

// TestObserve_nextLeaderAfterCompaction: an Observe whose client lags
// while the leader proclaims, then whose history is compacted, still
// reports the next leader. It waited for ever.
func TestObserve_nextLeaderAfterCompaction(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 30*time.Second)
	ec := v3electionpb.NewElectionClient(cli.ActiveConnection())
	a, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("e"), Lease: grant(t, cli, 60), Value: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := ec.Observe(ctx, &v3electionpb.LeaderRequest{Name: []byte("e")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Recv(); err != nil {
		t.Fatal(err)
	}
	// Not read: the stream's window fills, then the internal buffer.
	big := make([]byte, 512<<10)
	for i := range 60 {
		copy(big, fmt.Sprint(i))
		if _, err := ec.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: a.Leader, Value: big}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := cli.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, r.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.Resign(ctx, &v3electionpb.ResignRequest{Leader: a.Leader}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("e"), Lease: grant(t, cli, 60), Value: []byte("B")}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 100)
	go func() {
		defer close(got)
		for {
			resp, err := obs.Recv()
			if err != nil {
				return
			}
			got <- string(resp.Kv.Value[:min(4, len(resp.Kv.Value))])
		}
	}()
	for n := 0; ; n++ {
		select {
		case v, ok := <-got:
			if !ok {
				t.Fatal("Observe ended")
			}
			if v == "B" {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Observe stuck after %d responses: never the new leader B", n)
		}
	}
}
