package kvtest

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLeaseKeepAlive_manyLeasesOfOneClient: clientv3 sends the
// keep-alives of all its leases on one stream; 600 leases of 5 s kept
// alive for 10 s all live. Renewed one after another, each waiting for
// its own checkpoint, 384 of them expired.
func TestLeaseKeepAlive_manyLeasesOfOneClient(t *testing.T) {
	cli := startMembers(t, 1)[0]
	ctx := testCtx(t, 60*time.Second)
	const n = 600
	ids := make([]clientv3.LeaseID, 0, n)
	kctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop() // first: the keep-alive channels close
	for range n {
		g, err := cli.Grant(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
		ch, err := cli.KeepAlive(kctx, g.ID)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range ch { // closed when kctx ends
			}
		})
	}
	time.Sleep(10 * time.Second)
	expired := 0
	for _, id := range ids {
		r, err := cli.TimeToLive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.TTL <= 0 {
			expired++
		}
	}
	if expired > 0 {
		t.Fatalf("%d of %d leases kept alive by one client expired", expired, n)
	}
}
