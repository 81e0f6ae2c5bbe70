package dispatch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// claimedByConsumer starts members a, b and c, a reconciling only when
// the test says: a dispatches jobs with p0, and p1 put through c; then a
// consumer on b claims the queue and p2, put through c, goes to b. It
// returns the members and the consumer's watch.
func claimedByConsumer(t *testing.T) (a, b, c *member, deliveries func(n int) []string) {
	t.Helper()
	cl := newCluster(t)
	a = cl.start("a", func(c *Config) { c.ReconcileInterval = time.Hour })
	b, c = cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/p0", "v"); err != nil { // a claims
		t.Fatal(err)
	}
	aRec := recordOn(a, "jobs")
	waitUntil(t, 5*time.Second, "a's record on c", func() bool { return recordOn(c, "jobs") == aRec })
	if _, err := c.cli.Put(ctx, "/q/jobs/p/p1", "v"); err != nil { // forwarded to a
		t.Fatal(err)
	}
	wc := b.cli.Watch(ctx, "/q/jobs/c/x") // b claims as the consumer's member
	bID := strconv.FormatUint(b.id, 10) + ";"
	waitUntil(t, 10*time.Second, "b's claim on c", func() bool { return strings.HasPrefix(recordOn(c, "jobs"), bID) })
	if _, err := c.cli.Put(ctx, "/q/jobs/p/p2", "v"); err != nil { // forwarded to b
		t.Fatal(err)
	}
	return a, b, c, func(n int) []string { return consumeAll(t, ctx, wc, b.cli, n, 5*time.Second) }
}

// TestHandover_orderThroughAThirdMember: one producer connection, to c,
// puts p1 then p2, and between them a consumer on b claims the queue from
// a: p1 is on a until a hands it over, p2 goes straight to b. b delivers
// nothing until a says its hand-over is done, so p1 comes before p2; it
// delivered p2 at once before. The record names a as where the queue
// came from until then.
func TestHandover_orderThroughAThirdMember(t *testing.T) {
	a, b, _, deliveries := claimedByConsumer(t)
	if rec, _ := ParseRecord(recordOn(b, "jobs")); rec.From != a.id {
		t.Fatalf("b's record %q does not name a (%d) as where it came from", recordOn(b, "jobs"), a.id)
	}
	time.Sleep(200 * time.Millisecond) // p2 waits on b
	a.mgr.reconcile()                  // hands p0 and p1 over, then its DONE
	if got := deliveries(3); !slices.Equal(got, []string{"p0", "p1", "p2"}) {
		t.Fatalf("delivered %v, want p0 p1 p2", got)
	}
	waitUntil(t, 5*time.Second, "the record without from", func() bool {
		rec, _ := ParseRecord(recordOn(b, "jobs"))
		return rec.Member == b.id && rec.From == 0
	})
}

// TestHandover_previousSaysNothing: a previous dispatcher that never says
// its hand-over is done (an older version, or one that forgot the queue)
// holds the new one back for handoverAwait, not for ever.
func TestHandover_previousSaysNothing(t *testing.T) {
	_, _, _, deliveries := claimedByConsumer(t)
	start := time.Now()
	if got := deliveries(1); !slices.Equal(got, []string{"p2"}) {
		t.Fatalf("delivered %v, want p2 alone (p0 and p1 are still on a)", got)
	}
	if waited := time.Since(start); waited < handoverAwait/2 {
		t.Fatalf("p2 delivered after %v, before the wait for a's hand-over (%v)", waited, handoverAwait)
	}
}

// TestHandover_previousHoldsNothing: a previous dispatcher that has no
// state of the queue (forgotten, its record kept for reply_to), and so
// never sends a DONE, says so when asked, and the new one delivers at
// once: it waited handoverAwait at every move of such a queue.
func TestHandover_previousHoldsNothing(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	rec := fmt.Sprintf("%d;epoch=1;reply_to=inbox", a.id)
	if _, err := a.cli.Put(ctx, RecordKey("r"), rec); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "a's record on b", func() bool { return recordOn(b, "r") == rec })
	wc := b.cli.Watch(ctx, "/q/r/c/w") // b claims as the consumer's member
	bID := strconv.FormatUint(b.id, 10) + ";"
	waitUntil(t, 5*time.Second, "b's claim", func() bool { return strings.HasPrefix(recordOn(b, "r"), bID) })
	start := time.Now()
	if _, err := b.cli.Put(ctx, "/q/r/p/k", "v"); err != nil {
		t.Fatal(err)
	}
	collectN(t, wc, 1, 10*time.Second)
	if d := time.Since(start); d > handoverAwait/2 {
		t.Fatalf("delivered after %v: b waited for a DONE a, which holds nothing of r, never sends", d)
	}
}
