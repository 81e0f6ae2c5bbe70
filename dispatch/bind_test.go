package dispatch

import "testing"

// TestBind_stoppedBeforeAttached: a consumer watch cancelled after bind
// published its binding and before it registered the consumer leaves no
// consumer behind. The stop found nothing to remove, and the consumer
// then registered stayed with no watch, taking its share of the queue.
func TestBind_stoppedBeforeAttached(t *testing.T) {
	n := startNode(t, nil)
	putWork(t, n, 4, 10)
	m := n.mgr
	q := m.queueFor("work")
	lc := &localConsumer{m: m, queue: "work", c: &consumer{id: "x", prefix: "q", out: &fakeStallable{}, unacked: make(map[uint64]*message)}}
	m.mu.Lock()
	m.locals[lc] = struct{}{}
	lc.attached = q // what bind publishes before it registers the consumer
	delete(m.locals, lc)
	m.mu.Unlock()
	lc.stop() // the watch cancelled in between
	m.attachHere(lc, q, Record{Member: m.cfg.MemberID, Epoch: 1})
	if got := workStatus(n); got.Consumers != 0 || got.Unacked != 0 {
		t.Fatalf("after a stop in the window: %d consumers, %d unacked; want none", got.Consumers, got.Unacked)
	}
}
