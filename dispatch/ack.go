package dispatch

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer/peerpb"
)

// When a put returns depends on its queue's ack mode (Settings.Ack):
//
//   - queued: once the dispatcher holds the messages.
//   - replicated: once the dispatcher's backup, the next alive member after
//     it in member-id order, holds a copy too. A new backup first gets a
//     full copy of the queue (RESET, then BACKUP frames), and the old one
//     is told to drop its copies; acknowledged and inserted messages are
//     released on the backup. A member alone has no backup: its puts
//     return as queued ones. One whose other members were all passed
//     over fails its puts until one keeps copies again.
//   - inserted: once every row of the put is in ClickHouse or stored as a
//     dead letter (the put then fails, naming the dead letters). A
//     handover ends the wait with Unavailable: the rows are on their way
//     to ClickHouse through another member, which cannot tell this one.

// putWaiter is a put waiting for its rows to settle (ack=inserted).
type putWaiter struct {
	left    int      // rows not settled yet; done is closed at 0
	refused []string // dead letter keys of its rows
	err     error    // set when the rows moved to another member
	done    chan struct{}
}

// settledLocked notes that message seq left the queue. The caller holds mu.
// A replicated queue notes the release even while it has no backup: one
// may be getting its full copy (copyTo), taken before the message left,
// and flushReleases drops what no backup needs.
func (q *queue) settledLocked(seq uint64) {
	if q.backupMember.Load() != 0 || q.set.Ack == AckReplicated {
		q.released = append(q.released, seq)
	}
	w, ok := q.waiters[seq]
	if !ok {
		return
	}
	delete(q.waiters, seq)
	if w.left--; w.left == 0 {
		close(w.done)
	}
}

// refusedLocked notes that ClickHouse refused message seq, stored at key.
// The caller holds mu.
func (q *queue) refusedLocked(seq uint64, key string) {
	if w := q.waiters[seq]; w != nil {
		w.refused = append(w.refused, key)
	}
}

// failWaitersLocked ends every wait with err. The caller holds mu.
func (q *queue) failWaitersLocked(err error) {
	for seq, w := range q.waiters {
		delete(q.waiters, seq)
		if w.left > 0 {
			w.err, w.left = err, 0
			close(w.done)
		}
	}
}

// wait blocks until the put's rows settled, ctx ends or the manager stops.
func (w *putWaiter) wait(ctx context.Context, stop <-chan struct{}) error {
	select {
	case <-w.done:
	case <-ctx.Done():
		return status.Error(codes.DeadlineExceeded, "etcdserver: request timed out before the rows were in ClickHouse; they may still land")
	case <-stop:
		return status.Error(codes.Unavailable, "dispatch: member stopping before the rows were in ClickHouse; they may still land")
	}
	switch {
	case w.err != nil:
		return w.err
	case len(w.refused) > 0:
		return status.Error(codes.InvalidArgument, "etcdserver: ClickHouse refused the row; stored as dead letter "+strings.Join(w.refused, ", "))
	}
	return nil
}

// errMovedOn ends the waits of a queue handed to another member.
var errMovedOn = status.Error(codes.Unavailable, "dispatch: the queue moved to another member before the rows were in ClickHouse; they may still land")

// ackWaitTimeout bounds how long a put waits for a backup's answer or for
// its rows to reach ClickHouse when its context has no deadline.
const ackWaitTimeout = 10 * time.Minute

// afterEnqueue returns what a put still waits for once its messages are
// queued here: nil for ack=queued. The caller holds q.mu; added are the
// messages the put queued, numbered; fresh is set for a put, unset for
// messages handed over by another member, which wait for a backup but not
// for ClickHouse.
func (m *Manager) afterEnqueueLocked(q *queue, added []incoming, fresh bool) func(context.Context) error {
	if len(added) == 0 {
		return nil
	}
	switch q.set.Ack {
	case AckInserted:
		if !fresh {
			return nil
		}
		w := &putWaiter{left: len(added), done: make(chan struct{})}
		for _, msg := range added {
			q.waiters[msg.seq] = w
		}
		return func(ctx context.Context) error { return w.wait(ctx, m.stop) }
	case AckReplicated:
		return func(ctx context.Context) error { return m.replicate(ctx, q, added) }
	}
	return nil
}

// replicate sends copies of messages to the queue's backup and waits for
// it to hold them. A backup that does not answer is passed over for a
// while and the next member takes its place (with a full copy). A put
// that gives up (ctx ends) passes nobody over. With every other member
// passed over nobody holds a copy: the put fails, as it does when no
// backup answers; only a member alone acknowledges without one.
func (m *Manager) replicate(ctx context.Context, q *queue, copies []incoming) error {
	ctx, cancel := context.WithTimeout(ctx, ackWaitTimeout)
	defer cancel()
	for range 3 {
		b, err := m.ensureBackup(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if b == 0 {
			if m.peerCount() == 0 {
				return nil // alone: nobody to hold a copy
			}
			// Every other member was passed over: none holds a copy,
			// so the put is not acknowledged as replicated.
			break
		}
		q.backupMu.RLock()
		if q.backupMember.Load() != b {
			q.backupMu.RUnlock()
			continue
		}
		// Releases not sent yet go first in the frame, so the backup
		// holds no more than the queue does, under the same byte cap.
		// Messages that left the queue meanwhile are not sent: one that
		// left before the queue had this backup noted no release for
		// it, so its copy would stay on the backup for good.
		q.mu.Lock()
		released := q.takeReleasesLocked()
		held := q.stillHeldLocked(copies)
		q.mu.Unlock()
		c, err := m.queueFrame(ctx, b, peerpb.ForwardKind_BACKUP, q.name, held, released)
		q.backupMu.RUnlock()
		if err == nil {
			if err = c.wait(ctx, forwardTimeout); err == nil {
				return nil
			}
		}
		q.unreleased(b, released) // sent again with the next frame
		if status.Code(err) == codes.ResourceExhausted {
			return err // the backup is full, as the queue would be: not its fault
		}
		if ctx.Err() != nil {
			break // the put gave up (its client went, or its deadline): not the backup's fault
		}
		m.passOver(q, b, err)
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Error(codes.Unavailable, "dispatch: no member could keep a copy of the message; it is queued on the dispatcher only; retry")
}

// markTimeout bounds the wait for the backup's answer to a batch's mark
// (markOnBackup): a batch does not wait a forward's whole timeout for a
// backup that is gone.
const markTimeout = time.Second

// markOnBackup tells the queue's backup, if it has one, that batch rows
// goes to ClickHouse now: a BACKUP frame with a copy of its first row
// carrying the batch's mark (QueueMessage.batch), answered before the
// first attempt. A backup that takes the queue over after this member is
// killed then sends the same rows as one batch first, with the same
// dedup token. The copy is one the backup holds already, so an older
// backup, which does not know the mark, drops it as a duplicate. A
// backup that does not answer within markTimeout is not waited for.
// The batch is noted in q.sent until unmarkSent, first: a new backup
// chosen meanwhile gets the mark with its full copy (copyTo), whichever
// side of it this runs.
func (m *Manager) markOnBackup(q *queue, rows []row) {
	if len(rows) == 0 {
		return
	}
	q.mu.Lock()
	if q.sent == nil {
		q.sent = make(map[uint64]int)
	}
	q.sent[rows[0].seq] = len(rows)
	q.mu.Unlock()
	q.backupMu.RLock() // after a full copy to a new backup, as copies are
	b := q.backupMember.Load()
	if b == 0 {
		q.backupMu.RUnlock()
		return
	}
	head := incoming{id: rows[0].m.id, tail: rows[0].m.tail, value: rows[0].m.value, seq: rows[0].seq, batch: len(rows)}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	c, err := m.queueFrame(ctx, b, peerpb.ForwardKind_BACKUP, q.name, []incoming{head}, nil)
	q.backupMu.RUnlock()
	if err == nil {
		err = c.wait(ctx, markTimeout)
	}
	if err != nil {
		m.log.Debug("the queue's backup did not take a batch's mark; a takeover would form the batch anew", "queue", q.name,
			"backup", gossip.ID(b).String(), "err", err)
	}
}

// unmarkSent forgets the batch whose first row is numbered first in
// q.sent: it settled, or was given up and is in q.tried.
func (q *queue) unmarkSent(first uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.sent, first)
}

// stillHeldLocked returns the messages of msgs the queue still holds
// under their numbers. The caller holds mu.
func (q *queue) stillHeldLocked(msgs []incoming) []incoming {
	held := make([]incoming, 0, len(msgs))
	for _, in := range msgs {
		if m := q.msgs.get(in.seq); m != nil && m.id == in.id {
			held = append(held, in)
		}
	}
	return held
}

// readmitProbeEvery is how often a member passed over is pinged
// (readmit), at most.
const readmitProbeEvery = time.Second

// passOver stops using member b as a backup for a while.
func (m *Manager) passOver(q *queue, b uint64, err error) {
	m.log.Warn("backup did not keep copies; choosing another", "queue", q.name, "backup", gossip.ID(b), "err", err)
	m.markUnreachable(b)
	q.backupMember.CompareAndSwap(b, 0)
	q.noteStale(b) // it keeps what it took until told (resetStale)
}

// markUnreachable passes member over until it answers a ping that the
// reconcile round starts (readmit): no backup nor hand-off target
// (backupCandidate), asked to hold no copy (hold), and, while it
// dispatches a queue, tried by no put nor hand-over of it
// (errNotAnswering). Passed over for a fixed 5 s instead, a backup on a
// dead path (its connection open, nothing coming back) was chosen again
// every 10 s, and every put of its queues waited 5 s for its full copy.
//
// A member found not answering while a ping of it runs stays passed
// over whatever that ping's answer: the newer finding counts.
func (m *Manager) markUnreachable(member uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.unreachable[member]; !ok || p.pinging {
		m.unreachable[member] = passOver{next: m.clock.Now()} // pinged in the next round
	}
}

// passOver is a member passed over (markUnreachable): when readmit pings
// it next, or that a ping of it runs.
type passOver struct {
	next    time.Time
	pinging bool
}

// readmit starts a ping of each member passed over once its next probe
// is due, over the connection this member's frames to it take, and
// returns without waiting for them: one that answers is a candidate
// again (from the next round on), one that does not is pinged again
// readmitProbeEvery after its ping failed, and one gossip no longer
// calls alive is forgotten. Pinged in the round itself, each member on
// a dead path held every queue's round up to probeTimeout.
func (m *Manager) readmit() {
	now := m.clock.Now()
	var due []uint64
	m.mu.Lock()
	for member, p := range m.unreachable {
		switch {
		case !m.alive(member):
			delete(m.unreachable, member)
		case !p.pinging && !now.Before(p.next):
			due = append(due, member)
			m.unreachable[member] = passOver{pinging: true}
		}
	}
	m.mu.Unlock()
	m.wg.Add(len(due)) // the round's goroutine is one of wg's: Shutdown waits for these too
	for _, member := range due {
		go func() {
			defer m.wg.Done()
			m.probeUnreachable(member)
		}()
	}
}

// probeUnreachable pings member, passed over, for readmit. The answer
// counts only while the mark is the one readmit left: a mark made since
// (markUnreachable too) is newer.
func (m *Manager) probeUnreachable(member uint64) {
	ok := m.pingForwarded(member)
	m.mu.Lock()
	if p, still := m.unreachable[member]; !still || !p.pinging {
		ok = false // forgotten, or marked anew: not this ping's to settle
	} else if ok {
		delete(m.unreachable, member)
	} else {
		m.unreachable[member] = passOver{next: m.clock.Now().Add(readmitProbeEvery)}
	}
	m.mu.Unlock()
	if ok {
		m.log.Info("member passed over answers again", "member", gossip.ID(member))
	}
}

// passedOver reports whether member is passed over now (markUnreachable).
func (m *Manager) passedOver(member uint64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.passedOverLocked(member)
}

// passedOverLocked is passedOver. The caller holds mu.
func (m *Manager) passedOverLocked(member uint64) bool {
	_, ok := m.unreachable[member]
	return ok
}

// noteStale records that member may keep copies of q it should not
// (queue.stale); 0 is nobody.
func (q *queue) noteStale(member uint64) {
	if member == 0 {
		return
	}
	q.staleMu.Lock()
	defer q.staleMu.Unlock()
	if q.stale == nil {
		q.stale = make(map[uint64]bool)
	}
	if _, ok := q.stale[member]; !ok {
		q.stale[member] = false
	}
}

// resetStale sends a RESET to each alive member that may keep stale
// copies of q, one at a time per member, until it answers OK: a copy
// left on a member that is not the backup would be queued again should
// it take the queue over, long after its message was acknowledged. The
// current backup is dropped from the set: it got a RESET before its
// full copy. Under backupMu, so that a full copy to a member starts
// after any RESET queued for it here, never before it.
func (m *Manager) resetStale(q *queue) {
	q.backupMu.RLock()
	defer q.backupMu.RUnlock()
	cur := q.backupMember.Load()
	q.staleMu.Lock()
	defer q.staleMu.Unlock()
	for member, busy := range q.stale {
		switch {
		case member == cur:
			delete(q.stale, member)
			continue
		case busy || !m.alive(member):
			continue // its RESET is on its way; or told once it is back
		}
		c, err := m.startFrame(member, peerpb.ForwardKind_RESET, q.name, nil)
		if err != nil {
			continue
		}
		q.stale[member] = true
		m.onAnswer(c, func(err error) {
			q.staleMu.Lock()
			defer q.staleMu.Unlock()
			if _, ok := q.stale[member]; ok {
				if err == nil {
					delete(q.stale, member)
				} else {
					q.stale[member] = false
				}
			}
		})
	}
}

// onAnswer waits for c's answer in a goroutine of the manager and calls
// done with it (nil: answered OK). The wait ends with the answer, the
// call's expiry or the forwarder's close (at shutdown).
func (m *Manager) onAnswer(c *call, done func(error)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		done(c.wait(context.Background(), forwardTimeout))
	}()
}

// peerCount counts the other alive members, whether passed over or not.
func (m *Manager) peerCount() int {
	if m.cluster == nil {
		return 0
	}
	return len(m.cluster.Peers())
}

// backupCandidate returns the member that should hold copies of what this
// member dispatches: the next alive member after it in member-id order,
// skipping those passed over and those leaving (gossip.Peer.Leaving);
// 0 when there is none.
func (m *Manager) backupCandidate() uint64 { return m.backupCandidatePeer().ID }

// backupCandidatePeer is backupCandidate with the member's run (Boot); a
// zero Peer when there is none.
func (m *Manager) backupCandidatePeer() gossip.Peer {
	if m.cluster == nil {
		return gossip.Peer{}
	}
	peers := m.cluster.Peers()
	cands := make([]gossip.Peer, 0, len(peers))
	m.mu.Lock()
	for _, p := range peers {
		if p.Leaving || m.passedOverLocked(p.ID) {
			continue
		}
		cands = append(cands, p)
	}
	m.mu.Unlock()
	if len(cands) == 0 {
		return gossip.Peer{}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].ID < cands[j].ID })
	for _, p := range cands {
		if p.ID > m.cfg.MemberID {
			return p
		}
	}
	return cands[0]
}

// ensureBackup makes sure the queue's backup is the current candidate,
// giving a new one a full copy first, and returns it (0: none).
func (m *Manager) ensureBackup(ctx context.Context, q *queue) (uint64, error) {
	cand := m.backupCandidatePeer()
	want, boot := cand.ID, runOf(cand)
	if q.backupMember.Load() == want && q.backupRun(boot) {
		return want, nil
	}
	q.backupMu.Lock()
	defer q.backupMu.Unlock()
	old := q.backupMember.Load()
	if old == want && q.backupRun(boot) {
		return want, nil
	}
	if old == want && want != 0 {
		m.log.Info("backup restarted: it gets a full copy again", "queue", q.name, "backup", gossip.ID(want))
	}
	if want != 0 {
		if err := m.copyTo(ctx, q, want); err != nil {
			// It may keep part of the copy.
			q.noteStale(want)
			if ctx.Err() == nil { // not a put that gave up
				m.passOver(q, want, err)
			}
			return 0, err
		}
		m.log.Info("backup holds a full copy of the queue", "queue", q.name, "backup", gossip.ID(want))
	}
	q.backupMember.Store(want)
	q.backupBoot.Store(&boot)
	if old != want {
		q.noteStale(old) // its copies are stale now (resetStale)
	}
	return want, nil
}

// backupRun reports whether the queue's backup took its full copy in
// run boot of its process (peerBoot's); a run not known on either side
// counts as the same.
func (q *queue) backupRun(boot string) bool {
	had := q.backupBoot.Load()
	return had == nil || *had == "?" || *had == "" || boot == "?" || boot == "" || *had == boot
}

// copyTo sends member a full copy of the queue: RESET, then BACKUP frames,
// the first rows of batches sent to ClickHouse carrying their marks, the
// last frame saying the copy is whole (ForwardBatch.full).
// The caller holds q.backupMu, so no put sends a copy meanwhile; a put
// that queued a message after the snapshot sends it again, which the
// backup keeps once. What leaves the queue after the snapshot is noted
// in q.released (settledLocked), backup or not. When the copy fails, the
// releases it took from q.released go back: they are owed to the backup
// that stays, which kept the copies of acknowledged messages for good
// otherwise, and queued them again at a takeover.
func (m *Manager) copyTo(ctx context.Context, q *queue, member uint64) (err error) {
	q.mu.Lock()
	all := make([]incoming, 0, q.msgs.len())
	for seq, msg := range q.msgs.all() { // in number order
		all = append(all, incoming{id: msg.id, tail: msg.tail, value: msg.value, region: msg.region, seq: seq,
			batch: max(q.sent[seq], q.tried[seq].rows)}) // the marks markOnBackup gave the backup before
	}
	owed := q.released
	q.released = nil
	q.mu.Unlock()
	defer func() {
		if err != nil && len(owed) > 0 {
			q.mu.Lock()
			q.released = append(owed, q.released...)
			q.mu.Unlock()
		}
	}()
	f, err := m.forwarderFor(member)
	if err != nil {
		return err
	}
	kind := peerpb.ForwardKind_RESET
	for i := 0; i == 0 || i < len(all); {
		j := i
		if len(all) > 0 {
			j = chunkEnd(all, i)
		}
		b, err := f.batchOf(q.name, all[i:j])
		if err != nil {
			return err
		}
		b.Head.Kind, b.Head.Boot, b.Head.Queue = kind, m.cfg.Boot, q.name
		b.Head.Full = j == len(all) // the last frame: the copy is whole
		if err := f.send(ctx, b, forwardTimeout); err != nil {
			return err
		}
		kind = peerpb.ForwardKind_BACKUP
		if j == i {
			break
		}
		i = j
	}
	return nil
}

// resetTimeout bounds the wait of a member leaving (Handoff) for the
// answers to the RESET and the DONE it sends once a queue is handed over
// (resetBackup, sendDone).
const resetTimeout = time.Second

// resetBackup ends the queue's backup, if it has one: this member holds
// none of the queue's messages any longer (handed over, or all
// acknowledged), so the backup is to drop the copies it keeps for it
// (RESET). The backup is noted stale (queue.stale) until it answers,
// and the reconcile round sends the RESET (resetStale) while this member
// runs. A member leaving sends it at once and waits for the answer, up
// to resetTimeout or ctx: only posted, the RESET was lost when the member
// stopped right after its hand-over (Shutdown closes the streams), and so
// were the releases of the last messages acknowledged (a reconcile round
// sends them): the backup took its copies over once the member was gone
// and delivered messages acknowledged long before.
func (m *Manager) resetBackup(ctx context.Context, q *queue) {
	// Under backupMu: a full copy on its way to a new backup ends
	// before, and that backup is the one reset.
	q.backupMu.RLock()
	b := q.backupMember.Swap(0)
	if b == 0 {
		q.backupMu.RUnlock()
		return
	}
	q.noteStale(b)
	if !m.departing.Load() {
		q.backupMu.RUnlock()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	c, err := m.queueFrame(ctx, b, peerpb.ForwardKind_RESET, q.name, nil, nil)
	q.backupMu.RUnlock()
	if err == nil {
		err = c.wait(ctx, resetTimeout)
	}
	if err != nil {
		m.log.Debug("the queue's backup did not drop its copies; the reconcile round tells it again", "queue", q.name,
			"backup", gossip.ID(b).String(), "err", err)
		return
	}
	q.staleMu.Lock()
	if busy, ok := q.stale[b]; ok && !busy {
		delete(q.stale, b)
	}
	q.staleMu.Unlock()
}

// sendDone gives member, the queue's dispatcher now, the ids this member
// acknowledged or inserted lately (queue.done) in a DONE frame: a copy of
// one of those messages held elsewhere (while the dispatcher was
// unreachable) that reaches member after the hand-over is then dropped as
// a duplicate, not delivered or inserted again. A member leaving waits
// for the answer, up to resetTimeout or ctx, as for its RESET
// (resetBackup); one that stays does not wait. A member that does not
// take the ids delivers such a copy again; an older one reads the frame
// as a release of its copies for this member numbered as the triples'
// numbers, which the RESET that follows drops anyway, or as an empty
// backup set, dropped as stale (staleBackup).
func (m *Manager) sendDone(ctx context.Context, q *queue, member uint64) {
	if member == 0 || member == m.cfg.MemberID {
		return
	}
	q.mu.Lock()
	ids := q.done.blocks(nil)
	q.mu.Unlock()
	// Sent with no ids too: it tells member the hand-over is done
	// (dispatchLocked).
	ctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	c, err := m.queueFrame(ctx, member, peerpb.ForwardKind_DONE, q.name, nil, ids)
	if err == nil && !m.departing.Load() {
		c.forget()
		return
	}
	if err == nil {
		err = c.wait(ctx, resetTimeout)
	}
	if err != nil {
		m.log.Debug("the queue's dispatcher did not take the ids acknowledged here; a late copy of one is delivered again", "queue", q.name,
			"dispatcher", gossip.ID(member).String(), "err", err)
	}
}

// takeDone applies a DONE frame (sendDone) from member from: the ids its
// sender acknowledged lately join those the queue remembers as
// acknowledged, and a wait for its hand-over ends (dispatchLocked).
// The set keeps the last doneIDs of them, whatever the frame holds.
// Copies this member held joined the queue as it entered its epoch,
// before the DONE: those it names go (dropDoneCopiesLocked).
func (m *Manager) takeDone(from uint64, b *peerpb.ForwardBatch) error {
	if !validQueueName(b.Queue) || len(b.Seqs)%3 != 0 || len(b.Seqs) > peerCallSeqs {
		return status.Errorf(codes.InvalidArgument, "dispatch: a DONE frame needs a valid queue name and at most %d numbers, in triples", peerCallSeqs)
	}
	for i := 1; i < len(b.Seqs); i += 3 {
		if b.Seqs[i] >= 1<<58 {
			return status.Error(codes.InvalidArgument, "dispatch: a DONE frame names an id past 2^64")
		}
	}
	q := m.lockCurrent(m.queueFor(b.Queue))
	defer q.mu.Unlock()
	for i := 0; i < len(b.Seqs); i += 3 {
		q.done.addBlock(b.Seqs[i], b.Seqs[i+1], b.Seqs[i+2])
	}
	if _, awaited := q.awaiting[from]; awaited && len(b.Seqs) > 0 {
		q.dropDoneCopiesLocked()
	}
	q.heardFromLocked(from, m.clock.Now())
	if q.droppedOwn > 0 {
		m.log.Info("dropped copies a restarted backup kept from before it stopped: they were acknowledged meanwhile", "queue", q.name,
			"member", gossip.ID(from).String(), "copies", q.droppedOwn)
		q.droppedOwn = 0
	}
	return nil
}

// startFrame queues a batch of kind about queue's copies seqs, without
// messages, on member's stream, waiting at most forwardTimeout for room,
// and returns the call to wait on.
func (m *Manager) startFrame(member uint64, kind peerpb.ForwardKind, queue string, seqs []uint64) (*call, error) {
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	return m.queueFrame(ctx, member, kind, queue, nil, seqs)
}

// queueFrame queues a batch of kind about queue's copies seqs, carrying
// copies of msgs (their values copied: they may be views of the queue
// log), on member's stream, waiting for room until ctx ends, and returns
// the call to wait on.
func (m *Manager) queueFrame(ctx context.Context, member uint64, kind peerpb.ForwardKind, queue string, msgs []incoming, seqs []uint64) (*call, error) {
	f, err := m.forwarderFor(member)
	if err != nil {
		return nil, err
	}
	b, err := f.batchOf(queue, msgs)
	if err != nil {
		return nil, err
	}
	b.Head.Kind, b.Head.Boot, b.Head.Queue, b.Head.Seqs = kind, m.cfg.Boot, queue, seqs
	b.Head.Full = kind == peerpb.ForwardKind_RESET // alone: keep nothing
	return f.start(ctx, b)
}

// flushReleases tells the queue's backup which copies it may drop. It
// does not wait for the answer; releases the backup did not answer OK
// go with the next frame to it (unreleased), or a backup that missed
// them kept their copies for good and queued them again at a takeover.
func (m *Manager) flushReleases(q *queue) {
	q.mu.Lock()
	seqs := q.takeReleasesLocked()
	q.mu.Unlock()
	if len(seqs) == 0 {
		return
	}
	q.backupMu.RLock()
	defer q.backupMu.RUnlock()
	b := q.backupMember.Load()
	if b == 0 {
		return
	}
	c, err := m.startFrame(b, peerpb.ForwardKind_RELEASE, q.name, seqs)
	if err != nil {
		q.unreleased(b, seqs)
		return
	}
	m.onAnswer(c, func(err error) {
		if err != nil {
			q.unreleased(b, seqs)
		}
	})
}

// takeReleasesLocked takes the releases not sent yet, at most
// peerCallSeqs, the oldest first; the rest go with the next frame or
// round. A backup refuses a frame naming more, so that all of them
// were put back and refused again, for ever. The caller holds mu.
func (q *queue) takeReleasesLocked() []uint64 {
	seqs := q.released
	if len(seqs) <= peerCallSeqs {
		q.released = nil
		return seqs
	}
	q.released = slices.Clone(seqs[peerCallSeqs:])
	return seqs[:peerCallSeqs:peerCallSeqs]
}

// unreleased puts back releases that backup b did not take, to go with
// the next frame to it, unless b is no longer the backup: a new one got
// a full copy without them.
func (q *queue) unreleased(b uint64, seqs []uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.backupMember.Load() == b {
		q.released = append(q.released, seqs...)
	}
}
