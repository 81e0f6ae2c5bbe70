package dispatch

import (
	"context"
	"errors"
	"slices"
	"time"

	"chute/gossip"
	"chute/internal/backoff"
	"chute/sink"
)

// Handoff hands every queue this member dispatches to another alive
// member before it leaves (SIGTERM): the queue's backup when it has one
// (it holds copies already), else the next alive member in member-id
// order. The record is rewritten first (the next epoch), so producers
// forward to the new dispatcher; the drainer finishes its insert in
// flight, and the messages follow in order, numbers kept. Copies held for
// an unreachable dispatcher go to the queue's dispatcher. It returns when
// everything is handed over or ctx ends.
//
// What nobody could take (a member alone, the others gone) stays here:
// the drainers of ClickHouse queues then insert what they hold at once,
// without waiting for their batch interval, until ctx ends (flushLeft).
// The rest stays in the queue log for the next start (Shutdown logs it
// per queue); without a data dir it is lost with the process, and the
// error says so.
func (m *Manager) Handoff(ctx context.Context) error {
	if m.records == nil {
		return nil
	}
	m.departing.Store(true)
	if l, ok := m.cluster.(interface{ MarkLeaving() error }); ok {
		// Dispatchers whose backup this member is choose another now,
		// give it a full copy and RESET this one (awaitBackupResets).
		if err := l.MarkLeaving(); err != nil {
			m.log.Warn("leaving not published: dispatchers keep this member as their backup until it is gone", "err", err)
		}
	}
	var errs []error
	if m.cluster != nil {
		// Claims from now on name another member (claimant); a second
		// pass hands over what a claim made before that took meanwhile.
		for pass := 0; pass < 2 && (pass == 0 || ctx.Err() == nil); pass++ {
			for _, q := range m.snapshot() {
				if err := m.handoffQueue(ctx, q); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	m.flushLeft(ctx)
	m.awaitBackupResets(ctx)
	m.dropBackups()
	return errors.Join(errs...)
}

// backupResetWait bounds how long a leaving member waits for the
// dispatchers it is the backup of to have another backup.
const backupResetWait = 5 * time.Second

// awaitBackupResets waits, at most backupResetWait or until ctx ends,
// until no alive dispatcher keeps copies here: each, seeing this member
// leaving, gives another member a full copy of its queue, then RESETs
// this one (resetStale). Dropped before that, the copies of what those
// dispatchers acknowledged would be on their own disks alone until then.
func (m *Manager) awaitBackupResets(ctx context.Context) {
	held := func() bool { return len(m.aliveDispatchersBackups()) > 0 }
	if !held() {
		return
	}
	deadline := time.NewTimer(backupResetWait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for held() {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			m.log.Warn("dispatchers still keep copies here; dropping them", "waited", backupResetWait)
			return
		case <-tick.C:
		}
	}
}

// aliveDispatchersBackups returns the keys of the backup copies kept for
// dispatchers that are alive.
func (m *Manager) aliveDispatchersBackups() []backupKey {
	keys := m.backupKeys()
	return slices.DeleteFunc(keys, func(k backupKey) bool {
		return !m.alive(k.dispatcher) // asked outside backupMu, which is taken alone
	})
}

// dropBackups releases the backup copies kept for dispatchers that are
// alive: they hold the messages on their own disks and give a full copy
// to their next backup. Kept in the queue log, such copies would come
// back at this member's next start as copies of messages acknowledged
// long before. Copies of a dispatcher that is gone stay.
func (m *Manager) dropBackups() {
	for _, k := range m.aliveDispatchersBackups() {
		m.backupMu.Lock()
		if set := m.backups[k]; set != nil {
			set.releaseAll(m)
			delete(m.backups, k)
		}
		m.backupMu.Unlock()
	}
}

// flushLeft tells the drainers to insert without waiting for their batch
// interval, and waits until the ClickHouse queues left here are empty or
// ctx ends. Failed inserts are still retried after their backoff, but
// with a queue log it does not wait for a queue whose inserts are
// failing (every ClickHouse server down, a config error): its rows stay
// on disk for the next start, and a member that cannot reach ClickHouse
// stops at once rather than after ctx's whole time.
func (m *Manager) flushLeft(ctx context.Context) {
	m.flushOnce.Do(func() { close(m.flushing) })
	for _, q := range m.snapshot() {
		if _, ch := sink.TableOf(q.name); !ch {
			continue
		}
		m.mu.RLock()
		d := m.drainers[q.name]
		m.mu.RUnlock()
		if d == nil {
			continue
		}
		d.wake()
		for q.holding() {
			if m.qlog != nil && d.failing.Load() {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-d.done: // stopped: it inserts no more
			case <-m.clock.After(10 * time.Millisecond):
				continue
			}
			break
		}
	}
}

// handoffQueue hands one queue over, retrying until ctx ends. When the
// members it could go to leave meanwhile, the queue stays here as with a
// member alone.
func (m *Manager) handoffQueue(ctx context.Context, q *queue) error {
	b := backoff.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	for {
		to, ok := m.handoffTarget(ctx, q)
		if !ok {
			return nil
		}
		if !m.handoffStep(ctx, q, to) {
			return nil
		}
		select {
		case <-ctx.Done():
			if m.qlog != nil {
				return nil // kept in the queue log for the next start
			}
			return errors.New("dispatch: queue " + q.name + " not handed over before the shutdown deadline; its messages are lost")
		case <-m.clock.After(b.Next()):
		}
	}
}

// handoffStep hands q's messages to member to, unless to is 0, and reports
// whether any are still here. It holds q.handoverMu throughout: the
// reconcile loop may be handing the same messages over meanwhile, taken
// out of the queue while they travel, and put back if that fails; a
// queue that only looks empty while they travel is not handed off, and
// they would be lost when the process exits.
func (m *Manager) handoffStep(ctx context.Context, q *queue, to uint64) (holding bool) {
	q.handoverMu.Lock()
	defer q.handoverMu.Unlock()
	if !q.holding() {
		// Every message acknowledged: the backup's copies are of
		// messages gone, some of whose releases may not have left.
		m.sendDone(ctx, q, to)
		m.resetBackup(ctx, q)
		return false
	}
	// The new dispatcher refuses the messages until the record has
	// reached it (to 0: no dispatcher to give them to yet): retry.
	if to != 0 && m.handoverLocked(q, to) != nil && !m.answersPing(ctx, to) {
		// Silent since the record moved to it (frozen, cut off from
		// this member): passed over, handoffTarget moves the record on
		// rather than try it until the shutdown deadline.
		m.log.Warn("member the queue was handed to does not answer; handing it to another", "queue", q.name, "member", gossip.ID(to).String())
		m.markUnreachable(to)
	}
	return q.holding()
}

// answersPing reports whether member id answers a Ping on the peer link
// within pingTimeout (and ctx).
func (m *Manager) answersPing(ctx context.Context, id uint64) bool {
	p, ok := m.cluster.Lookup(id)
	if !ok {
		return false
	}
	_, err := m.ping(ctx, p.Addr, "")
	return err == nil
}

// peerLeaving reports whether member id is alive and leaving (MarkLeaving).
func (m *Manager) peerLeaving(id uint64) bool {
	for _, p := range m.cluster.Peers() {
		if p.ID == id {
			return p.Leaving
		}
	}
	return false
}

// handoffTarget returns the member to hand q to, 0 to wait and ask again,
// and ok false when nobody can take it. When the record names this member
// (it dispatches q, or claimed it back after the member it was handed to
// left), the record first moves to the queue's backup, else the next
// alive member, at the next epoch; so does a record naming a member
// alive by gossip that stopped answering once it was named (handoffStep
// passed it over). A record naming a member that is gone waits for the
// next dispatcher; with no other member alive, or none to move the
// record to, the queue stays here.
func (m *Manager) handoffTarget(ctx context.Context, q *queue) (to uint64, ok bool) {
	rec, found := m.record(q.name)
	silent := false // named, alive by gossip, passed over: the record moves on
	if found && rec.Member != m.cfg.MemberID && m.alive(rec.Member) {
		if !m.passedOver(rec.Member) {
			return rec.Member, true
		}
		silent = true
	}
	if len(m.cluster.Peers()) == 0 { // Handoff runs only with a cluster
		return 0, false // alone: nobody to take it
	}
	if !found || rec.Member != m.cfg.MemberID && !silent {
		return 0, true // its dispatcher is gone: wait for the next
	}
	to = q.backupMember.Load()
	usable := to != 0 && m.alive(to) && !m.passedOver(to)
	if !usable || m.peerLeaving(to) {
		// A backup that leaves too would hand it on again: another
		// member if one stays, else that one.
		if c := m.backupCandidate(); c != 0 || !usable {
			to = c
		}
	}
	if to == 0 {
		if silent {
			// No other member to move it to: the named one is all there
			// is, tried again until the deadline (a blip passes).
			return rec.Member, true
		}
		return 0, false
	}
	if !m.answersPing(ctx, to) {
		// Alive by gossip, not on the peer link (frozen, cut off from
		// this member): named in the record, it would keep the queue
		// from everyone else until the shutdown deadline left the
		// messages here. Passed over, the next round picks another.
		m.log.Warn("member to hand the queue to does not answer; trying another", "queue", q.name, "member", gossip.ID(to).String())
		m.markUnreachable(to)
		return 0, true
	}
	epoch, more := nextEpoch(rec)
	if !more {
		if silent {
			return rec.Member, true
		}
		return 0, false // the last epoch: the queue stays here
	}
	next := rec.movedTo(to, epoch)
	raw := []byte(rec.String())
	if cur := m.records.Get(RecordKey(q.name)); cur != nil {
		raw = cur
	}
	if written, err := m.writeRecord(ctx, q.name, raw, next); err != nil || !written {
		return 0, true // changed meanwhile, or not written (logged): read it again
	}
	m.log.Info("handing the queue to another member before leaving", "queue", q.name, "to", gossip.ID(to).String(), "epoch", next.Epoch)
	return to, true
}
