//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"chute/internal/testutil"
)

// TestQueue_threeNodesExactlyOnce runs 4 producers on a, 10,000 messages
// in all, each producer's puts one after another; a consumer on c, started
// once a tenth is queued (so the dispatcher moves from a to c under load),
// acknowledges each delivery. Every message arrives exactly once, each
// producer's in its order, first time; c ends as the dispatcher; every
// node's /status shows the queue empty. The throughput is logged.
func TestQueue_threeNodesExactlyOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	const name, producers, total = "orders", 4, 10000
	var want []string
	var errs errorOnce
	var put atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := range producers {
		msgs := msgNames(fmt.Sprintf("p%d", p), 0, total/producers)
		want = append(want, msgs...)
		cli := clusterClient(t, a.ClientAddr)
		wg.Go(func() {
			for _, m := range msgs {
				if err := produce(cli, "q", name, []string{m}); err != nil {
					errs.set(fmt.Errorf("producer on a: %w", err))
					return
				}
				put.Add(1)
			}
		})
	}
	testutil.Eventually(t, deliverTimeout, "a tenth of the messages queued on a", func() error {
		if n := put.Load(); n < total/10 && errs.get() == nil {
			return fmt.Errorf("%d put", n)
		}
		return nil
	})
	cons := startConsumer(t, cc, "/q/"+name+"/c/"+newUUID(), 8)
	wg.Wait()
	putsTook := time.Since(start)
	if err := errs.get(); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, deliverTimeout, want, cons)
	took := time.Since(start)
	t.Logf("%d messages, %d producers on a, consumer on c: puts took %v (%.0f/s), all acknowledged after %v: %.0f messages/s end to end",
		total, producers, putsTook.Round(time.Millisecond), total/putsTook.Seconds(), took.Round(time.Millisecond), total/took.Seconds())
	checkExactlyOnce(t, want, cons)
	checkProducerOrder(t, cons.deliveries())
	for _, d := range cons.deliveries() {
		if d.Attempt != 1 {
			t.Errorf("delivery %s: attempt %d, want 1 (nothing was redelivered)", d.Key, d.Attempt)
			break
		}
	}
	idC := memberID(t, cc)
	waitSameRecord(t, name, []*Proc{a, b, cc}, func(r queueRecord) error {
		if r.member != idC {
			return fmt.Errorf("record %q names %d, want c (%d), the consumer's node", r.raw, r.member, idC)
		}
		return nil
	})
	waitDrained(t, name, a, b, cc)
	if q := mustQueueOn(t, cc, name); q.Consumers != 1 || q.LocalConsumers != 1 {
		t.Errorf("/status of c: consumers %d, local_consumers %d; want 1, 1", q.Consumers, q.LocalConsumers)
	}
}

// TestQueue_twoConsumersShare runs two consumers of a queue, on one node or
// on two, with a producer on a: each gets at least a quarter of the
// messages and none gets a message twice. Then one consumer stops
// acknowledging and its client closes mid-stream, while the other
// acknowledges slowly: what the first held is delivered to the other,
// attempt 2, the other gets no message twice, each of its acknowledgements
// deletes (deleted=1), and in the end every message is acknowledged
// exactly once. With consumers on b and c, b's claims the
// queue; either the consumer on c leaves, or the one on b (the dispatcher's
// node) does.
func TestQueue_twoConsumersShare(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	all := []*Proc{a, b, cc}
	for _, tc := range []struct {
		name   string
		on     [2]*Proc
		leaver int
	}{
		{"sameNode", [2]*Proc{b, b}, 1},
		{"twoNodes", [2]*Proc{b, cc}, 1},
		{"twoNodes_dispatcherNodeLeaves", [2]*Proc{b, cc}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			shareQueue(t, strings.ToLower(tc.name), a, tc.on, tc.leaver, all)
		})
	}
}

// Messages of shareQueue: shared by two acknowledging consumers, then
// while one of them leaves.
const (
	sharedMsgs  = 200
	leavingMsgs = 300
	leaverHolds = 20 // what the leaving consumer holds before it leaves, at least
	slowAck     = 20 * time.Millisecond
)

func shareQueue(t *testing.T, name string, producer *Proc, on [2]*Proc, leaver int, all []*Proc) {
	// The second consumer starts once the first one's node claimed the
	// queue: its claim is made after the watch is created, and the second
	// node would otherwise claim first as often as not on a busy machine.
	cs := []*queueConsumer{startConsumer(t, on[0], "/q/"+name+"/c/"+newUUID(), 4)}
	disp := on[0]
	idDisp := memberID(t, disp)
	waitSameRecord(t, name, all, func(r queueRecord) error {
		if r.member != idDisp {
			return fmt.Errorf("record %q names %d, want %s (%d), the first consumer's node", r.raw, r.member, disp.Name, idDisp)
		}
		return nil
	})
	cs = append(cs, startConsumer(t, on[1], "/queue/"+name+"/consumer/"+newUUID(), 4))
	testutil.Eventually(t, watchTimeout, "both consumers on the dispatcher "+disp.Name, func() error {
		q, _, err := queueOn(disp, name)
		if err == nil && q.Consumers != 2 {
			err = fmt.Errorf("consumers %d, want 2", q.Consumers)
		}
		return err
	})
	cli := clusterClient(t, producer.ClientAddr)
	shared := msgNames("s", 0, sharedMsgs)
	if err := produce(cli, "q", name, shared); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, deliverTimeout, shared, cs...)
	for _, c := range cs {
		if n := len(c.deliveries()); n < sharedMsgs/4 {
			t.Errorf("%s got %d of %d messages, want at least a quarter", c.name, n, sharedMsgs)
		}
	}
	checkExactlyOnce(t, shared, cs...)

	// The leaver holds what it gets, then its client closes while the
	// producer still puts.
	leaving, other := cs[leaver], cs[1-leaver]
	leaving.hold(t)
	// The other consumer acknowledges slowly, so that it holds
	// deliveries when the first leaves.
	other.ackDelay.Store(int64(slowAck))
	rest := msgNames("s", sharedMsgs, sharedMsgs+leavingMsgs)
	produced := make(chan error, 1)
	go func() {
		for _, m := range rest {
			if err := produce(cli, "q", name, []string{m}); err != nil {
				produced <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		produced <- nil
	}()
	testutil.Eventually(t, deliverTimeout, leaving.name+" holding messages", func() error {
		if n := len(leaving.heldDeliveries()); n < leaverHolds {
			return fmt.Errorf("holds %d, want %d", n, leaverHolds)
		}
		return nil
	})
	leaving.disconnect()
	held := leaving.heldDeliveries()
	select {
	case err := <-produced:
		t.Logf("the producer had finished when %s left", leaving.name)
		produced <- err
	default:
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	want := append(shared, rest...)
	if err := ackedWithin(deliverTimeout, want, cs...); err != nil {
		t.Fatalf("after %s left: %v%s", leaving.name, err, queueStates(name, all...))
	}
	checkExactlyOnce(t, want, cs...)
	got := make(map[string][]int64) // message → attempts of the other's deliveries
	for _, d := range other.deliveries() {
		got[d.Msg] = append(got[d.Msg], d.Attempt)
	}
	var wrong []string
	for _, d := range held {
		if a := got[d.Msg]; !slices.Equal(a, []int64{2}) {
			wrong = append(wrong, fmt.Sprintf("%s %v", d.Msg, a))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d of the %d messages %s held when it left reached %s with other attempts than [2], first: %v",
			len(wrong), len(held), leaving.name, other.name, wrong[:min(5, len(wrong))])
	}
	t.Logf("%s held %d messages when it left; %s got %d messages in all", leaving.name, len(held), other.name, len(other.deliveries()))
	waitDrained(t, name, all...)
	if on[leaver] == disp && on[1-leaver] != disp {
		// The dispatcher's node hosts no consumer any more, but it stays
		// the dispatcher: a consumer's node claims only when its consumer
		// registers (dispatch/reconcile.go), so messages in flight to the
		// other consumer are not handed over and delivered twice.
		waitSameRecord(t, name, all, func(r queueRecord) error {
			if r.member != idDisp || r.epoch != 1 {
				return fmt.Errorf("record %q, want %s (%d) with epoch 1", r.raw, disp.Name, idDisp)
			}
			return nil
		})
	}
}

// putResult is one put of TestQueue_dispatcherKilled's producers.
type putResult struct {
	msg        string
	start, end time.Time
	err        error
}

// Bounds of TestQueue_dispatcherKilled.
const (
	failoverPutTimeout = 3 * time.Second // one put
	failoverWindow     = 5 * time.Second // puts may fail only this long after the kill
	failoverPace       = 5 * time.Millisecond
)

// TestQueue_dispatcherKilled makes a dispatcher (its first put) and
// kills it with SIGKILL while two producers on b and two on c put,
// one put after another. Puts may fail only with a retryable code
// (Unavailable, DeadlineExceeded), and only within failoverWindow of the
// kill; b and c then agree on a record naming one of them with the next
// epoch. A consumer on b then gets every message put after the kill
// exactly once. Messages put before the kill were in a's memory only: how
// many are lost is logged, not asserted.
func TestQueue_dispatcherKilled(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	const name = "failover"
	idA := memberID(t, a)
	if err := produce(clusterClient(t, a.ClientAddr), "q", name, []string{"a-00000"}); err != nil {
		t.Fatal(err)
	}
	before := waitSameRecord(t, name, []*Proc{a, b, cc}, func(r queueRecord) error {
		if r.member != idA {
			return fmt.Errorf("record %q names %d, want a (%d), the first producer's node", r.raw, r.member, idA)
		}
		return nil
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	producers := []string{"b0", "b1", "c0", "c1"}
	results := make([][]putResult, len(producers))
	var okAfter [4]atomic.Int64 // successful puts started after the record moved
	var moved atomic.Int64      // unix nanoseconds when b and c agreed on the new record
	for i, prod := range producers {
		node := b
		if prod[0] == 'c' {
			node = cc
		}
		cli := clusterClient(t, node.ClientAddr)
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				m := msgName(prod, n)
				r := putResult{msg: m, start: time.Now()}
				ctx, cancel := context.WithTimeout(context.Background(), failoverPutTimeout)
				_, r.err = cli.Put(ctx, "/q/"+name+"/p/"+m, m)
				cancel()
				r.end = time.Now()
				results[i] = append(results[i], r)
				if at := moved.Load(); r.err == nil && at != 0 && r.start.UnixNano() > at {
					okAfter[i].Add(1)
				}
				time.Sleep(failoverPace)
			}
		})
	}
	stopProducers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	t.Cleanup(stopProducers)
	testutil.Eventually(t, deliverTimeout, "a dispatching the producers' messages", func() error {
		q, _, err := queueOn(a, name)
		if err == nil && q.Stats.Enqueued < 200 {
			err = fmt.Errorf("enqueued %d, want 200", q.Stats.Enqueued)
		}
		return err
	})

	killAt := time.Now()
	a.Kill()
	killed := time.Now()
	after := waitSameRecord(t, name, []*Proc{b, cc}, func(r queueRecord) error {
		if r.member == idA || r.epoch != before.epoch+1 {
			return fmt.Errorf("record %q, want another member than a (%d) with epoch %d", r.raw, idA, before.epoch+1)
		}
		return nil
	})
	moved.Store(time.Now().UnixNano())
	movedAfter := time.Since(killAt)
	testutil.Eventually(t, deliverTimeout, "puts through the new dispatcher", func() error {
		for i := range okAfter {
			if n := okAfter[i].Load(); n < 50 {
				return fmt.Errorf("producer %s: %d puts since the record moved", producers[i], n)
			}
		}
		return nil
	})
	stopProducers()

	// Puts: only retryable failures, none late; latencies after the kill.
	var mustArrive, putBefore, failed []string
	var lats []time.Duration
	var lastFailure time.Duration
	for _, rs := range results {
		for _, r := range rs {
			if r.start.After(killAt) {
				lats = append(lats, r.end.Sub(r.start))
			}
			switch {
			case r.err != nil:
				failed = append(failed, r.msg)
				code := grpcCode(r.err)
				if code != codes.Unavailable && code != codes.DeadlineExceeded {
					t.Errorf("put %s (%v after the kill): %v (%v), want only Unavailable or DeadlineExceeded", r.msg, r.start.Sub(killAt), code, r.err)
				}
				if d := r.end.Sub(killAt); d > lastFailure {
					lastFailure = d
				}
				if r.start.Sub(killAt) > failoverWindow {
					t.Errorf("put %s failed %v after the kill: %v; want no failure later than %v", r.msg, r.start.Sub(killAt), r.err, failoverWindow)
				}
			case r.start.After(killed):
				mustArrive = append(mustArrive, r.msg)
			default:
				putBefore = append(putBefore, r.msg)
			}
		}
	}
	failures := "no put failed"
	if len(failed) > 0 {
		failures = fmt.Sprintf("%d puts failed, the last ending %v after the kill", len(failed), lastFailure.Round(time.Millisecond))
	}
	t.Logf("kill -9 of the dispatcher a: b and c agree on %q (was %q) %v after the kill; %s; put latency after the kill: %v",
		after.raw, before.raw, movedAfter.Round(time.Millisecond), failures, statsOf(lats))

	cons := startConsumer(t, b, "/q/"+name+"/c/"+newUUID(), 8)
	waitAcked(t, deliverTimeout, mustArrive, cons)
	waitDrained(t, name, b, cc)
	if err := errors.Join(cons.firstErr(), cons.lostAcks()); err != nil {
		t.Error(err)
	}
	acked := cons.ackedMsgs()
	seen := make(map[string]int)
	for _, d := range cons.deliveries() {
		seen[d.Msg]++
	}
	for m, n := range seen {
		if n != 1 || acked[m] != 1 {
			t.Errorf("message %s: delivered %d times, acknowledged %d times; want once", m, n, acked[m])
		}
	}
	lost := 0
	for _, m := range append(putBefore, "a-00000") {
		if seen[m] == 0 {
			lost++
		}
	}
	failedArrived := 0
	for _, m := range failed {
		if seen[m] > 0 {
			failedArrived++
		}
	}
	t.Logf("%d messages put after the kill, all delivered; of %d put before it (held by a alone) %d were lost; %d of %d failed puts were delivered anyway",
		len(mustArrive), len(putBefore)+1, lost, failedArrived, len(failed))
}

// TestQueue_concurrentFirstPuts starts 8 producers on a and 8 on c at once
// on a new queue: the claims race, and every node ends with one identical
// dispatcher record naming a or c. A consumer on b then gets every message
// exactly once, each producer's in its order.
func TestQueue_concurrentFirstPuts(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	const name, perNode, each = "race", 8, 40
	var want []string
	var errs errorOnce
	var wg sync.WaitGroup
	startLine := make(chan struct{})
	for _, p := range []*Proc{a, cc} {
		cli := clusterClient(t, p.ClientAddr)
		for g := range perNode {
			msgs := msgNames(fmt.Sprintf("%s%d", p.Name, g), 0, each)
			want = append(want, msgs...)
			wg.Go(func() {
				<-startLine
				if err := produce(cli, "q", name, msgs); err != nil {
					errs.set(fmt.Errorf("producer on %s: %w", p.Name, err))
				}
			})
		}
	}
	close(startLine)
	wg.Wait()
	if err := errs.get(); err != nil {
		t.Fatal(err)
	}
	idA, idC := memberID(t, a), memberID(t, cc)
	rec := waitSameRecord(t, name, []*Proc{a, b, cc}, func(r queueRecord) error {
		if r.member != idA && r.member != idC {
			return fmt.Errorf("record %q names %d, want a (%d) or c (%d)", r.raw, r.member, idA, idC)
		}
		return nil
	})
	t.Logf("a and c raced to claim %s: the record is %q (a is %d, c is %d)", name, rec.raw, idA, idC)

	cons := startConsumer(t, b, "/q/"+name+"/c/"+newUUID(), 8)
	waitAcked(t, deliverTimeout, want, cons)
	checkExactlyOnce(t, want, cons)
	checkProducerOrder(t, cons.deliveries())
	waitDrained(t, name, a, b, cc)
}
