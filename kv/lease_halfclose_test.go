package kv

import (
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestLease_keepAliveAnsweredAfterCloseSend: a client that sends its
// keep-alives and closes its side at once (the JSON gateway posts one and
// closes; python-etcd3's refresh_lease sends one on a stream of its own)
// gets every answer, as from etcd: the stream ended at the close, its
// renewals done but never answered.
func TestLease_keepAliveAnsweredAfterCloseSend(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	const leases = 100 // renewals still under way at the close, on any machine
	var ids []int64
	for range leases {
		g, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, int64(g.ID))
	}
	stream, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const unknown = 0x7777
	for _, id := range append(ids, unknown) {
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := map[int64]int64{}
	for range leases + 1 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("keep-alive answers after CloseSend: %v after %d of %d", err, len(got), leases+1)
		}
		got[resp.ID] = resp.TTL
	}
	for _, id := range ids {
		if got[id] != 60 {
			t.Errorf("lease %d answered at TTL %d, want 60", id, got[id])
		}
	}
	if ttl, ok := got[unknown]; !ok || ttl != 0 {
		t.Errorf("unknown lease answered %v (%v), want TTL 0", ttl, ok)
	}
}
