package dispatch

import (
	"context"
	"time"
)

// A member forgets a queue that holds nothing and has not been used for
// forgetAfter: its state (a queue, 2 to 3 KiB), its cache entries and, when
// it dispatches the queue, its record /q/{name}. Queue names come from
// clients, one per request with request/reply: without this, every name
// ever put to stayed in memory on every member, and in the key space, and
// each reconcile round walked them all. The next put to the name claims
// the queue again, at epoch 1.
//
// What is forgotten is only what an empty queue keeps: its counters
// (/status), the ids acknowledged recently (a copy of one arriving later
// is delivered again, at least once), and the numbers given: the queue
// numbers from 1 again, so an acknowledgement sent more than forgetAfter
// after the queue was last used, of a message with the same key, removes
// the new message with its number.
//
// A queue is never forgotten while it has messages, held copies, a
// handover, consumers (here or on a consumer's member), a drainer, puts
// waiting, a backup or copies on other members to reset. Who looked a
// queue up before it was forgotten and adds to it takes the queue that
// replaced it (lockCurrent).

// forgetAfter is how long a queue holding nothing stays unused before
// the member forgets it: far longer than any call takes between looking
// a queue up and adding to it, and than acknowledgements and copies take
// to arrive.
const forgetAfter = time.Minute

// forgetDeletes bounds the records one reconcile round deletes, each a
// write of the key space, so that a round stays short when many queues
// go idle at once; the others wait for the next rounds.
const forgetDeletes = 256

// forgetIdle forgets the queues of qs unused for forgetAfter that hold
// nothing, and, every forgetAfter, the puts counter's series of queues
// this member does not hold that no put counted in since the last time
// (putCounts.sweep). The reconcile loop's alone.
func (m *Manager) forgetIdle(qs []*queue) {
	if at := m.clock.Now(); at.Sub(m.putsSweptAt) >= forgetAfter {
		m.putsSweptAt = at
		m.inserts.puts.sweep(func(name string) bool {
			m.mu.RLock()
			defer m.mu.RUnlock()
			return m.queues[name] != nil // not lookup, which counts a use
		})
	}
	now := m.tick.Load()
	deletes := forgetDeletes
	if !m.records.Writable() {
		deletes = 0 // each would wait out its timeout
	}
	for _, q := range qs {
		if seen := q.lastUse.Load(); now-seen >= int64(forgetAfter) {
			if !m.forget(q, seen, &deletes) {
				return // the key space refused a write: next round
			}
		}
	}
}

// forget forgets q, last used at seen, if it holds nothing and nothing
// used it since: first its record, when it names this member and no more
// and *deletes allows one more, then the queue. A record not deleted keeps
// the queue for a later round; a put that comes between the two claims
// the queue again (or finds it here, if it came first), and the queue
// is kept. It reports false when deleting the record failed.
func (m *Manager) forget(q *queue, seen int64, deletes *int) bool {
	q.mu.Lock()
	idle := q.idleLocked()
	q.mu.Unlock()
	if !idle {
		return true
	}
	if raw := m.records.Get(q.recordKey); raw != nil {
		// A record that does not parse, or says more than who dispatches
		// (pinned, reply_to), was written by hand: kept.
		if rec, ok := ParseRecord(string(raw)); ok && rec.Member == m.cfg.MemberID && !rec.Pinned && rec.ReplyTo == "" {
			if *deletes == 0 {
				return true
			}
			*deletes--
			ctx, cancel := context.WithTimeout(context.Background(), recordWriteTimeout)
			deleted, err := m.records.CompareAndDelete(ctx, q.recordKey, raw)
			cancel()
			if err != nil {
				m.log.Debug("record of an idle queue not deleted", "queue", q.name, "err", err)
				return false
			}
			if !deleted {
				return true // claimed meanwhile
			}
		}
	}
	if m.drop(q, seen) {
		m.views.forget(q.name)
		m.settings.forget(q.name)
		m.inserts.puts.drop(q.name)
		m.log.Debug("idle queue forgotten", "queue", q.name)
	}
	return true
}

// drop takes q out of the member's queues if nothing used it since seen
// and it still holds nothing, and reports whether it did. It holds mu
// throughout, so no lookup finds q meanwhile, and tries the queue's locks
// rather than waits for them: a queue in use is kept.
func (m *Manager) drop(q *queue, seen int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.queues[q.name] != q || q.lastUse.Load() != seen || m.drainers[q.name] != nil {
		return false
	}
	for lc := range m.locals {
		if lc.queue == q.name {
			return false // bound, or about to be
		}
	}
	if !q.handoverMu.TryLock() {
		return false
	}
	defer q.handoverMu.Unlock()
	if !q.mu.TryLock() {
		return false
	}
	defer q.mu.Unlock()
	if !q.idleLocked() {
		return false
	}
	q.forgotten = true
	q.dropGoneTriedLocked() // idle, it holds no row: every mark goes
	delete(m.queues, q.name)
	m.sorted = nil
	// Its next queue numbers from nothing: under a record kept (pinned,
	// reply_to, a delete that failed) it claims the next epoch first
	// (mayNumber). And the map stays as small as the queues.
	m.entered.Delete(q.name)
	m.failedOver.Delete(q.name)
	return true
}

// quiet reports whether q has nothing a reconcile round must do at once:
// it holds nothing (holdsNothingLocked), waits for no member it came
// from, and is not replicated (the round gives a new backup its full
// copy). Unlike idleLocked, consumers may be attached: with no message
// there is nothing to deliver to them.
func (q *queue) quiet() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.awaiting) == 0 && q.set.Ack != AckReplicated && q.holdsNothingLocked()
}

// idleLocked reports whether q holds nothing and has no consumer. A put
// waiting for room (freed) may wait on a forgotten queue: the
// dispatcher of a full queue is often another member, whose frees never
// close freed here, and the put asks again after each step
// (waitForRoom). Nor do renamed numbers keep it: they name messages of
// the queue, and it has none left. The caller holds mu.
func (q *queue) idleLocked() bool {
	return len(q.consumers) == 0 && q.holdsNothingLocked()
}

// holdsNothingLocked reports whether q holds no message, copy or
// hand-over, no put waiting for its rows, backup, release to send or
// member to reset (one being reset counts, as does a stale set another
// goroutine holds). The caller holds mu.
func (q *queue) holdsNothingLocked() bool {
	if q.msgs.len() != 0 || len(q.held) != 0 || q.handing != 0 || q.bytes != 0 ||
		len(q.out) != 0 || len(q.parked) != 0 || len(q.waiters) != 0 ||
		len(q.released) != 0 || q.backupMember.Load() != 0 {
		return false
	}
	if !q.staleMu.TryLock() {
		return false
	}
	defer q.staleMu.Unlock()
	return len(q.stale) == 0
}
