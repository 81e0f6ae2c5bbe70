package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestQueue_produceConsumeAck checks, in-process, that two messages put
// to producer keys arrive in order on a consumer watch as PUT events with
// delivery keys, and deleting those keys empties the queue.
func TestQueue_produceConsumeAck(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	wc := cli.Watch(ctx, "/queue/jobs/consumer/2b8f0a1e-0000-4000-8000-000000000001")
	for _, m := range []string{"m1", "m2"} {
		if _, err := cli.Put(ctx, "/queue/jobs/producer/"+m, "body-"+m); err != nil {
			t.Fatal(err)
		}
	}
	evs := collectN(t, wc, 2, 5*time.Second)
	got := fmt.Sprintf("%s %s=%s; %s %s=%s", evs[0].Type, evs[0].Kv.Key, evs[0].Kv.Value, evs[1].Type, evs[1].Kv.Key, evs[1].Kv.Value)
	want := "PUT /queue/jobs/1/m1=body-m1; PUT /queue/jobs/2/m2=body-m2"
	if got != want {
		t.Fatalf("deliveries: got %q, want %q", got, want)
	}
	if d := n.depth("jobs"); d != 2 {
		t.Fatalf("depth before acks: got %d, want 2", d)
	}
	for _, ev := range evs {
		r, err := cli.Delete(ctx, string(ev.Kv.Key))
		if err != nil {
			t.Fatal(err)
		}
		if r.Deleted != 1 {
			t.Fatalf("ack of %s: deleted %d, want 1", ev.Kv.Key, r.Deleted)
		}
	}
	if d := n.depth("jobs"); d != 0 {
		t.Fatalf("depth after acks: got %d, want 0", d)
	}
	// A second ack of the same key removes nothing.
	if r, err := cli.Delete(ctx, string(evs[0].Kv.Key)); err != nil || r.Deleted != 0 {
		t.Fatalf("second ack: got %v, %v; want deleted 0", r, err)
	}
	// Messages never enter the KV; the dispatcher record and the consumer
	// record (naming the member hosting the consumer) do.
	g, err := cli.Get(ctx, "/q", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var kvs []string
	for _, kv := range g.Kvs {
		kvs = append(kvs, string(kv.Key)+"="+string(kv.Value))
	}
	want = "[/q/jobs=7;epoch=1 /q/jobs/c/2b8f0a1e-0000-4000-8000-000000000001=7]"
	if fmt.Sprint(kvs) != want {
		t.Fatalf("KV under /q: got %v, want %s", kvs, want)
	}
}

// TestQueue_invalidKeys checks that a put or delete under a queue that is
// not one of its key forms is InvalidArgument and changes nothing.
func TestQueue_invalidKeys(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	for _, key := range []string{"/q/jobs/x/m1", "/q/jobs/p/a/b", "/q/jobs/7/m1", "/q/jobs/"} {
		if _, err := cli.Put(ctx, key, "v"); status.Code(err) != codes.InvalidArgument {
			t.Errorf("put %s: got %v, want InvalidArgument", key, err)
		}
	}
	if _, err := cli.Delete(ctx, "/q/jobs/p/m1"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("delete of a producer key: got %v, want InvalidArgument", err)
	}
	if _, err := cli.Put(ctx, "/q/jobs/p/m1", "v", clientv3.WithPrevKV()); status.Code(err) != codes.InvalidArgument {
		t.Errorf("put with prev_kv: got %v, want InvalidArgument", err)
	}
	if d := n.depth("jobs"); d > 0 {
		t.Fatalf("depth: got %d, want nothing queued", d)
	}
}

// TestQueue_twoConsumersShareAndRedeliver checks that two consumers
// each get about half; a consumer that goes has its unacknowledged
// messages delivered to the other, and nothing arrives twice otherwise.
func TestQueue_twoConsumersShareAndRedeliver(t *testing.T) {
	_, ctx, prod, a, b := twoConsumers(t)
	cliA, wa, wb := a.cli, a.wc, b.wc
	const total = 200
	for i := range total {
		if _, err := prod.Put(ctx, fmt.Sprintf("/q/work/p/m%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	evA := collectN(t, wa, total/2, 5*time.Second)
	evB := collectN(t, wb, total/2, 5*time.Second)
	if len(evA) != total/2 || len(evB) != total/2 {
		t.Fatalf("split: a got %d, b got %d; want %d each", len(evA), len(evB), total/2)
	}
	seen := map[string]string{}
	for _, ev := range evA {
		seen[string(ev.Kv.Key)] = "a"
	}
	for _, ev := range evB {
		if seen[string(ev.Kv.Key)] != "" {
			t.Fatalf("%s delivered to both", ev.Kv.Key)
		}
	}
	// a acks half of its messages and goes; the rest of its go to b.
	for _, ev := range evA[:50] {
		if _, err := cliA.Delete(ctx, string(ev.Kv.Key)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cliA.Close(); err != nil {
		t.Fatal(err)
	}
	re := collectN(t, wb, 50, 5*time.Second)
	for i, ev := range re {
		if want := string(evA[50+i].Kv.Key); string(ev.Kv.Key) != want {
			t.Fatalf("redelivery %d: got %s, want %s (oldest first)", i, ev.Kv.Key, want)
		}
		if ev.Kv.Version != 2 {
			t.Fatalf("redelivery %d: attempt %d, want 2", i, ev.Kv.Version)
		}
	}
}

// TestQueue_visibilityTimeout checks that a message not acknowledged in
// time is delivered again, and not before: the manager's clock is fake,
// so the timeout passes when the test says.
func TestQueue_visibilityTimeout(t *testing.T) {
	clk := clockwork.NewFakeClock()
	n := startNode(t, func(c *Config) { c.Visibility = time.Minute; c.Clock = clk })
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	wc := cli.Watch(ctx, "/q/slow/c/x")
	if _, err := cli.Put(ctx, "/q/slow/p/only", "v"); err != nil {
		t.Fatal(err)
	}
	first := next(t, wc, 5*time.Second)
	if first[0].Kv.Version != 1 {
		t.Fatalf("first delivery: attempt %d, want 1", first[0].Kv.Version)
	}
	// A sweep a second before the timeout leaves the delivery alone.
	clk.Advance(time.Minute - time.Second)
	n.mgr.expireAll(clk.Now())
	if got := n.attempts("slow"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("attempts after a sweep before the timeout: %v, want [1]", got)
	}
	clk.Advance(2 * time.Second) // the sweep's ticker fires past the timeout
	again := next(t, wc, 5*time.Second)
	if string(again[0].Kv.Key) != string(first[0].Kv.Key) || again[0].Kv.Version != 2 {
		t.Fatalf("got %s attempt %d, want %s attempt 2", again[0].Kv.Key, again[0].Kv.Version, first[0].Kv.Key)
	}
}

// TestQueue_byteCap checks that over the cap a put is
// ResourceExhausted and nothing is queued; after consumers drain, puts
// succeed again.
func TestQueue_byteCap(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxQueueBytes = 1000 })
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	val := fillCap(ctx, t, cli, "cap")
	_, err := cli.Put(ctx, "/q/cap/p/xx", val)
	if !errors.Is(err, rpctypes.ErrTooManyRequests) {
		t.Fatalf("over the cap: got %v, want %v", err, rpctypes.ErrTooManyRequests)
	}
	if d := n.depth("cap"); d != 10 {
		t.Fatalf("depth: got %d, want 10", d)
	}
	wc := cli.Watch(ctx, "/q/cap/c/drain")
	for _, ev := range collectN(t, wc, 10, 5*time.Second) {
		if _, err := cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, "/q/cap/p/xx", val); err != nil {
		t.Fatalf("after draining: %v", err)
	}
}

// TestQueue_txnOfTwoQueuesAllOrNothing: a txn producing to two queues
// this member dispatches is all or nothing: the second over its byte cap
// refused the txn after the first had taken its message, which the
// producer's retry then put twice. A txn that passes fills both; two
// producers putting to both in either order do not deadlock.
func TestQueue_txnOfTwoQueuesAllOrNothing(t *testing.T) {
	n := startNode(t, func(c *Config) { c.MaxQueueBytes = 1000; c.FullWait = 300 * time.Millisecond })
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	val := fillCap(ctx, t, cli, "full")
	_, err := cli.Txn(ctx).Then(clientv3.OpPut("/q/a/p/1", "x"), clientv3.OpPut("/q/full/p/xx", val)).Commit()
	if !errors.Is(err, rpctypes.ErrTooManyRequests) {
		t.Fatalf("txn to a queue and a full one: got %v, want %v", err, rpctypes.ErrTooManyRequests)
	}
	if a, full := n.depth("a"), n.depth("full"); a != 0 || full != 10 {
		t.Fatalf("after the refused txn: depths a %d, full %d; want 0 and 10", a, full)
	}
	const each = 40
	errc := make(chan error, 2)
	for p := range 2 {
		go func() {
			for i := range each {
				first, second := "/q/b/p/", "/q/c/p/"
				if p == 1 {
					first, second = second, first
				}
				k := fmt.Sprintf("%d-%d", p, i)
				if _, err := cli.Txn(ctx).Then(clientv3.OpPut(first+k, "v"), clientv3.OpPut(second+k, "v")).Commit(); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if b, c := n.depth("b"), n.depth("c"); b != 2*each || c != 2*each {
		t.Fatalf("depths b %d, c %d; want %d each", b, c, 2*each)
	}
}

// fillCap puts ten 100-byte messages to queue, which a 1000-byte cap
// holds exactly, and returns the value of another such put.
func fillCap(ctx context.Context, t *testing.T, cli *clientv3.Client, queue string) string {
	t.Helper()
	val := strings.Repeat("x", 98) // 100 bytes with a two-byte key tail
	for i := range 10 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/%s/p/%02d", queue, i), val); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	return val
}

// TestQueue_fullWait checks that a put to a full queue waits for room:
// it is taken as soon as a consumer's ack frees bytes; it is refused
// ResourceExhausted once it has waited FullWait, and before its own
// deadline when that comes first, never DeadlineExceeded.
func TestQueue_fullWait(t *testing.T) {
	const fullWait = 600 * time.Millisecond
	n := startNode(t, func(c *Config) { c.MaxQueueBytes = 1000; c.FullWait = fullWait })
	cli := n.client(t)
	ctx := testCtx(t, 20*time.Second)
	val := fillCap(ctx, t, cli, "full")

	// Nothing frees room: refused after FullWait, not before.
	start := time.Now()
	_, err := cli.Put(ctx, "/q/full/p/xx", val)
	if took := time.Since(start); !errors.Is(err, rpctypes.ErrTooManyRequests) || took < fullWait-fullWaitStepMax || took > 5*fullWait {
		t.Fatalf("over the cap, nothing freed: got %v after %v, want %v after about %v", err, took, rpctypes.ErrTooManyRequests, fullWait)
	}
	// Asked again and again while it waited, refused once.
	if refused, waited := refusedOn(n.mgr, "full"); refused != 1 || waited != 1 {
		t.Fatalf("after one put refused: %d refused and %d waited counted, want 1 and 1", refused, waited)
	}
	// A deadline before FullWait: refused before it, with the cap's error.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start = time.Now()
	_, err = cli.Put(short, "/q/full/p/xx", val)
	cancel()
	if took := time.Since(start); !errors.Is(err, rpctypes.ErrTooManyRequests) || took >= 300*time.Millisecond {
		t.Fatalf("over the cap, 300ms deadline: got %v after %v, want %v before the deadline", err, took, rpctypes.ErrTooManyRequests)
	}

	// An ack frees room while a put waits: it is taken.
	done := make(chan error, 1)
	go func() {
		_, err := cli.Put(ctx, "/q/full/p/ww", val)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("put to a full queue returned at once: %v", err)
	case <-time.After(150 * time.Millisecond):
	}
	wc := cli.Watch(ctx, "/q/full/c/one")
	ev := collectN(t, wc, 1, 5*time.Second)[0]
	if _, err := cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("put waiting for room: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("put waiting for room not taken 5s after an ack freed it")
	}
	if d := n.depth("full"); d != 10 {
		t.Fatalf("depth: got %d, want 10 (9 left and the one that waited)", d)
	}
	if refused, waited := refusedOn(n.mgr, "full"); refused != 2 || waited != 3 {
		t.Fatalf("%d refused and %d waited counted, want 2 (the put taken after waiting is not one) and 3", refused, waited)
	}
}

// TestQueue_batchProduce checks that a 128-put txn is enqueued
// atomically and in order; a txn mixing queue and plain keys is refused.
func TestQueue_batchProduce(t *testing.T) {
	n := startNode(t, func(c *Config) { c.Prefetch = 200 })
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	ops := make([]clientv3.Op, 128)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("/q/batch/p/m%03d", i), fmt.Sprint(i))
	}
	r, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Succeeded || len(r.Responses) != 128 {
		t.Fatalf("txn: succeeded %v with %d responses", r.Succeeded, len(r.Responses))
	}
	for i, op := range r.Responses {
		if p := op.GetResponsePut(); p == nil || p.Header.GetRevision() != r.Header.Revision {
			t.Fatalf("txn response %d: got %v, want a put at revision %d", i, op, r.Header.Revision)
		}
	}
	wc := cli.Watch(ctx, "/q/batch/c/x")
	evs := collectN(t, wc, 128, 5*time.Second)
	for i, ev := range evs {
		if want := fmt.Sprintf("/q/batch/%d/m%03d", i+1, i); string(ev.Kv.Key) != want {
			t.Fatalf("delivery %d: got %s, want %s", i, ev.Kv.Key, want)
		}
	}
	_, err = cli.Txn(ctx).Then(clientv3.OpPut("/q/batch/p/a", "1"), clientv3.OpPut("plain", "1")).Commit()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("mixed txn: got %v, want InvalidArgument", err)
	}
	// All or nothing: a batch over the cap queues none of its puts.
	small := startNode(t, func(c *Config) { c.MaxQueueBytes = 50 })
	scli := small.client(t)
	_, err = scli.Txn(ctx).Then(clientv3.OpPut("/q/s/p/a", strings.Repeat("v", 30)), clientv3.OpPut("/q/s/p/b", strings.Repeat("v", 30))).Commit()
	if !errors.Is(err, rpctypes.ErrTooManyRequests) {
		t.Fatalf("batch over the cap: got %v", err)
	}
	if d := small.depth("s"); d != 0 {
		t.Fatalf("depth after a refused batch: got %d, want 0", d)
	}
}

// TestQueue_manyProducersKeepTheirOrder puts 10,000 messages from four
// producers on one node and checks that one consumer gets each exactly
// once, each producer's in its order.
func TestQueue_manyProducersKeepTheirOrder(t *testing.T) {
	n := startNode(t, func(c *Config) { c.Prefetch = 256 })
	cons := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	wc := cons.Watch(ctx, "/q/order/c/only")
	const producers, each = 4, 2500
	errs := make(chan error, producers)
	for p := range producers {
		cli := n.client(t)
		go func() {
			for i := range each {
				if _, err := cli.Put(ctx, fmt.Sprintf("/q/order/p/%d-%05d", p, i), "v"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	last := make([]int, producers)
	for i := range last {
		last[i] = -1
	}
	got := 0
	for got < producers*each {
		for _, ev := range next(t, wc, 10*time.Second) {
			k := ParseKey(string(ev.Kv.Key))
			var p, i int
			if _, err := fmt.Sscanf(k.Tail, "%d-%d", &p, &i); err != nil {
				t.Fatalf("tail %q: %v", k.Tail, err)
			}
			if i != last[p]+1 {
				t.Fatalf("producer %d: got message %d after %d", p, i, last[p])
			}
			last[p] = i
			got++
			if _, err := cons.Delete(ctx, string(ev.Kv.Key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 5*time.Second, "the queue to empty", func() bool { return n.depth("order") == 0 })
}

// TestQueue_batchProduceAcrossQueues checks that a txn of puts to three
// queues, interleaved, queues each queue's puts in their order.
func TestQueue_batchProduceAcrossQueues(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	var ops []clientv3.Op
	for i, q := range []string{"b", "a", "b", "c", "a", "b"} {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/%s/p/m%d", q, i), fmt.Sprint(i)))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"a": "m1 m4", "b": "m0 m2 m5", "c": "m3"} {
		if d, w := n.depth(q), len(strings.Fields(want)); d != w {
			t.Fatalf("queue %s: got depth %d, want %d", q, d, w)
		}
		wc := cli.Watch(ctx, "/q/"+q+"/c/x")
		var got []string
		for _, ev := range collectN(t, wc, len(strings.Fields(want)), 5*time.Second) {
			got = append(got, ParseKey(string(ev.Kv.Key)).Tail)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("queue %s: got %v, want %s", q, got, want)
		}
	}
}

// TestQueue_statusCountsHandover: messages taken for a handover stay in
// /status (as held copies, with their bytes) until the dispatcher takes
// them or they are put back; the count never dips while one is under way.
func TestQueue_statusCountsHandover(t *testing.T) {
	q := newQueue("jobs", Config{}.withDefaults().defaults())
	now := time.Now()
	q.mu.Lock()
	q.enqueueLocked([]incoming{{id: MsgID{Origin: 1, N: 1}, tail: "a", value: []byte("v1")}}, now, arrivedCopy, false)
	q.holdLocked([]incoming{
		{id: MsgID{Origin: 2, N: 1}, tail: "b", value: []byte("v2")},
		{id: MsgID{Origin: 2, N: 2}, tail: "c", value: []byte("v3")},
	})
	q.mu.Unlock()
	count := func() (int, int64) { st := q.status(); return st.Rows + st.Held, st.Bytes }
	rows, bytes := count()
	if rows != 3 || bytes != 9 {
		t.Fatalf("before: %d rows, %d bytes; want 3 and 9", rows, bytes)
	}
	msgs := q.takeAll()
	if r, b := count(); r != rows || b != bytes {
		t.Fatalf("during the handover: %d rows, %d bytes; want %d and %d", r, b, rows, bytes)
	}
	q.handedOver(msgs[:1])
	if r, b := count(); r != 2 || b != 6 {
		t.Fatalf("after the first part: %d rows, %d bytes; want 2 and 6", r, b)
	}
	q.putBack(msgs[1:], now)
	if r, b := count(); r != 2 || b != 6 {
		t.Fatalf("after the rest was put back: %d rows, %d bytes; want 2 and 6", r, b)
	}
}

// TestQueue_putBackKeepsABackupsCopiesHeld: a hand-over put back keeps
// the copies a backup read back held, with their owner and numbers, so
// that the next hand-over says whose they are; a number alone puts a
// message back into the queue.
func TestQueue_putBackKeepsABackupsCopiesHeld(t *testing.T) {
	q := newQueue("jobs", Config{}.withDefaults().defaults())
	owner := &copyOwner{member: 9, boot: "r1"}
	q.mu.Lock()
	q.holdLocked([]incoming{
		{id: MsgID{Origin: 2, N: 1}, tail: "b", value: []byte("v"), seq: 7, owner: owner},
		{id: MsgID{Origin: 2, N: 2}, tail: "c", value: []byte("v"), seq: 8},
	})
	q.mu.Unlock()
	q.putBack(q.takeAll(), time.Now())
	st := q.status()
	if st.Rows != 1 || st.Held != 1 || len(q.held) != 1 || q.held[0].owner != owner || q.held[0].seq != 7 {
		t.Fatalf("put back: %d rows, %d held (%+v); want the owned copy held, numbered 7, and the other queued", st.Rows, st.Held, q.held)
	}
	again := q.takeAll()
	if len(again) != 2 || again[1].owner != owner {
		t.Errorf("taken again: %+v, want the owned copy last, with its owner", again)
	}
}

// TestQueue_putBackBeforeLaterHolds: copies held while others were out
// for a hand-over (a put made meanwhile) stay after them when the
// hand-over fails and they come back: a producer's earlier puts were
// delivered after its later ones.
func TestQueue_putBackBeforeLaterHolds(t *testing.T) {
	q := newQueue("jobs", Config{}.withDefaults().defaults())
	hold := func(tails ...string) {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, tl := range tails {
			q.holdLocked([]incoming{{id: MsgID{Origin: 2, N: uint64(tl[0])}, tail: tl, value: []byte("v")}})
		}
	}
	hold("a", "b")
	out := q.takeAll()
	hold("c", "a") // a put held meanwhile, and a copy of one out
	q.putBack(out, time.Now())
	var got []string
	for _, in := range q.held {
		got = append(got, in.tail)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) || q.bytes != 6 || len(q.heldIDs) != 3 {
		t.Errorf("held %v (%d bytes, %d ids), want a, b, c (6 bytes, 3 ids)", got, q.bytes, len(q.heldIDs))
	}
}

// TestQueue_supersede: a run's word on what it wants kept drops the held
// copies read back from the log that were kept for it, compared by value,
// and no others: not those kept for it since this process started (a
// takeover holding the run's backup set until it may number, which may
// come just before the word); those out for a hand-over that comes back
// are dropped as they return. Once nothing is out the word is forgotten.
// The runs noted while a hand-over is out are the last few.
func TestQueue_supersede(t *testing.T) {
	q := newQueue("jobs", Config{}.withDefaults().defaults())
	r1 := &copyOwner{member: 9, boot: "r1", readBack: true}
	r2 := &copyOwner{member: 9, boot: "r2", readBack: true}
	q.mu.Lock()
	q.holdLocked([]incoming{
		{id: MsgID{Origin: 2, N: 1}, tail: "a", value: []byte("v"), seq: 7, owner: r1},
		{id: MsgID{Origin: 2, N: 2}, tail: "b", value: []byte("v"), seq: 8, owner: r2},
		{id: MsgID{Origin: 2, N: 3}, tail: "c", value: []byte("v")},
		{id: MsgID{Origin: 2, N: 4}, tail: "d", value: []byte("v"), seq: 9, owner: &copyOwner{member: 9, boot: "r1", readBack: true}},
		{id: MsgID{Origin: 2, N: 6}, tail: "t", value: []byte("v"), seq: 11, owner: &copyOwner{member: 9, boot: "r1"}}, // a takeover's
	})
	q.supersedeLocked(copyOwner{member: 9, boot: "r1"})
	q.mu.Unlock()
	if st := q.status(); st.Held != 3 || q.bytes != 6 || q.held[0].tail != "b" || q.held[1].tail != "c" || q.held[2].tail != "t" || q.heldIDs[MsgID{Origin: 2, N: 1}] {
		t.Fatalf("held %+v (%d bytes), want b, c and t", q.held, q.bytes)
	}
	if len(q.superseded) != 0 {
		t.Fatalf("noted %+v with nothing out for a hand-over, want nothing", q.superseded)
	}
	out := q.takeAll()
	q.mu.Lock()
	q.supersedeLocked(*r2) // while b is out for a hand-over
	q.mu.Unlock()
	q.putBack(out, time.Now())
	if len(q.held) != 2 || q.held[0].tail != "c" || q.held[1].tail != "t" {
		t.Fatalf("put back: %+v, want c and t", q.held)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.holdLocked([]incoming{{id: MsgID{Origin: 2, N: 5}, tail: "e", value: []byte("v"), seq: 10, owner: r2}})
	if len(q.held) != 3 {
		t.Fatalf("a copy of r2 held after its word and the hand-over: held %+v, want c, t and e", q.held)
	}
	q.handing = 1
	for i := range 2 * maxReturning {
		q.supersedeLocked(copyOwner{member: 9, boot: fmt.Sprint("later", i)})
	}
	if len(q.superseded) != maxReturning || q.superseded[maxReturning-1].boot != fmt.Sprint("later", 2*maxReturning-1) {
		t.Errorf("runs noted: %+v, want the last %d", q.superseded, maxReturning)
	}
}

// TestQueue_ackUnderConsumerKeyIsThatConsumers: a delivery acknowledged
// under a consumer's key (/q/{name}/c/{id}/{seq}/{key}) is acknowledged
// only when it is out to that consumer: with write under its own key
// alone (operations.md's consumer role), a consumer cannot drop another
// consumer's messages. The short key /q/{name}/{seq}/{key} names no
// consumer and acknowledges any.
func TestQueue_ackUnderConsumerKeyIsThatConsumers(t *testing.T) {
	n, ctx, prod, a, b := twoConsumers(t)
	cliA, cliB, wa, wb := a.cli, b.cli, a.wc, b.wc
	for i := range 4 {
		if _, err := prod.Put(ctx, fmt.Sprintf("/q/work/p/m%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	evA, evB := collectN(t, wa, 2, 5*time.Second), collectN(t, wb, 2, 5*time.Second)
	if len(evA) != 2 || len(evB) != 2 {
		t.Fatalf("split: a got %d, b got %d; want 2 each", len(evA), len(evB))
	}
	under := func(id string, ev *clientv3.Event) string {
		return strings.Replace(string(ev.Kv.Key), "/q/work/", "/q/work/c/"+id+"/", 1)
	}
	del := func(cli *clientv3.Client, key string) int64 {
		t.Helper()
		r, err := cli.Delete(ctx, key)
		if err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
		return r.Deleted
	}
	if d := del(cliA, under("a", evB[0])); d != 0 {
		t.Fatalf("a acknowledged b's %s under its own key: deleted %d, want 0", evB[0].Kv.Key, d)
	}
	if st := n.mgr.Status(); st.Queues[0].Rows != 4 {
		t.Fatalf("after a's refused ack the queue holds %d, want 4", st.Queues[0].Rows)
	}
	if d := del(cliB, under("b", evB[0])); d != 1 {
		t.Fatalf("b acknowledged its %s under its key: deleted %d, want 1", evB[0].Kv.Key, d)
	}
	if d := del(cliA, under("a", evA[0])); d != 1 {
		t.Fatalf("a acknowledged its %s under its key: deleted %d, want 1", evA[0].Kv.Key, d)
	}
	if d := del(cliA, string(evB[1].Kv.Key)); d != 1 {
		t.Fatalf("a acknowledged b's %s by the short key: deleted %d, want 1", evB[1].Kv.Key, d)
	}
}

// consumerOf is a client and its watch of a consumer key.
type consumerOf struct {
	cli *clientv3.Client
	wc  clientv3.WatchChan
}

// twoConsumers starts a node with prefetch 1000 and consumers a and b
// of queue work, each on a client of its own, and returns them once the
// queue has both, with a producer's client and a context of 20 s.
func twoConsumers(t *testing.T) (n *testNode, ctx context.Context, prod *clientv3.Client, a, b consumerOf) {
	t.Helper()
	n = startNode(t, func(c *Config) { c.Prefetch = 1000 })
	prod = n.client(t)
	ctx = testCtx(t, 20*time.Second)
	for _, c := range []struct {
		to *consumerOf
		id string
	}{{&a, "a"}, {&b, "b"}} {
		c.to.cli = n.client(t)
		c.to.wc = c.to.cli.Watch(ctx, "/q/work/c/"+c.id)
	}
	waitUntil(t, 5*time.Second, "two consumers", func() bool {
		st := n.mgr.Status()
		return len(st.Queues) == 1 && st.Queues[0].Consumers == 2
	})
	return n, ctx, prod, a, b
}

// TestConsumerWatch_noPutIsNoConsumer: etcd never sends a PUT event to a
// watch made with the NOPUT filter (clientv3.WithFilterPut). Such a watch
// of a consumer key, made to see a consumer's record go, was made a
// consumer: it took the queue's messages as PUT events, from the real
// consumer, until their visibility ran out. It is the store's watch of
// the record: it sees the DELETE when the consumer leaves, and no
// message.
func TestConsumerWatch_noPutIsNoConsumer(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 20*time.Second)
	for _, k := range []string{"a", "b"} {
		if _, err := cli.Put(ctx, "/q/jobs/p/"+k, k); err != nil {
			t.Fatal(err)
		}
	}
	noput := cli.Watch(ctx, "/q/jobs/c/real", clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	if resp := <-noput; !resp.Created {
		t.Fatalf("NOPUT watch not created: %+v", resp)
	}
	rctx, leave := context.WithCancel(ctx)
	evs := next(t, cli.Watch(rctx, "/q/jobs/c/real"), 5*time.Second)
	if len(evs) != 2 || evs[0].Kv.Version != 1 || evs[1].Kv.Version != 1 {
		t.Fatalf("the consumer got %v, want both messages at their first delivery", evs)
	}
	leave()
	select {
	case resp := <-noput:
		if len(resp.Events) != 1 || resp.Events[0].Type != clientv3.EventTypeDelete || string(resp.Events[0].Kv.Key) != "/q/jobs/c/real" {
			t.Errorf("NOPUT watch of the consumer key got %v, want the DELETE of its record", resp.Events)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("NOPUT watch of the consumer key saw nothing in 5s, want the DELETE of its record")
	}
}

// TestBatchProduce_repeatedKey: a producer key's {key} names a message,
// not unique (docs/queues.md), and a txn of puts to producer keys is a
// batch produce: two messages under one key in one txn (a ClickHouse
// producer whose rows all go under one key) are both queued, in order.
// The txn was refused as etcd refuses a txn putting one key twice.
func TestBatchProduce_repeatedKey(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/q/jobs/p/row", "1"), clientv3.OpPut("/q/jobs/p/row", "2")).Commit(); err != nil {
		t.Fatalf("batch of two messages under one key: %v", err)
	}
	evs := collectN(t, cli.Watch(ctx, "/q/jobs/c/w"), 2, 5*time.Second)
	if string(evs[0].Kv.Value) != "1" || string(evs[1].Kv.Value) != "2" || string(evs[0].Kv.Key) == string(evs[1].Kv.Key) {
		t.Errorf("got %s=%s and %s=%s, want 1 then 2 under two delivery keys", evs[0].Kv.Key, evs[0].Kv.Value, evs[1].Kv.Key, evs[1].Kv.Value)
	}
	// A plain key put twice in one txn is still refused, as in etcd.
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("k", "1"), clientv3.OpPut("k", "2")).Commit(); !errors.Is(err, rpctypes.ErrDuplicateKey) {
		t.Errorf("a txn putting k twice: %v, want %v", err, rpctypes.ErrDuplicateKey)
	}
}
