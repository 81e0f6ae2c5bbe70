package dispatch

import (
	"context"
	"errors"
	"time"
)

// Handoff hands every queue this member dispatches to another alive
// member before it leaves (SIGTERM): the queue's backup when it has one
// (it holds copies already), else the next alive member in member-id
// order. The record is rewritten first (the next epoch), so producers
// forward to the new dispatcher; the drainer finishes its insert in
// flight, and the messages follow in order, numbers kept. Copies held for
// an unreachable dispatcher go to the queue's dispatcher. It returns when
// everything is handed over or ctx ends; what is left is lost with the
// process, and the error says so.
func (m *Manager) Handoff(ctx context.Context) error {
	if m.records == nil || m.cluster == nil {
		return nil
	}
	var errs []error
	for _, q := range m.snapshot() {
		if err := m.handoffQueue(ctx, q); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// handoffQueue hands one queue over, retrying until ctx ends.
func (m *Manager) handoffQueue(ctx context.Context, q *queue) error {
	rec, ok := m.record(q.name)
	if ok && rec.Member == m.cfg.MemberID {
		to := q.backupMember.Load()
		if to == 0 || !m.alive(to) {
			to = m.backupCandidate()
		}
		if to == 0 {
			return nil // alone: nobody to take it
		}
		next := Record{Member: to, Epoch: rec.Epoch + 1}
		raw := []byte(rec.String())
		if cur := m.records.Get(RecordKey(q.name)); cur != nil {
			raw = cur
		}
		if !m.records.CompareAndPut(RecordKey(q.name), raw, []byte(next.String())) {
			return nil // changed meanwhile: the reconcile rules apply
		}
		m.log.Info("handing the queue to another member before leaving", "queue", q.name, "to", formatMember(to), "epoch", next.Epoch)
		rec = next
	}
	if !q.holding() {
		return nil
	}
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		// The new dispatcher refuses the messages until the record has
		// reached it: retry.
		if err := m.handover(q, rec.Member); err == nil && !q.holding() {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("dispatch: queue " + q.name + " not handed over before the shutdown deadline; its messages are lost")
		case <-time.After(delay):
		}
		if r, ok := m.record(q.name); ok && m.alive(r.Member) && r.Member != m.cfg.MemberID {
			rec = r
		}
	}
}
