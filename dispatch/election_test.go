package dispatch

import (
	"fmt"
	"testing"
	"time"
)

// TestManager_dispatcherOf_claimNotWritten checks a member cut off from
// the key space, as in a minority partition: its claims of a new queue
// fail (kv.ErrNoLeader), yet its producers' puts are accepted and held;
// once it is back in the key space the next claim is written, and every
// message reaches a consumer once, in order.
func TestManager_dispatcherOf_claimNotWritten(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil) // not connected: b sees nobody either
	ctx := testCtx(t, 30*time.Second)
	b.seat.leave()
	putJobs(t, ctx, b, 10)
	for _, m := range []*member{a, b} {
		if rec := recordOn(m, "jobs"); rec != "" {
			t.Fatalf("record of jobs on %s: got %q, want none", m.name, rec)
		}
	}
	if q, ok := queueOn(b, "jobs"); !ok || q.Held != 10 || q.Rows != 0 {
		t.Fatalf("jobs on b while cut off: got %+v, want 10 held", q)
	}
	if _, err := a.cli.Put(ctx, "/k/meanwhile", "v"); err != nil {
		t.Fatal(err)
	}

	if err := b.seat.join(); err != nil {
		t.Fatal(err)
	}
	if got := string(b.kv.Get("/k/meanwhile")); got != "v" {
		t.Fatalf("/k/meanwhile on b after it joined again: got %q, want %q", got, "v")
	}
	for i := 10; i < 15; i++ {
		if _, err := b.cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*member{a, b} {
		if rec, ok := ParseRecord(recordOn(m, "jobs")); !ok || rec.Member != b.id || rec.Epoch != 1 {
			t.Fatalf("record of jobs on %s: got %q, want b at epoch 1", m.name, recordOn(m, "jobs"))
		}
	}
	tails := consumeAll(t, ctx, b.cli.Watch(ctx, "/q/jobs/c/x"), b.cli, 15, 10*time.Second)
	checkProducerOrder(t, prefixed(tails), 1, 15)
}
