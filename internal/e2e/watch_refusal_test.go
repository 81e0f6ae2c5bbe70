//go:build e2e

package e2e

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestWatch_refusals_etcdParity sends etcd 3.4 and the chute binary the
// same raw watch creates that are refused (an empty range, with and
// without an id; an id already taken) and compares the answers. chute
// answered them with the id asked for: for a taken id, the live watch's,
// which a client other than clientv3 would take as that watch cancelled.
// etcd answers -1.
func TestWatch_refusals_etcdParity(t *testing.T) {
	t.Parallel()
	var got [2][]string
	for i, p := range []*Proc{StartEtcd(t), StartChute(t)} {
		cli := newClient(t, p)
		ctx, cancel := rpcCtx()
		ws, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		for _, cr := range []*pb.WatchCreateRequest{
			{Key: []byte("b"), RangeEnd: []byte("a")},
			{Key: []byte("b"), RangeEnd: []byte("a"), WatchId: 7},
			{Key: []byte("a"), WatchId: 5},
			{Key: []byte("a"), WatchId: 5},
		} {
			if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}); err != nil {
				t.Fatal(err)
			}
			r, err := ws.Recv()
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], fmt.Sprintf("create %q..%q id %d: id=%d created=%v canceled=%v reason=%q",
				cr.Key, cr.RangeEnd, cr.WatchId, r.WatchId, r.Created, r.Canceled, r.CancelReason))
		}
		cancel()
	}
	for i := range got[0] {
		if got[0][i] != got[1][i] {
			t.Errorf("etcd:  %s\nchute: %s", got[0][i], got[1][i])
		}
	}
}
