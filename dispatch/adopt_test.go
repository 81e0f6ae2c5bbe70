package dispatch

import (
	"slices"
	"testing"
	"time"
)

// TestAdopt_recordsOfQueuesNotHeld: the records naming this member of
// queues it holds no state of (dispatched before a restart, never used
// since) are adopted adoptEvery after Start and deleted once the queues
// have been idle for forgetAfter; before, they stayed for ever. Records
// naming another member, pinned ones, those of ClickHouse queues and the
// keys below a record are left alone, and a record after a queue's keys
// is found.
func TestAdopt_recordsOfQueuesNotHeld(t *testing.T) {
	n, clk, _ := startForgetting(t)
	ctx := testCtx(t, 30*time.Second)
	keys := map[string]string{
		"/q/aaa":          "7;epoch=2",
		"/q/aaa/dlq/0001": "x", // below a record: not one
		"/q/bbb":          "7;epoch=5",
		"/q/other":        "8;epoch=1",
		"/q/pinned":       "7;epoch=1;pinned",
		"/q/ch:events":    "7;epoch=1",
		"/q/zzz":          "7;epoch=9",
		"/q/zzz/dlq/0001": "x",
	}
	for k, v := range keys {
		if err := n.kv.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	n.mgr.reconcile()
	if got := queueNames(n.mgr); len(got) != 0 {
		t.Fatalf("queues before adoptEvery: %v, want none", got)
	}
	clk.Advance(adoptEvery)
	n.mgr.reconcile()
	if got, want := queueNames(n.mgr), []string{"aaa", "bbb", "zzz"}; !slices.Equal(got, want) {
		t.Fatalf("queues adopted: %v, want %v", got, want)
	}
	clk.Advance(forgetAfter)
	reconcileUntil(t, "no queue left after forgetAfter", func() bool { return len(queueNames(n.mgr)) == 0 }, n.mgr)
	for k, v := range keys {
		got := n.kv.Get(k)
		switch k {
		case "/q/aaa", "/q/bbb", "/q/zzz":
			if got != nil {
				t.Errorf("%s: %q, want deleted", k, got)
			}
		default:
			if string(got) != v {
				t.Errorf("%s: %q, want %q kept", k, got, v)
			}
		}
	}
}

// TestAdopt_consumerRecordsNotHosted: a consumer record naming this
// member of a consumer it does not host (its member restarted) is
// deleted once two looks a minute apart found it so; the record of a
// consumer it hosts and one naming another member stay. They stayed for
// ever.
func TestAdopt_consumerRecordsNotHosted(t *testing.T) {
	n, clk, cli := startForgetting(t)
	ctx := testCtx(t, 30*time.Second)
	cli.Watch(ctx, "/q/live/c/z")
	// Its record is written before it is listed (Consume claims the queue
	// in between): two looks a minute apart never both fall in between,
	// two looks of a test at once may.
	waitFor(t, "the live consumer listed", func() bool { return n.kv.Get("/q/live/c/z") != nil && n.mgr.localConsumers("live") == 1 })
	for k, v := range map[string]string{"/q/stale/c/x": "7", "/q/other/c/y": "8"} {
		if err := n.kv.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	look := func() {
		clk.Advance(adoptEvery)
		n.mgr.reconcile()
	}
	kept := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if n.kv.Get(k) == nil {
				t.Fatalf("%s deleted, want it kept", k)
			}
		}
	}
	look()
	kept("/q/live/c/z", "/q/stale/c/x", "/q/other/c/y")
	look()
	kept("/q/live/c/z", "/q/other/c/y")
	if v := n.kv.Get("/q/stale/c/x"); v != nil {
		t.Fatalf("the record of a consumer not hosted here: %q after two looks, want it deleted", v)
	}
}
