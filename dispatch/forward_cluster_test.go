package dispatch

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCluster_forwardKeyNotUTF8: a put whose key is not UTF-8 (etcd
// takes any bytes) cannot be encoded for the dispatcher: the forwarding
// member refuses it InvalidArgument, holds nothing, and its stream goes
// on carrying the next put.
func TestCluster_forwardKeyNotUTF8(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.Put(ctx, "/q/jobs/p/\xff\xfe", "v"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("put of a key not UTF-8 on the forwarder: got %v, want InvalidArgument", err)
	}
	if _, err := b.cli.Put(ctx, "/q/jobs/p/after", "v"); err != nil {
		t.Fatalf("the next put on the forwarder: %v", err)
	}
	for _, q := range b.mgr.Status().Queues {
		if q.Held != 0 {
			t.Errorf("forwarder holds %d copies, want 0", q.Held)
		}
	}
	for _, q := range a.mgr.Status().Queues {
		if q.Name == "jobs" && q.Rows != 2 {
			t.Errorf("dispatcher's rows: got %d, want 2 (first, after)", q.Rows)
		}
	}
}
