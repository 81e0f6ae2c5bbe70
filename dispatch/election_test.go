package dispatch

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"chute/internal/testutil"
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

// TestManager_view_followsTheKeySpace checks that a put's view of its
// queue's record and settings is reused while the key space does not
// change, and read again after any change: a settings put, a write of
// an unrelated key, a claim.
func TestManager_view_followsTheKeySpace(t *testing.T) {
	n := startNode(t, func(c *Config) { c.ReconcileInterval = time.Hour })
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "/q/jobs/p/a", "v"); err != nil {
		t.Fatal(err)
	}
	v1 := n.mgr.view("jobs")
	if !v1.ok || v1.rec.Member != 7 {
		t.Fatalf("view after the first put: got record %+v (ok %v), want member 7", v1.rec, v1.ok)
	}
	if v2 := n.mgr.view("jobs"); v2 != v1 {
		t.Errorf("view with no change: got a new one %+v, want the one kept", v2)
	}
	if _, err := cli.Put(ctx, SettingsKey("jobs"), `{"max_bytes":12}`); err != nil {
		t.Fatal(err)
	}
	if got := n.mgr.view("jobs").set.MaxBytes; got != 12 {
		t.Errorf("max_bytes after the settings put: got %d, want 12", got)
	}
	v3 := n.mgr.view("jobs")
	if _, err := cli.Put(ctx, "/other", "x"); err != nil {
		t.Fatal(err)
	}
	if v4 := n.mgr.view("jobs"); v4 == v3 || v4.changes <= v3.changes || v4.set.MaxBytes != 12 {
		t.Errorf("view after an unrelated write: got changes %d (was %d), max_bytes %d; want a newer view, max_bytes 12", v4.changes, v3.changes, v4.set.MaxBytes)
	}
	next := Record{Member: 9, Epoch: v1.rec.Epoch + 1}
	if _, err := cli.Put(ctx, RecordKey("jobs"), next.String()); err != nil {
		t.Fatal(err)
	}
	if got := n.mgr.view("jobs").rec; got != next {
		t.Errorf("record after a claim by another member: got %+v, want %+v", got, next)
	}
}

// TestCluster_claimKeepsTheRecordsOptions: a claim of a queue whose
// dispatcher is gone keeps the record's reply_to and pinned; it wrote
// the member and epoch alone, dropping them.
func TestCluster_claimKeepsTheRecordsOptions(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/1", "v"); err != nil { // a claims jobs
		t.Fatal(err)
	}
	if _, err := a.cli.Put(ctx, "/q/jobs", fmt.Sprintf("%d;epoch=1;reply_to=replies;pinned", a.id)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the record on b", func() bool { return strings.Contains(recordOn(b, "jobs"), "pinned") })
	a.stop()
	connect(b)                                                    // serf reports a gone
	if _, err := b.cli.Put(ctx, "/q/jobs/p/2", "v"); err != nil { // b claims jobs
		t.Fatal(err)
	}
	rec, ok := ParseRecord(recordOn(b, "jobs"))
	if !ok || rec.Member != b.id || rec.Epoch != 2 || rec.ReplyTo != "replies" || !rec.Pinned {
		t.Fatalf("record after b's claim: %q, want b at epoch 2 with reply_to=replies and pinned", recordOn(b, "jobs"))
	}
}

// TestManager_claimLogLevel: claiming a new queue is logged at debug,
// as routine as the put that makes it (a line per request with a queue
// per request); claiming a queue from a member gossip calls gone, a
// failover, at info.
func TestManager_claimLogLevel(t *testing.T) {
	var logs testutil.Buffer
	n := startNode(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	for i := range 10 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/new%d/p/k", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(logs.String(), "dispatcher claimed") {
		t.Fatalf("claims of new queues logged at info:\n%s", logs.String())
	}
	gone := Record{Member: 9, Epoch: 3} // no member 9 is alive
	if _, err := cli.Put(ctx, RecordKey("jobs"), gone.String()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the record read", func() bool { return n.mgr.view("jobs").rec.Member == 9 })
	if _, err := cli.Put(ctx, "/q/jobs/p/k", "v"); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "dispatcher claimed") || !strings.Contains(got, "epoch=4") {
		t.Fatalf("a claim from a member gone not logged at info with epoch 4:\n%s", got)
	}
}
