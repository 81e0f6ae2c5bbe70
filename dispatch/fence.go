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
// the next. The reads run on a goroutine of their own, which makes the
// next read when one ends, if one was asked for, and then ends.
type fences struct {
	mu      sync.Mutex
	running *fenceRead // nil: no read goroutine
	next    *fenceRead // starts when running ends; nil: none asked
}

// fenceRead is one read of fences.
type fenceRead struct {
	done chan struct{} // closed when ok is set
	ok   bool          // the key space caught up with the cluster's
}

// caughtUp reports whether this member's key space holds every write
// the cluster committed before the call (RecordStore.Linearize), trying
// for up to fenceTimeout: a member frozen while it led learns the new
// leader meanwhile. False when stop closes first (the caller stops: the
// read goes on for the others).
func (m *Manager) caughtUp(stop <-chan struct{}) bool {
	f := &m.fences
	f.mu.Lock()
	var r *fenceRead
	if f.running == nil {
		r = &fenceRead{done: make(chan struct{})}
		f.running = r
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.runFences(r)
		}()
	} else {
		if f.next == nil {
			f.next = &fenceRead{done: make(chan struct{})}
		}
		r = f.next
	}
	f.mu.Unlock()
	select {
	case <-r.done:
		return r.ok
	case <-stop:
		return false
	}
}

// runFences makes read r, then the next one asked for meanwhile, and so
// on until none was.
func (m *Manager) runFences(r *fenceRead) {
	f := &m.fences
	for r != nil {
		r.ok = m.readFence()
		close(r.done)
		f.mu.Lock()
		r = f.next
		f.running, f.next = r, nil
		f.mu.Unlock()
	}
}

// readFence is one read of fences: Linearize, tried again for up to
// fenceTimeout while it fails.
func (m *Manager) readFence() bool {
	ctx, cancel := context.WithTimeout(context.Background(), fenceTimeout)
	defer cancel()
	b := backoff.Backoff{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	for {
		if m.records.Linearize(ctx) == nil {
			return true
		}
		t := time.NewTimer(b.Next()) // not Config.Clock: ctx's deadline is real time too
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
		case <-m.stop:
		}
		t.Stop()
		return false
	}
}

// fenced reports whether another member dispatches the queue now, as a
// read of the cluster's key space shows (see fences): false when it
// cannot tell.
func (d *drainer) fenced() bool {
	if d.m.cluster == nil || !d.m.caughtUp(d.stop) {
		return false
	}
	rec, elsewhere := d.dispatchedElsewhere()
	if elsewhere {
		d.m.log.Warn("another member dispatches the queue; a batch goes to it instead of into ClickHouse from here", "queue", d.q.name,
			"dispatcher", gossip.ID(rec.Member).String(), "epoch", rec.Epoch)
	}
	return elsewhere
}

// dispatchedElsewhere reports whether this member's key space names
// another member as the queue's dispatcher, in rec: a fence saw it (or
// the reconcile loop will), and the drainer starts no batch until it
// stops.
func (d *drainer) dispatchedElsewhere() (rec Record, elsewhere bool) {
	if d.m.cluster == nil {
		return Record{}, false
	}
	rec, ok := d.m.record(d.q.name)
	return rec, ok && rec.Member != d.m.cfg.MemberID
}
