package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/kv"
)

// TestCluster_producerOnAConsumerOnC checks, in-process, that messages
// from four producers on A reach a consumer on C exactly once, in each
// producer's order, and none is left unacknowledged.
func TestCluster_producerOnAConsumerOnC(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	const producers, each = 4, 250
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		cli := a.newClient(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%d-%04d", p, i), "v"); err != nil {
					errs <- fmt.Errorf("producer %d put %d: %w", p, i, err)
					return
				}
			}
		}()
	}
	wc := c.cli.Watch(ctx, "/q/jobs/c/consumer-on-c")
	tails := consumeAll(t, ctx, wc, c.cli, producers*each, 10*time.Second)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkProducerOrder(t, tails, producers, each)
	waitUntil(t, 5*time.Second, "nothing left anywhere", func() bool {
		for _, m := range []*member{a, b, c} {
			for _, q := range m.mgr.Status().Queues {
				if q.Rows != 0 || q.Held != 0 || q.Unacked != 0 {
					return false
				}
			}
		}
		return true
	})
	// The consumer's member took the dispatcher role: A hosted no consumer.
	if rec := recordOn(a, "jobs"); !strings.HasPrefix(rec, fmt.Sprint(c.id, ";")) {
		t.Fatalf("record on a: got %q, want c (%d) as dispatcher", rec, c.id)
	}
}

// TestCluster_concurrentFirstPuts checks that first puts on A and C at
// once to a new queue end with one dispatcher record on all members, and
// every message reaches the consumer once.
func TestCluster_concurrentFirstPuts(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 30*time.Second)
	var wg sync.WaitGroup
	for _, m := range []*member{a, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := m.cli.Put(ctx, fmt.Sprintf("/q/race/p/%s-%02d", m.name, i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitUntil(t, 10*time.Second, "one record on all members", func() bool {
		ra := recordOn(a, "race")
		return ra != "" && ra == recordOn(b, "race") && ra == recordOn(c, "race")
	})
	wc := b.cli.Watch(ctx, "/q/race/c/x")
	tails := consumeAll(t, ctx, wc, b.cli, 100, 20*time.Second)
	if len(tails) != 100 {
		t.Fatalf("got %d messages, want 100", len(tails))
	}
}

// TestCluster_consumerWhileClaiming checks a consumer whose member is
// still claiming its queue (a slow commit) when the reconcile loop runs:
// the loop leaves it alone, rather than bind it to the old dispatcher,
// whose deliveries would come back once the claim lands and the old
// dispatcher hands its messages over. Every message reaches the consumer
// once, and every acknowledgement removes one.
func TestCluster_consumerWhileClaiming(t *testing.T) {
	cl := newCluster(t)
	byTest := func(c *Config) { c.ReconcileInterval = time.Hour } // the test runs the rounds
	a, b := cl.start("a", byTest), cl.start("b", byTest)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	const n = 20
	putJobs(t, ctx, a, n) // a claims jobs at epoch 1
	claim := fmt.Appendf(nil, "%d;epoch=", b.id)
	blocked, release := b.seat.delay(t, func(cmd []byte) bool { return bytes.Contains(cmd, claim) })
	wc := b.cli.Watch(ctx, "/q/jobs/c/x")
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("b's consumer did not claim jobs")
	}
	b.mgr.reconcile() // a round of b's loop while the claim is on its way
	// Well within the claim's own deadline (recordWriteTimeout).
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if q, ok := queueOn(a, "jobs"); ok && q.Unacked == n {
			t.Errorf("while b claimed jobs, a delivered %d messages to b's consumer", q.Unacked)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	waitUntil(t, 5*time.Second, "b's claim on a", func() bool {
		rec, _ := ParseRecord(recordOn(a, "jobs"))
		return rec.Member == b.id && rec.Epoch == 2
	})
	waitUntil(t, 5*time.Second, "no consumer left on a", func() bool {
		q, _ := queueOn(a, "jobs")
		return q.Consumers == 0
	})
	a.mgr.reconcile() // a hands its messages to b
	if q, _ := queueOn(a, "jobs"); q.Rows != 0 || q.Held != 0 {
		t.Fatalf("jobs on a after the handover: %+v, want nothing", q)
	}
	// Delivered after every message b holds: read up to it, a second
	// delivery of any of them is read too.
	if _, err := b.cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%02d", n), "v"); err != nil {
		t.Fatal(err)
	}
	tails := consumeAll(t, ctx, wc, b.cli, n+1, 10*time.Second)
	checkProducerOrder(t, prefixed(tails), 1, n+1)
}

// TestCluster_dispatcherDies checks, in-process, a dispatcher that stops
// while producers on other members keep putting: puts keep
// succeeding (held by every member while it is unreachable), the next put
// after the members drop it re-elects (epoch + 1), and every message put
// after the stop is delivered exactly once.
func TestCluster_dispatcherDies(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	if _, err := a.cli.Put(ctx, "/q/die/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the record on b and c", func() bool {
		return recordOn(b, "die") != "" && recordOn(c, "die") != ""
	})
	rec, _ := ParseRecord(recordOn(b, "die"))
	if rec.Member != a.id {
		t.Fatalf("dispatcher: got %d, want a", rec.Member)
	}
	a.stop()
	// Until serf would notice, the others still list a: their puts are held.
	for i := range 20 {
		if _, err := b.cli.Put(ctx, fmt.Sprintf("/q/die/p/held-%02d", i), "v"); err != nil {
			t.Fatalf("put while the dispatcher is unreachable: %v", err)
		}
	}
	connect(b, c) // serf reports a failed
	for i := range 20 {
		if _, err := c.cli.Put(ctx, fmt.Sprintf("/q/die/p/after-%02d", i), "v"); err != nil {
			t.Fatalf("put after re-election: %v", err)
		}
	}
	waitUntil(t, 5*time.Second, "one new record", func() bool {
		return recordOn(b, "die") == recordOn(c, "die")
	})
	nrec, _ := ParseRecord(recordOn(b, "die"))
	if nrec.Member == a.id || nrec.Epoch != rec.Epoch+1 {
		t.Fatalf("new record %+v, want another member at epoch %d", nrec, rec.Epoch+1)
	}
	wc := b.cli.Watch(ctx, "/q/die/c/x")
	tails := consumeAll(t, ctx, wc, b.cli, 40, 20*time.Second)
	got := map[string]bool{}
	for _, tl := range tails {
		got[tl] = true
	}
	for i := range 20 {
		for _, p := range []string{"held", "after"} {
			if k := fmt.Sprintf("%s-%02d", p, i); !got[k] {
				t.Fatalf("%s not delivered", k)
			}
		}
	}
	// Nothing more arrives: no copy was delivered twice.
	select {
	case resp := <-wc:
		if len(resp.Events) > 0 {
			t.Fatalf("extra delivery %s", resp.Events[0].Kv.Key)
		}
	case <-time.After(300 * time.Millisecond):
	}
}

// TestCluster_consumersOnTwoMembers checks that consumers on different
// members share a queue: one member dispatches, the other consumes over a
// stream and acknowledges through the dispatcher; each gets messages and
// none gets one twice.
func TestCluster_consumersOnTwoMembers(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	wb := b.cli.Watch(ctx, "/q/share/c/on-b")
	waitUntil(t, 5*time.Second, "b to claim", func() bool { return strings.HasPrefix(recordOn(c, "share"), fmt.Sprint(b.id, ";")) })
	// c must know b hosts a consumer, or it claims the queue for its own
	// (a claim race this test is not about).
	waitUntil(t, 5*time.Second, "b's consumer record on c", func() bool { return c.mgr.hostsConsumer("share", b.id) })
	wc := c.cli.Watch(ctx, "/q/share/c/on-c")
	waitUntil(t, 5*time.Second, "two consumers at the dispatcher", func() bool {
		for _, q := range b.mgr.Status().Queues {
			if q.Name == "share" && q.Consumers == 2 {
				return true
			}
		}
		return false
	})
	const total = 200
	for i := range total {
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/share/p/m%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]string{}
	count := func(name string, evs []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range evs {
			if prev, dup := seen[k]; dup {
				t.Errorf("%s delivered to %s and %s", k, prev, name)
			}
			seen[k] = name
		}
	}
	got := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < total && time.Now().Before(deadline) {
		select {
		case r := <-wb:
			var ks []string
			for _, ev := range r.Events {
				ks = append(ks, string(ev.Kv.Key))
				if _, err := b.cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
					t.Fatal(err)
				}
			}
			count("b", ks)
			got["b"] += len(ks)
		case r := <-wc:
			var ks []string
			for _, ev := range r.Events {
				ks = append(ks, string(ev.Kv.Key))
				if d, err := c.cli.Delete(ctx, string(ev.Kv.Key)); err != nil || d.Deleted != 1 {
					t.Fatalf("ack on c: %v %v", d, err)
				}
			}
			count("c", ks)
			got["c"] += len(ks)
		case <-time.After(time.Until(deadline)):
		}
	}
	if len(seen) != total {
		t.Fatalf("delivered %d of %d", len(seen), total)
	}
	if got["b"] == 0 || got["c"] == 0 {
		t.Fatalf("split: %v, want both consumers to get messages", got)
	}
	t.Logf("split between the members: %v", got)
}

// TestCluster_fullWaitForwarded checks that a put forwarded to a full
// queue's dispatcher waits for room as a put made there does: refused
// ResourceExhausted by the dispatcher, the forwarding member asks again
// until an ack on the dispatcher frees bytes, and the put is taken; with
// nothing freed it is refused after FullWait.
func TestCluster_fullWaitForwarded(t *testing.T) {
	const fullWait = 800 * time.Millisecond
	full := func(c *Config) { c.MaxQueueBytes = 1000; c.FullWait = fullWait }
	cl := newCluster(t)
	a, c := cl.start("a", full), cl.start("c", full)
	connect(a, c)
	ctx := testCtx(t, 30*time.Second)
	val := strings.Repeat("x", 98)                               // 100 bytes with the two-byte key
	if _, err := c.cli.Put(ctx, "/q/fw/p/00", val); err != nil { // c dispatches
		t.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/fw/p/%02d", i), val); err != nil {
			t.Fatalf("put %d through a: %v", i, err)
		}
	}
	if rec := recordOn(a, "fw"); !strings.HasPrefix(rec, fmt.Sprint(c.id, ";")) {
		t.Fatalf("record on a: got %q, want c (%d) as dispatcher", rec, c.id)
	}

	start := time.Now()
	_, err := a.cli.Put(ctx, "/q/fw/p/xx", val)
	if took := time.Since(start); !errors.Is(err, rpctypes.ErrTooManyRequests) || took < fullWait-fullWaitStepMax || took > 5*fullWait {
		t.Fatalf("through a, over the cap, nothing freed: got %v after %v, want %v after about %v", err, took, rpctypes.ErrTooManyRequests, fullWait)
	}
	// a asked c again and again while the put waited, and counts the put
	// once; c counts none.
	refused, waited := refusedOn(a.mgr, "fw")
	if onC, waitedC := refusedOn(c.mgr, "fw"); refused != 1 || waited != 1 || onC != 0 || waitedC != 0 {
		t.Fatalf("after one put through a refused: %d refused and %d waited on a, %d and %d on c; want 1 and 1, 0 and 0", refused, waited, onC, waitedC)
	}

	done := make(chan error, 1)
	go func() {
		_, err := a.cli.Put(ctx, "/q/fw/p/ww", val)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("put through a to a full queue returned at once: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	wc := c.cli.Watch(ctx, "/q/fw/c/one")
	ev := collectN(t, wc, 1, 5*time.Second)[0]
	if _, err := c.cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("put through a waiting for room: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("put through a not taken 5s after an ack on c freed room")
	}
	if refused, waited := refusedOn(a.mgr, "fw"); refused != 1 || waited != 2 {
		t.Fatalf("on a: %d refused and %d waited, want 1 (the put taken after waiting is not one) and 2", refused, waited)
	}
}

// TestCluster_ackUnderConsumerKeyRemote: an acknowledgement under a
// consumer's key made on a member that does not dispatch the queue goes
// to the dispatcher with the consumer it named, which takes it only for
// a message out to that consumer.
func TestCluster_ackUnderConsumerKeyRemote(t *testing.T) {
	cl := newCluster(t)
	one := func(c *Config) { c.Prefetch = 1 }
	a, b := cl.start("a", one), cl.start("b", one)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	wx := a.cli.Watch(ctx, "/q/work/c/x") // a dispatches: it hosts x
	waitUntil(t, 10*time.Second, "a to dispatch work", func() bool { return strings.HasPrefix(recordOn(b, "work"), fmt.Sprint(a.id)+";") })
	wy := b.cli.Watch(ctx, "/q/work/c/y") // y streams from a
	waitUntil(t, 10*time.Second, "two consumers on a", func() bool {
		for _, q := range a.mgr.Status().Queues {
			if q.Name == "work" {
				return q.Consumers == 2
			}
		}
		return false
	})
	for _, m := range []string{"m0", "m1"} {
		if _, err := a.cli.Put(ctx, "/q/work/p/"+m, "v"); err != nil {
			t.Fatal(err)
		}
	}
	ex, ey := next(t, wx, 10*time.Second), next(t, wy, 10*time.Second)
	if len(ex) != 1 || len(ey) != 1 {
		t.Fatalf("x got %d, y got %d; want one each (prefetch 1)", len(ex), len(ey))
	}
	ky := ParseKey(string(ey[0].Kv.Key))
	asX := fmt.Sprintf("/q/work/c/x/%d/%s", ky.Seq, ky.Tail)
	if r, err := b.cli.Delete(ctx, asX); err != nil || r.Deleted != 0 {
		t.Fatalf("y's delivery acknowledged on b under x's key: %v, %v; want 0 deleted", r, err)
	}
	asY := fmt.Sprintf("/q/work/c/y/%d/%s", ky.Seq, ky.Tail)
	if r, err := b.cli.Delete(ctx, asY); err != nil || r.Deleted != 1 {
		t.Fatalf("y's delivery acknowledged on b under y's key: %v, %v; want 1 deleted", r, err)
	}
}

// TestCluster_ackAfterTheDeliveringDispatcherDied: a consumer
// acknowledges a message whose dispatcher serf has since reported gone;
// the acknowledgement goes to the queue's dispatcher now (the backup that
// took it over), not to the dead one, and the message is not delivered
// again. It went to the dead member, and the client saw Unavailable.
func TestCluster_ackAfterTheDeliveringDispatcherDied(t *testing.T) {
	cl := newCluster(t)
	one := func(c *Config) { c.Prefetch = 1 }
	a, b, c := cl.start("a", one), cl.start("b", one), cl.start("c", one)
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, a, b, c)
	wx := a.cli.Watch(ctx, "/q/jobs/c/x") // a dispatches: it hosts x
	waitUntil(t, 10*time.Second, "a to dispatch jobs", func() bool { return strings.HasPrefix(recordOn(b, "jobs"), fmt.Sprint(a.id)+";") })
	wy := b.cli.Watch(ctx, "/q/jobs/c/y") // y streams from a
	waitUntil(t, 10*time.Second, "two consumers on a", func() bool {
		q, _ := queueOn(a, "jobs")
		return q.Consumers == 2
	})
	for _, m := range []string{"m0", "m1"} {
		if _, err := a.cli.Put(ctx, "/q/jobs/p/"+m, "v"); err != nil {
			t.Fatal(err)
		}
	}
	ex, ey := next(t, wx, 10*time.Second), next(t, wy, 10*time.Second)
	if len(ex) != 1 || len(ey) != 1 {
		t.Fatalf("x got %d, y got %d; want one each (prefetch 1)", len(ex), len(ey))
	}
	mine := ParseKey(string(ey[0].Kv.Key)).Tail
	a.stop()
	connect(b, c) // serf reports a gone
	waitUntil(t, 20*time.Second, "a backup to take jobs over, with both messages", func() bool {
		rec, ok := ParseRecord(recordOn(b, "jobs"))
		if !ok || rec.Member == a.id || rec.Epoch < 2 {
			return false
		}
		for _, m := range []*member{b, c} {
			if q, _ := queueOn(m, "jobs"); m.id == rec.Member && q.Rows == 2 {
				return true
			}
		}
		return false
	})
	if r, err := b.cli.Delete(ctx, string(ey[0].Kv.Key)); err != nil || r.Deleted != 1 {
		t.Fatalf("acknowledging %s after its dispatcher died: %v, %v; want 1 deleted", ey[0].Kv.Key, r, err)
	}
	select {
	case resp := <-wy:
		for _, ev := range resp.Events {
			if ParseKey(string(ev.Kv.Key)).Tail == mine {
				t.Fatalf("%s, acknowledged, delivered again as %s", mine, ev.Kv.Key)
			}
		}
	case <-time.After(2 * time.Second):
	}
}

// TestCluster_consumerClaimAfterFailover: the dispatcher dies while it
// and another member host consumers; puts through a third member are held
// by both survivors. The producer's member claims the queue and delivers
// its copies to the consumer, which acknowledges them; then the
// consumer's member claims the queue for its consumers, in its reconcile
// round or as another consumer registers. The copies it held of the
// acknowledged messages must not be delivered again: it hands them to
// the dispatcher, which knows them done, before claiming.
func TestCluster_consumerClaimAfterFailover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim func(c *member, ctx context.Context) clientv3.WatchChan // nil: no new watch
	}{
		{"round", func(c *member, _ context.Context) clientv3.WatchChan {
			c.mgr.reconcile()
			return nil
		}},
		{"new consumer", func(c *member, ctx context.Context) clientv3.WatchChan {
			return c.cli.Watch(ctx, "/q/fo/c/on-c2")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 60*time.Second)
			b, c, wc := ackedAfterFailover(t, ctx)
			w2 := tc.claim(c, ctx)
			waitUntil(t, 5*time.Second, "c to dispatch fo", func() bool { return strings.HasPrefix(recordOn(b, "fo"), fmt.Sprint(c.id, ";")) })
			for range 3 {
				c.mgr.reconcile()
			}
			extra := func(w clientv3.WatchChan) {
				select {
				case resp := <-w:
					if len(resp.Events) > 0 {
						t.Fatalf("%s, acknowledged, delivered again as %s", ParseKey(string(resp.Events[0].Kv.Key)).Tail, resp.Events[0].Kv.Key)
					}
				case <-time.After(time.Second):
				}
			}
			extra(wc)
			if w2 != nil {
				extra(w2)
			}
		})
	}
}

// ackedAfterFailover sets up queue fo of TestCluster_consumerClaimAfterFailover:
// a dispatches it with consumers on a and c; a dies; 30 puts through b
// are held as copies on b and c; b claims fo (c's rounds are the
// test's) and c's consumer, bound to b, reads and acknowledges them all
// while c still holds its copies. It returns b, c and c's consumer.
func ackedAfterFailover(t *testing.T, ctx context.Context) (b, c *member, wc clientv3.WatchChan) {
	t.Helper()
	cl := newCluster(t)
	a := cl.start("a", nil)
	b = cl.start("b", nil)
	c = cl.start("c", func(c *Config) { c.ReconcileInterval = time.Hour }) // the test runs c's rounds
	connect(a, b, c)
	a.cli.Watch(ctx, "/q/fo/c/on-a")
	waitUntil(t, 5*time.Second, "a to claim fo", func() bool { return strings.HasPrefix(recordOn(c, "fo"), fmt.Sprint(a.id, ";")) })
	waitUntil(t, 5*time.Second, "a's consumer record on c", func() bool { return c.mgr.hostsConsumer("fo", a.id) })
	wc = c.cli.Watch(ctx, "/q/fo/c/on-c")
	waitUntil(t, 5*time.Second, "two consumers at a", func() bool {
		q, _ := queueOn(a, "fo")
		return q.Consumers == 2
	})
	const n = 30
	heldAfterStop(t, ctx, a, b, c, n)
	connect(b, c) // serf reports a gone: b's next round claims fo
	waitUntil(t, 5*time.Second, "b to dispatch fo", func() bool { return strings.HasPrefix(recordOn(c, "fo"), fmt.Sprint(b.id, ";")) })
	c.mgr.bindLocals() // a round of c's that saw b's claim only at its end
	// Once b stopped waiting for c's copies (handoverAwait).
	consumeAll(t, ctx, wc, c.cli, n, 10*time.Second)
	return b, c, wc
}

// heldAfterStop stops a, the dispatcher of queue fo, and puts fo's
// messages m00..m(n-1) through b while b and c still see a alive: both
// hold copies of them.
func heldAfterStop(t *testing.T, ctx context.Context, a, b, c *member, n int) {
	t.Helper()
	a.stop()
	for i := range n {
		if _, err := b.cli.Put(ctx, fmt.Sprintf("/q/fo/p/m%02d", i), "v"); err != nil {
			t.Fatalf("put while the dispatcher is unreachable: %v", err)
		}
	}
	waitUntil(t, 5*time.Second, "c to hold the copies", func() bool {
		q, _ := queueOn(c, "fo")
		return q.Held == n
	})
}

// TestCluster_failoverCollectsCopiesFirst: the dispatcher dies with puts
// through b held as copies on b and c. b claims the queue and delivers
// nothing until c handed its copies over (or handoverAwait passed): had
// it delivered its own copies and had a consumer acknowledged them, b
// dying before c's round would have left c to claim the queue and
// deliver its copies of the same messages again.
//
// b's claims are answered only a while after they are applied, as under
// load: a consumer's watch on b that came meanwhile entered the epoch
// before the claim noted it a failover, and delivered at once.
func TestCluster_failoverCollectsCopiesFirst(t *testing.T) {
	cl := newCluster(t)
	cl.records = func(name string, s *kv.Server) RecordStore {
		if name == "b" {
			return &slowClaims{Server: s, delay: 300 * time.Millisecond}
		}
		return s
	}
	a, b := cl.start("a", nil), cl.start("b", nil)
	c := cl.start("c", func(c *Config) { c.ReconcileInterval = time.Hour }) // the test runs c's rounds
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	if _, err := a.cli.Put(ctx, "/q/fo/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "a's record on c", func() bool { return strings.HasPrefix(recordOn(c, "fo"), fmt.Sprint(a.id, ";")) })
	const n = 20
	heldAfterStop(t, ctx, a, b, c, n)
	connect(b, c) // serf reports a gone
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wb := b.cli.Watch(wctx, "/q/fo/c/on-b")
	waitUntil(t, 5*time.Second, "b to dispatch fo", func() bool { return strings.HasPrefix(recordOn(c, "fo"), fmt.Sprint(b.id, ";")) })
	seen := map[string]int{}
	deadline := time.After(handoverAwait / 4)
	for wait := true; wait; {
		select {
		case resp := <-wb:
			for _, ev := range resp.Events {
				seen[ParseKey(string(ev.Kv.Key)).Tail]++
				if _, err := b.cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
					t.Fatal(err)
				}
			}
		case <-deadline:
			wait = false
		}
	}
	if len(seen) > 0 {
		t.Errorf("b delivered %d messages before c handed its copies over", len(seen))
	}
	wcancel()
	b.stop() // before c's round
	connect(c)
	wc := c.cli.Watch(ctx, "/q/fo/c/on-c") // claims fo: b is gone
	waitUntil(t, 5*time.Second, "c to dispatch fo", func() bool { return strings.HasPrefix(recordOn(c, "fo"), fmt.Sprint(c.id, ";")) })
	c.mgr.reconcile() // its copies join the queue
	for _, tail := range consumeAll(t, ctx, wc, c.cli, n, 10*time.Second) {
		seen[tail]++
	}
	for tail, k := range seen {
		if k != 1 {
			t.Errorf("%s delivered %d times", tail, k)
		}
	}
}

// slowClaims answers a write of a dispatcher record delay after it is
// applied.
type slowClaims struct {
	*kv.Server
	delay time.Duration
}

func (s *slowClaims) CompareAndPut(ctx context.Context, key string, old, value []byte) (bool, error) {
	ok, err := s.Server.CompareAndPut(ctx, key, old, value)
	if ParseKey(key).Kind == KindRecord {
		time.Sleep(s.delay)
	}
	return ok, err
}

// TestCluster_handoffAfterFailoverDropsDoneCopies: after a failover b
// dispatches the queue and its consumer acknowledged every message,
// while c, whose rounds are late, still holds its copies of them. b
// leaves holding one more message (delivered, not acknowledged) and hands
// the queue to c, whose copies join its queue as the first chunk comes,
// before b's DONE names them acknowledged: the DONE drops them, rather
// than c deliver them again.
func TestCluster_handoffAfterFailoverDropsDoneCopies(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	b, c, wc := ackedAfterFailover(t, ctx)
	if _, err := b.cli.Put(ctx, "/q/fo/p/last", "v"); err != nil {
		t.Fatal(err)
	}
	if evs := next(t, wc, 5*time.Second); len(evs) != 1 || ParseKey(string(evs[0].Kv.Key)).Tail != "last" {
		t.Fatalf("got %d deliveries, want last alone", len(evs))
	}
	hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
	defer hcancel()
	if err := b.mgr.Handoff(hctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.mgr.reconcile()
	}
	deadline := time.After(time.Second)
	for {
		select {
		case resp := <-wc:
			for _, ev := range resp.Events {
				if tail := ParseKey(string(ev.Kv.Key)).Tail; tail != "last" {
					t.Fatalf("%s, acknowledged at b, delivered again by c as %s", tail, ev.Kv.Key)
				}
			}
		case <-deadline:
			return
		}
	}
}

// cutOffFrom makes a the dispatcher of queue fo (a put, "first") and
// cuts c's peer link to it; c's gossip still calls a alive, and others
// too. It returns the cut link, to mend.
func cutOffFrom(t *testing.T, ctx context.Context, a, c *member, others ...gossip.Peer) *linkProxy {
	t.Helper()
	if _, err := a.cli.Put(ctx, "/q/fo/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "a's record on c", func() bool { return strings.HasPrefix(recordOn(c, "fo"), fmt.Sprint(a.id, ";")) })
	px := newLinkProxy(t, a.link.Addrs()[0].String())
	px.setCut(true)
	cut := a.asPeer()
	cut.Addr = px.addr()
	c.peers.set(append([]gossip.Peer{cut}, others...))
	return px
}

// TestCluster_cutOffMemberDropsRelayedCopies: c's peer link to a, the
// dispatcher, is down while gossip calls a alive (a partial partition).
// Puts through c are held as copies on c and b; b reaches a and hands
// its copies over, a delivers them and they are acknowledged. b tells c
// that a took them, and c drops its copies. Kept until the link was
// back, they reached a after it had forgotten their ids (a busy queue
// acknowledges far more meanwhile) and were delivered again; had a
// failed meanwhile, the next dispatcher delivered them all again.
func TestCluster_cutOffMemberDropsRelayedCopies(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	px := cutOffFrom(t, ctx, a, c, b.asPeer())
	// b also sees d, frozen: its peer link takes connections and never
	// answers. b's word to c must not wait behind its word to d.
	frozen, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	b.peers.set([]gossip.Peer{{ID: gossip.MemberID("d"), Addr: frozen.Addr().String(), Boot: "d1"}, a.asPeer(), c.asPeer()})
	const n = 20
	for i := range n {
		if _, err := c.cli.Put(ctx, fmt.Sprintf("/q/fo/p/m%02d", i), "v"); err != nil {
			t.Fatalf("put while the dispatcher is cut off: %v", err)
		}
	}
	w := a.cli.Watch(ctx, "/q/fo/c/x")
	if got := consumeAll(t, ctx, w, a.cli, n+1, 10*time.Second); len(got) != n+1 {
		t.Fatalf("a delivered %d of %d", len(got), n+1)
	}
	waitUntil(t, time.Second, "c to drop the copies a took from b", func() bool { return heldOn(c, "fo") == 0 })
	q := a.mgr.lookup("fo")
	q.mu.Lock()
	q.done = newDoneSet(doneIDs) // as after 2×doneIDs later acknowledgements
	q.mu.Unlock()
	px.setCut(false)
	noRedelivery(t, w, "while c was cut off")
}

// TestCluster_putsWhileHoldingTryTheHandoverSeldom: while the dispatcher
// is unreachable from c, each put on c was to hand over everything c held
// first, take every held copy and put it back: 20,000 puts held one
// after another took 70 s, each slower than the one before. A put now
// holds its messages behind the others without trying again for a while
// until the reconcile round reaches the dispatcher again: of 2,000 puts
// from 16 clients, a few try (c's own rounds are the test's: none here).
func TestCluster_putsWhileHoldingTryTheHandoverSeldom(t *testing.T) {
	cl := newCluster(t)
	a := cl.start("a", nil)
	c := cl.start("c", func(c *Config) { c.ReconcileInterval = time.Hour })
	connect(a, c)
	ctx := testCtx(t, 60*time.Second)
	px := cutOffFrom(t, ctx, a, c)
	const clients, each = 16, 125
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := c.cli.Put(ctx, fmt.Sprintf("/q/fo/p/%d-%d", g, i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := heldOn(c, "fo"); n != clients*each {
		t.Fatalf("c holds %d copies, want %d", n, clients*each)
	}
	if n := c.mgr.metrics.handoverFailures.Load(); n > clients*each/10 {
		t.Errorf("%d hand-overs tried and failed for %d puts, want few", n, clients*each)
	}
	px.setCut(false)
	c.peers.set([]gossip.Peer{a.asPeer()})
	w := a.cli.Watch(ctx, "/q/fo/c/x")
	c.mgr.reconcile() // pings a, passed over by the failed hand-overs, beside the round
	waitUntil(t, 5*time.Second, "c to readmit a", func() bool { return !c.mgr.passedOver(a.id) })
	c.mgr.reconcile()
	tails := consumeAll(t, ctx, w, a.cli, clients*each+1, 10*time.Second)
	checkProducerOrder(t, slices.DeleteFunc(tails, func(s string) bool { return s == "first" }), clients, each)
}

// deadPathTo makes a the dispatcher of queue fo (a put, "first") and
// sends c's peer link to it through a proxy, for the test to stall: c's
// forward stream (a put with key open) and its other connection to a
// (holds and acknowledgements take it; a ping) are open through it.
func deadPathTo(t *testing.T, ctx context.Context, a, c *member, open string) *linkProxy {
	t.Helper()
	if _, err := a.cli.Put(ctx, "/q/fo/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "a's record on c", func() bool { return strings.HasPrefix(recordOn(c, "fo"), fmt.Sprint(a.id, ";")) })
	px := newLinkProxy(t, a.link.Addrs()[0].String())
	via := a.asPeer()
	via.Addr = px.addr()
	c.peers.set([]gossip.Peer{via})
	if _, err := c.cli.Put(ctx, open, "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.mgr.ping(ctx, via.Addr, "fo"); err != nil {
		t.Fatal(err)
	}
	return px
}

// deadPathPair starts a and c (c configured by confC, nil for the
// defaults) and makes the link of c to a a proxy, for the test to stall
// (deadPathTo, open the put that opens c's forward stream).
func deadPathPair(t *testing.T, timeout time.Duration, open string, confC func(*Config)) (a, c *member, ctx context.Context, px *linkProxy) {
	t.Helper()
	cl := newCluster(t)
	a = cl.start("a", nil)
	c = cl.start("c", confC)
	connect(a, c)
	ctx = testCtx(t, timeout)
	return a, c, ctx, deadPathTo(t, ctx, a, c, open)
}

// TestCluster_putsAcrossADeadPathHoldAtOnce: c's peer link to a, the
// dispatcher, stalls with its connections open (a dead path: nothing
// comes back, nothing ends them) while gossip calls a alive. Each put
// on c waited the forward timeout (5 s) before holding its message,
// tried again every 250 ms, and c's reconcile round tried the hand-over
// under the lock puts take, and each held put asked a to keep a copy
// too, waiting 2 s for its answer: 3 sequential puts in 20 s. The first
// put now finds a unreachable and the others hold at once, a not asked,
// while the round pings a; once the link flows, puts are forwarded again
// and everything reaches a's consumer, in order.
func TestCluster_putsAcrossADeadPathHoldAtOnce(t *testing.T) {
	a, c, ctx, px := deadPathPair(t, 60*time.Second, "/q/fo/p/0-0", nil)
	if n := heldOn(c, "fo"); n != 0 {
		t.Fatalf("c holds %d copies before the stall, want 0", n)
	}
	px.setStalled(true)
	const clients, each = 4, 50
	start := time.Now()
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			for i := range each {
				if g == 0 && i == 0 {
					continue // put before the stall
				}
				if _, err := c.cli.Put(ctx, fmt.Sprintf("/q/fo/p/%d-%d", g, i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if n := heldOn(c, "fo"); n != clients*each-1 {
		t.Fatalf("c holds %d copies, want %d", n, clients*each-1)
	}
	// The first puts wait the forward timeout; had each put tried a, the
	// 50 sequential puts of each client would wait it again and again.
	if limit := 3 * forwardTimeout; took > limit {
		t.Errorf("%d puts across the dead path took %v, want the first forward timeout (%v) and little more", clients*each-1, took, forwardTimeout)
	}
	px.setStalled(false)
	w := a.cli.Watch(ctx, "/q/fo/c/x")
	tails := consumeAll(t, ctx, w, a.cli, clients*each+1, 20*time.Second)
	checkProducerOrder(t, slices.DeleteFunc(tails, func(s string) bool { return s == "first" }), clients, each)
}

// TestCluster_replicatedPutsAcrossADeadPathFailAtOnce: as
// TestCluster_putsAcrossADeadPathHoldAtOnce, for an ack=replicated queue,
// whose puts are not held: each put on c waited its client's deadline
// (the forward waits up to 30 s for a dispatcher passing backups over).
// The first still does; a ping then gets no answer either, and the puts
// after it fail at once with Unavailable, until the link flows again.
func TestCluster_replicatedPutsAcrossADeadPathFailAtOnce(t *testing.T) {
	cl := newCluster(t)
	a := cl.start("a", nil)
	c := cl.start("c", nil)
	connect(a, c)
	ctx := testCtx(t, 60*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("fo"), `{"ack":"replicated"}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the settings on c", func() bool { return c.mgr.view("fo").set.Ack == AckReplicated })
	px := deadPathTo(t, ctx, a, c, "/q/fo/p/before")
	px.setStalled(true)
	put := func(i int, timeout time.Duration) (time.Duration, error) {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		_, err := c.cli.Put(pctx, fmt.Sprintf("/q/fo/p/%d", i), "v")
		return time.Since(start), err
	}
	if _, err := put(0, time.Second); !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the first put across the dead path: %v, want its deadline exceeded", err)
	}
	waitUntil(t, 5*time.Second, "c to mark a unreachable", func() bool { return c.mgr.passedOver(a.id) })
	for i := 1; i <= 20; i++ {
		took, err := put(i, 5*time.Second)
		if status.Code(err) != codes.Unavailable || took > time.Second {
			t.Fatalf("put %d across the dead path: %v after %v, want Unavailable at once", i, err, took)
		}
	}
	px.setStalled(false)
	waitUntil(t, 10*time.Second, "puts on c to reach a again", func() bool {
		_, err := put(100, 2*time.Second)
		return err == nil
	})
}

// TestCluster_readmitLeavesTheRoundFree: the reconcile round pinged each
// member passed over itself, and a member on a dead path held every
// queue's round for the ping's timeout (probeTimeout) each second. The
// pings run beside the round now: readmit returns at once, the member
// stays passed over while its link is dead, and is readmitted once it
// answers again.
func TestCluster_readmitLeavesTheRoundFree(t *testing.T) {
	a, c, _, px := deadPathPair(t, 60*time.Second, "/q/fo/p/before", nil)
	px.setStalled(true)
	for i := range 3 {
		passOverFor(c.mgr, a.id, 0) // due now, whatever the rounds did
		start := time.Now()
		c.mgr.readmit()
		if took := time.Since(start); took > probeTimeout/5 {
			t.Fatalf("readmit %d with a on a dead path took %v, want it back at once (the ping times out after %v)", i, took, probeTimeout)
		}
	}
	time.Sleep(probeTimeout + readmitProbeEvery)
	if !c.mgr.passedOver(a.id) {
		t.Fatal("a is readmitted while its link is dead")
	}
	px.setStalled(false)
	waitUntil(t, 3*(probeTimeout+readmitProbeEvery), "c to readmit a once it answers", func() bool { return !c.mgr.passedOver(a.id) })
}

// TestCluster_notAnsweringDuringAPingCounts: a member found not
// answering (markUnreachable) while readmit's ping of it runs stays
// passed over when that ping is answered after all: the finding is the
// newer. The answer erased it, and a backup that had just failed was
// chosen again at once.
func TestCluster_notAnsweringDuringAPingCounts(t *testing.T) {
	byTest := func(c *Config) { c.ReconcileInterval = time.Hour } // the test runs readmit
	a, c, _, px := deadPathPair(t, 30*time.Second, "/q/fo/p/before", byTest)
	px.setStalled(true)
	c.mgr.markUnreachable(a.id)
	c.mgr.readmit() // its ping waits on the stalled link
	c.mgr.markUnreachable(a.id)
	px.setStalled(false) // the ping is answered
	pinging := func() bool {
		c.mgr.mu.RLock()
		defer c.mgr.mu.RUnlock()
		return c.mgr.unreachable[a.id].pinging
	}
	time.Sleep(probeTimeout + 200*time.Millisecond) // the ping has ended, answered or not
	if !c.mgr.passedOver(a.id) || pinging() {
		t.Fatal("a is readmitted by the answer to a ping older than the finding that it does not answer")
	}
	c.mgr.readmit() // the finding's own ping
	waitUntil(t, 3*probeTimeout, "c to readmit a once a ping after the finding is answered", func() bool { return !c.mgr.passedOver(a.id) })
}
