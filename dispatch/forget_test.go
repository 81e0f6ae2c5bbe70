package dispatch

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// queueNames returns the names of the queues m holds, sorted, without
// stamping them as used.
func queueNames(m *Manager) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var names []string
	for name := range m.queues {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// startForgetting starts a node on a fake clock whose reconcile rounds the
// test runs.
func startForgetting(t *testing.T, mutate ...func(*Config)) (*testNode, *clockwork.FakeClock, *clientv3.Client) {
	clk := clockwork.NewFakeClock()
	n := startNode(t, func(c *Config) {
		c.Clock = clk
		c.ReconcileInterval = time.Hour
		for _, f := range mutate {
			f(c)
		}
	})
	return n, clk, n.client(t)
}

// useAndForget puts a message to each of names queues named prefix and a
// number, has a consumer take and acknowledge it and leave, then runs
// the clock past forgetAfter and reconciles until n forgot them all.
func useAndForget(t *testing.T, n *testNode, clk *clockwork.FakeClock, cli *clientv3.Client, prefix string, names int) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	for i := range names {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/%s%d/p/1", prefix, i), "v"); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		ev := collectN(t, cli.Watch(wctx, fmt.Sprintf("/q/%s%d/c/x", prefix, i)), 1, 10*time.Second)[0]
		if _, err := cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	waitFor(t, "consumers gone", func() bool { return n.mgr.localConsumers(prefix+"0") == 0 })
	clk.Advance(forgetAfter + time.Second)
	reconcileUntil(t, "all queues forgotten", func() bool { return len(queueNames(n.mgr)) == 0 }, n.mgr)
}

// reconcileUntil runs the reconcile rounds of ms until cond holds, for at
// most 5 s: a round forgets no queue whose lock another goroutine holds
// at that moment (the visibility sweep, which advancing the fake clock
// fires too), and the next round does.
func reconcileUntil(t *testing.T, what string, cond func() bool, ms ...*Manager) {
	t.Helper()
	waitUntil(t, 5*time.Second, what, func() bool {
		for _, m := range ms {
			m.reconcile()
		}
		return cond()
	})
}

// TestForget_idleQueue checks that a member forgets a queue that holds
// nothing once it has not been used for forgetAfter: its state, its
// cached view and settings, and its record, which the next put writes
// again. A queue with a message or a consumer, or used since, is kept.
func TestForget_idleQueue(t *testing.T) {
	n, clk, cli := startForgetting(t)
	ctx := testCtx(t, 30*time.Second)
	for _, key := range []string{"/q/idle/p/1", "/q/kept/p/1", "/q/watched/p/1", "/q/recent/p/1"} {
		if _, err := cli.Put(ctx, key, "v"); err != nil {
			t.Fatal(err)
		}
	}
	ack := func(wc clientv3.WatchChan) {
		t.Helper()
		ev := collectN(t, wc, 1, 10*time.Second)[0]
		if r, err := cli.Delete(ctx, string(ev.Kv.Key)); err != nil || r.Deleted != 1 {
			t.Fatalf("ack %s: %v, %v", ev.Kv.Key, r, err)
		}
	}
	idleCtx, leave := context.WithCancel(ctx)
	ack(cli.Watch(idleCtx, "/q/idle/c/x"))
	leave()
	recentCtx, leaveRecent := context.WithCancel(ctx)
	ack(cli.Watch(recentCtx, "/q/recent/c/x"))
	leaveRecent()
	ack(cli.Watch(ctx, "/q/watched/c/x")) // stays
	waitFor(t, "the consumers that left removed", func() bool {
		return n.mgr.localConsumers("idle") == 0 && n.mgr.localConsumers("recent") == 0
	})

	n.mgr.reconcile()
	if got := queueNames(n.mgr); len(got) != 4 {
		t.Fatalf("queues before forgetAfter: %v, want all 4", got)
	}
	clk.Advance(forgetAfter - time.Second)
	n.mgr.reconcile()
	n.mgr.lookup("recent") // used: a minute from now
	clk.Advance(time.Second)
	reconcileUntil(t, "the queues after forgetAfter to be kept, recent and watched", func() bool {
		return slices.Equal(queueNames(n.mgr), []string{"kept", "recent", "watched"})
	}, n.mgr)
	for name, want := range map[string]int64{"idle": 0, "kept": 1, "watched": 1, "recent": 1} {
		r, err := cli.Get(ctx, RecordKey(name))
		if err != nil {
			t.Fatal(err)
		}
		if r.Count != want {
			t.Fatalf("record of %s: %d, want %d", name, r.Count, want)
		}
	}
	n.mgr.views.mu.RLock()
	_, viewed := n.mgr.views.byName["idle"]
	n.mgr.views.mu.RUnlock()
	n.mgr.settings.mu.RLock()
	_, set := n.mgr.settings.byName["idle"]
	n.mgr.settings.mu.RUnlock()
	if viewed || set {
		t.Fatalf("caches of a forgotten queue: view kept %v, settings kept %v", viewed, set)
	}

	// The name works as a new queue: claimed again, its message delivered.
	if _, err := cli.Put(ctx, "/q/idle/p/2", "w"); err != nil {
		t.Fatal(err)
	}
	if rec := string(n.kv.Get(RecordKey("idle"))); rec != "7;epoch=1" {
		t.Fatalf("record after the next put: %q, want 7;epoch=1", rec)
	}
	if ev := collectN(t, cli.Watch(ctx, "/q/idle/c/x"), 1, 10*time.Second)[0]; string(ev.Kv.Value) != "w" {
		t.Fatalf("delivered %s=%s, want the new put's w", ev.Kv.Key, ev.Kv.Value)
	}
}

// TestForget_leftBehind checks that a queue a put waited on for
// room is forgotten once idle: on a member that forwards to the queue's
// dispatcher, nothing frees bytes to end that wait here. Renamed numbers
// left behind do not keep it either.
func TestForget_leftBehind(t *testing.T) {
	n, clk, _ := startForgetting(t)
	q := n.mgr.queueFor("full")
	q.roomSignal() // as waitForRoom does
	q.mu.Lock()
	q.renamed = map[uint64]renaming{3: {tail: "k", to: 7}} // left by a message delivered again under its new number
	q.mu.Unlock()
	clk.Advance(forgetAfter)
	reconcileUntil(t, "no queue left after forgetAfter", func() bool { return len(queueNames(n.mgr)) == 0 }, n.mgr)
}

// TestForget_lookedUpBefore checks that what is added to a queue looked
// up before the member forgot it (a put whose fsync took that long) goes
// to the queue that replaced it, where a consumer gets it, rather than
// to the forgotten one, where nobody would.
func TestForget_lookedUpBefore(t *testing.T) {
	n, clk, cli := startForgetting(t)
	ctx := testCtx(t, 30*time.Second)
	q := n.mgr.queueFor("late")
	clk.Advance(forgetAfter)
	reconcileUntil(t, "the queue unused for forgetAfter forgotten", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.forgotten && len(queueNames(n.mgr)) == 0
	}, n.mgr)
	msg := []incoming{{id: MsgID{Origin: 7, N: 1}, tail: "1", value: []byte("v")}}
	if _, err := n.mgr.enqueuePersisted(q, "late", msg, arrivedLocal); err != nil {
		t.Fatal(err)
	}
	if q.msgs.len() != 0 {
		t.Fatal("the message went to the forgotten queue")
	}
	if ev := collectN(t, cli.Watch(ctx, "/q/late/c/x"), 1, 10*time.Second)[0]; string(ev.Kv.Key) != "/q/late/1/1" {
		t.Fatalf("delivered %s, want /q/late/1/1", ev.Kv.Key)
	}
}

// TestForget_forwardedAfter checks that a put through another member
// after the dispatcher forgot the queue and deleted its record claims it
// there and reaches a consumer on the first member.
func TestForget_forwardedAfter(t *testing.T) {
	clk := clockwork.NewFakeClock()
	byTest := func(c *Config) { c.Clock = clk; c.ReconcileInterval = time.Hour }
	cl := newCluster(t)
	a, b := cl.start("a", byTest), cl.start("b", byTest)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := b.cli.Put(ctx, "/q/rr/p/1", "v"); err != nil { // claimed by b: a forwards
		t.Fatal(err)
	}
	if _, err := a.cli.Put(ctx, "/q/rr/p/2", "v"); err != nil {
		t.Fatal(err)
	}
	wctx, leave := context.WithCancel(ctx)
	for _, ev := range collectN(t, b.cli.Watch(wctx, "/q/rr/c/x"), 2, 10*time.Second) {
		if r, err := b.cli.Delete(ctx, string(ev.Kv.Key)); err != nil || r.Deleted != 1 {
			t.Fatalf("ack %s: %v, %v", ev.Kv.Key, r, err)
		}
	}
	leave()
	waitFor(t, "the consumer removed", func() bool { return b.mgr.localConsumers("rr") == 0 })
	clk.Advance(forgetAfter)
	reconcileUntil(t, "b to forget rr and its record", func() bool {
		return len(queueNames(b.mgr)) == 0 && recordOn(a, "rr") == ""
	}, a.mgr, b.mgr)
	wc := a.cli.Watch(ctx, "/q/rr/c/y")
	// Listed, so claimed for it: a put that came first would claim rr on
	// b, the consumer would claim it from b, and the message would wait
	// on b for a hand-over of b's reconcile loop, which the test runs by
	// hand.
	waitFor(t, "a's consumer listed", func() bool { return a.mgr.localConsumers("rr") == 1 })
	if _, err := b.cli.Put(ctx, "/q/rr/p/3", "w"); err != nil {
		t.Fatal(err)
	}
	a.mgr.reconcile() // binds the consumer to b's queue
	if ev := collectN(t, wc, 1, 10*time.Second)[0]; string(ev.Kv.Value) != "w" {
		t.Fatalf("delivered %s=%s, want w", ev.Kv.Key, ev.Kv.Value)
	}
}

// TestForget_dropsWhatItEntered: a queue forgotten takes its entry of
// the epochs this member claimed (Manager.entered) with it: the map kept
// every name ever claimed, the unbounded growth forgetting is for.
func TestForget_dropsWhatItEntered(t *testing.T) {
	n, clk, cli := startForgetting(t)
	const names = 50
	useAndForget(t, n, clk, cli, "n", names)
	left := 0
	n.mgr.entered.Range(func(any, any) bool { left++; return true })
	if left != 0 {
		t.Fatalf("entered keeps %d of %d forgotten queues' names (records deleted, state dropped)", left, names)
	}
}

// TestRecordDeleted_handedOverNumbersReplaced: a client deletes a
// queue's record (as errEpochExhausted tells it to, or `etcdctl del
// --prefix /q/`); the next put, on another member, claims the queue at
// epoch 1 again, numbering from 1, while the member that dispatched it
// still holds a message numbered 1 in epoch 1. Handed over, that message
// kept its number when the new dispatcher no longer held one numbered
// so (given and acknowledged): one delivery key named two messages in
// turn, and the delete of the first, sent again (a delete of an
// acknowledged delivery deletes nothing in etcd), removed the second,
// which no consumer was ever given. It takes a new number instead.
func TestRecordDeleted_handedOverNumbersReplaced(t *testing.T) {
	cl := newCluster(t)
	clk := clockwork.NewFakeClock()
	a := cl.start("a", func(c *Config) { c.Clock = clk }) // reconciles when the test says
	b := cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if err := clk.BlockUntilContext(ctx, managerTickers); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Put(ctx, "/q/jobs/p/k", "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Delete(ctx, "/q/jobs"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to see the record deleted", func() bool { return recordOn(b, "jobs") == "" })
	if _, err := b.cli.Put(ctx, "/q/jobs/p/k", "second"); err != nil {
		t.Fatal(err)
	}
	// A consumer on b takes and acknowledges b's message, and leaves.
	wctx, stop := context.WithCancel(ctx)
	evs := next(t, b.cli.Watch(wctx, "/q/jobs/c/w"), 5*time.Second)
	if len(evs) != 1 || string(evs[0].Kv.Value) != "second" {
		t.Fatalf("want b's message alone, got %v", evs)
	}
	acked := string(evs[0].Kv.Key)
	if r, err := b.cli.Delete(ctx, acked); err != nil || r.Deleted != 1 {
		t.Fatalf("ack %s: %v %v", acked, r, err)
	}
	stop()
	// a reconciles: it hands its message over to b.
	clk.Advance(time.Second)
	waitFor(t, "a's message handed over to b", func() bool { return rowsOn(b.mgr, "jobs") == 1 })
	if r, err := b.cli.Delete(ctx, acked); err != nil || r.Deleted != 0 {
		t.Errorf("a second delete of the acknowledged %s deleted %d (err %v): a's message, never delivered, is gone (%d left)", acked, r.Deleted, err, rowsOn(b.mgr, "jobs"))
	}
	evs = next(t, b.cli.Watch(ctx, "/q/jobs/c/w2"), 5*time.Second)
	if len(evs) != 1 || string(evs[0].Kv.Value) != "first" || string(evs[0].Kv.Key) == acked {
		t.Errorf("want a's message under a key of its own, not %s; got %v", acked, evs)
	}
}

// TestForget_dropsPutSeries: a queue forgotten takes its series of
// chute.queue.puts with it, as it takes its record, state and entered
// epochs: docs/queues.md says a queue per request "costs nothing once
// done", and /metrics grew by a series (and the counter's map by an
// entry) for every queue name ever put to.
func TestForget_dropsPutSeries(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	n, clk, cli := startForgetting(t, func(c *Config) { c.Meter = mp })
	const names = 50
	useAndForget(t, n, clk, cli, "reply-", names)
	ctx := testCtx(t, 30*time.Second)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "chute.queue.puts" {
				series += len(sum.DataPoints)
			}
		}
	}
	n.mgr.inserts.puts.mu.RLock()
	kept := len(n.mgr.inserts.puts.m)
	n.mgr.inserts.puts.mu.RUnlock()
	if series != 0 || kept != 0 {
		t.Fatalf("after %d queues were forgotten, chute.queue.puts still exports %d series and keeps %d entries", names, series, kept)
	}
}

// TestForget_dropsSeriesOfQueuesNeverHeld: a put refused before its
// queue was made (a row that is not JSON) leaves a series of
// chute.queue.puts for a queue this member never holds, which forget
// never drops (as with the queues a member only forwards to): a sweep
// every forgetAfter drops the series of such queues no put counted in
// since the sweep before. They stayed for good, and once max queue
// labels were taken every queue counted as queue="_other".
func TestForget_dropsSeriesOfQueuesNeverHeld(t *testing.T) {
	n, clk, cli := startForgetting(t)
	ctx := testCtx(t, 30*time.Second)
	const names = 20
	for i := range names {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:bad%d/p/1", i), "not json"); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("put of a row that is not JSON: %v, want InvalidArgument", err)
		}
	}
	entries := func() int {
		n.mgr.inserts.puts.mu.RLock()
		defer n.mgr.inserts.puts.mu.RUnlock()
		return len(n.mgr.inserts.puts.m)
	}
	if got := entries(); got != names || len(queueNames(n.mgr)) != 0 {
		t.Fatalf("after %d refused puts: %d series, queues %v; want %d series and no queue", names, got, queueNames(n.mgr), names)
	}
	n.mgr.reconcile() // the first sweep: counted since the start, kept
	if got := entries(); got != names {
		t.Fatalf("after the first sweep: %d series, want %d", got, names)
	}
	clk.Advance(forgetAfter)
	n.mgr.reconcile()
	if got := entries(); got != 0 {
		t.Fatalf("a sweep later, without puts: %d series, want 0", got)
	}
}
