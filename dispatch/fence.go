package dispatch

import (
	"context"
	"sync"
	"time"

	"chute/gossip"
	"chute/internal/backoff"
)

// A drainer's fence: before each attempt of a batch the drainer asks the
// cluster's key space whether another member dispatches the queue now,
// and gives the batch up if one does (drainer.fenced). A member frozen
// (SIGSTOP, a long pause) or whose key space lags would otherwise go on
// inserting, at its timers' first tick, rows the member that took the
// queue over inserts too, until its reconcile loop saw the new record.
//
// It is a fence as far as a read can be one: an insert already sent
// lands, and a pause between the read and the request is not covered.
// When the cluster cannot be asked (no leader, cut off from a majority)
// the batch goes: the member may hold the only copy of its rows, and a
// minority side that stopped inserting would block them for as long as
// the partition lasts. Only a read that shows another member stops it.

// fenceTimeout bounds a fence's read: how long an attempt waits to learn
// whether another member took its queue over before it goes anyway.
const fenceTimeout = time.Second

// fences coalesces the drainers' reads: an attempt needs a read that
// started after it asked, and those that ask while one is running share
// the next.
type fences struct {
	mu      sync.Mutex
	running *fenceRead // nil: none
	next    *fenceRead // starts when running ends; nil: none asked
}

// fenceRead is one read of fences.
type fenceRead struct {
	done    chan struct{} // closed when ok is set
	ok      bool          // the key space caught up with the cluster's
	started bool          // guarded by fences.mu
}

// caughtUp reports whether this member's key space holds every write
// the cluster committed before the call (RecordStore.Linearize), trying
// for up to fenceTimeout: a member frozen while it led learns the new
// leader meanwhile.
func (m *Manager) caughtUp() bool {
	f := &m.fences
	f.mu.Lock()
	if f.running == nil {
		r := &fenceRead{done: make(chan struct{}), started: true}
		f.running = r
		f.mu.Unlock()
		return m.runFence(r)
	}
	if f.next == nil {
		f.next = &fenceRead{done: make(chan struct{})}
	}
	r, cur := f.next, f.running
	f.mu.Unlock()
	<-cur.done // runFence made r the running read, not started
	f.mu.Lock()
	if f.running == r && !r.started {
		r.started = true
		f.mu.Unlock()
		return m.runFence(r)
	}
	f.mu.Unlock()
	<-r.done
	return r.ok
}

// runFence makes read r, then hands the running place to the next read,
// which one of its callers starts.
func (m *Manager) runFence(r *fenceRead) bool {
	ctx, cancel := context.WithTimeout(context.Background(), fenceTimeout)
	defer cancel()
	b := backoff.Backoff{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	for {
		if r.ok = m.records.Linearize(ctx) == nil; r.ok {
			break
		}
		t := time.NewTimer(b.Next()) // not Config.Clock: ctx's deadline is real time too
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
		case <-m.stop:
		}
		t.Stop()
		break
	}
	f := &m.fences
	f.mu.Lock()
	f.running, f.next = f.next, nil
	f.mu.Unlock()
	close(r.done)
	return r.ok
}

// fenced reports whether another member dispatches the queue now, as a
// read of the cluster's key space shows (see fences): false when it
// cannot tell.
func (d *drainer) fenced() bool {
	m := d.m
	if m.cluster == nil || !m.caughtUp() {
		return false
	}
	rec, ok := m.record(d.q.name)
	if !ok || rec.Member == m.cfg.MemberID {
		return false
	}
	m.log.Warn("another member dispatches the queue; a batch goes to it instead of into ClickHouse from here", "queue", d.q.name,
		"dispatcher", gossip.ID(rec.Member).String(), "epoch", rec.Epoch)
	return true
}

// dispatchedElsewhere reports whether this member's key space names
// another member as the queue's dispatcher: a fence saw it (or the
// reconcile loop will), and the drainer starts no batch until it stops.
func (d *drainer) dispatchedElsewhere() bool {
	if d.m.cluster == nil {
		return false
	}
	rec, ok := d.m.record(d.q.name)
	return ok && rec.Member != d.m.cfg.MemberID
}
