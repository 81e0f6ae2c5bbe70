package dispatch

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestPause_deliversNothingOnceTheQueueMoved: a dispatcher stops running
// for a while (a SIGSTOP, here its heartbeat set back) and its queue's
// record moves to another member meanwhile. Woken, an acknowledgement
// makes room for a consumer on it: the message waiting is not delivered,
// neither before the member read the key space nor after; the queue goes
// over to the member that dispatches it now, which delivers it.
func TestPause_deliversNothingOnceTheQueueMoved(t *testing.T) {
	cl := newCluster(t)
	a := cl.start("a", func(c *Config) { c.ReconcileInterval = time.Hour; c.Prefetch = 1 }) // the test runs a's rounds
	b := cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	w1, w2 := a.cli.Watch(ctx, "/q/ps/c/one"), a.cli.Watch(ctx, "/q/ps/c/two")
	waitUntil(t, 5*time.Second, "two consumers on a", func() bool {
		q, ok := queueOn(a, "ps")
		return ok && q.Consumers == 2
	})
	for i := range 3 {
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/ps/p/m%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	e1, e2 := next(t, w1, 5*time.Second), next(t, w2, 5*time.Second)
	if len(e1) != 1 || len(e2) != 1 {
		t.Fatalf("got %d and %d deliveries, want one each (prefetch 1)", len(e1), len(e2))
	}
	rec, _ := ParseRecord(recordOn(a, "ps"))
	// While a does not run, gossip calls it failed and b claims ps; a,
	// woken, has not read the key space since.
	a.seat.leave()
	if _, err := b.cli.Put(ctx, RecordKey("ps"), fmt.Sprintf("%d;epoch=%d", b.id, rec.Epoch+1)); err != nil {
		t.Fatal(err)
	}
	a.mgr.pause.beat.Add(-int64(3 * time.Second))
	if !a.mgr.pause.holds() {
		t.Fatal("no fence with the heartbeat 3 s old")
	}
	a.mgr.pause.fenced.Store(true) // as the heartbeat does once it runs (afterPause), here without the race
	a.mgr.pause.beat.Store(time.Since(a.mgr.pause.start).Nanoseconds())
	if r, err := a.cli.Delete(ctx, string(e2[0].Kv.Key)); err != nil || r.Deleted != 1 {
		t.Fatalf("ack on a: %v %v", r, err)
	}
	select {
	case resp := <-w2:
		if len(resp.Events) > 0 {
			t.Fatalf("%s delivered by a in epoch %d after the queue moved", resp.Events[0].Kv.Key, rec.Epoch)
		}
	case <-time.After(3 * pauseBeat):
	}
	if err := a.seat.join(); err != nil {
		t.Fatal(err)
	}
	a.mgr.afterPause(3 * time.Second) // reads the key space caught up: b dispatches ps
	select {
	case resp := <-w2:
		if len(resp.Events) > 0 {
			t.Fatalf("%s delivered by a in epoch %d once it knew the queue moved", resp.Events[0].Kv.Key, rec.Epoch)
		}
	case <-time.After(3 * pauseBeat):
	}
	a.mgr.reconcile() // hands ps over to b (m0 as delivered to one) and binds the consumers to b's stream
	got := map[string]bool{}
	for !got["m2"] {
		var resp clientv3.WatchResponse
		select {
		case resp = <-w1:
		case resp = <-w2:
		case <-ctx.Done():
			t.Fatalf("delivered by b: %v, want m2", got)
		}
		for _, ev := range resp.Events { // handed over, they keep a's numbers
			got[ParseKey(string(ev.Kv.Key)).Tail] = true
		}
	}
}
