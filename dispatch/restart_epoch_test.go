package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRestart_numbersInANewEpoch: a dispatcher restarted on its data dir
// numbers what it recovered, and what comes next, in an epoch of its own
// run, never again in the one it had: it numbered them from that epoch's
// first number, so a consumer's late acknowledgement of a delivery from
// before the restart (producer keys need not be unique) named another
// message, never delivered, and removed it.
func TestRestart_numbersInANewEpoch(t *testing.T) {
	cl := newCluster(t)
	dir := t.TempDir()
	withDir := func(c *Config) { c.DataDir = dir }
	a := cl.start("a", withDir)
	cl.start("b", nil) // keeps the key space while a is down, as raft's disk would
	ctx := testCtx(t, 60*time.Second)
	for _, v := range []string{"v1", "v2", "v3"} {
		if _, err := a.cli.Put(ctx, "/q/jobs/p/k", v); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithCancel(ctx)
	key := map[string]string{}
	for _, ev := range collectN(t, a.cli.Watch(wctx, "/q/jobs/c/w"), 3, 10*time.Second) {
		key[string(ev.Kv.Value)] = string(ev.Kv.Key)
	}
	if r, err := a.cli.Delete(ctx, key["v1"]); err != nil || r.Deleted != 1 {
		t.Fatalf("ack v1: %v %v", r, err)
	}
	wcancel()
	before, _ := ParseRecord(recordOn(a, "jobs"))
	a.stop() // killed: v2 and v3 stay in its queue log

	a2 := cl.start("a", withDir)
	waitUntil(t, 10*time.Second, "the recovered messages queued", func() bool {
		q, _ := queueOn(a2, "jobs")
		return q.Rows == 2 && q.Held == 0
	})
	if after, _ := ParseRecord(recordOn(a2, "jobs")); after.Member != a2.id || after.Epoch <= before.Epoch {
		t.Fatalf("record %q after the restart, want this member at an epoch past %d", recordOn(a2, "jobs"), before.Epoch)
	}
	// The consumer finishes v2 late, under the key it got before.
	if _, err := a2.cli.Delete(ctx, key["v2"]); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	wc := a2.cli.Watch(ctx, "/q/jobs/c/w")
	waitUntil(t, 10*time.Second, "v3 delivered", func() bool {
		select {
		case resp := <-wc:
			for _, ev := range resp.Events {
				got[string(ev.Kv.Value)] = true
				if strings.HasSuffix(string(ev.Kv.Key), "/k") {
					_, _ = a2.cli.Delete(ctx, string(ev.Kv.Key))
				}
			}
		case <-time.After(50 * time.Millisecond):
		}
		return got["v3"]
	})
}
