package dispatch

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
)

// The reconcile loop keeps every queue this member knows in step with its
// dispatcher record:
//   - a member that holds messages of a queue another alive member now
//     dispatches hands them over (order and numbers kept) and keeps nothing;
//   - a member that holds messages or consumers of a queue nobody alive
//     dispatches claims it (the next epoch);
//   - consumer watches are bound to the queue here or to the dispatcher's
//     stream, and rebound when the dispatcher changes or the stream ends.

func (m *Manager) runReconcile() {
	tick := m.clock.NewTicker(m.cfg.ReconcileInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.Chan():
			m.reconcile()
		}
	}
}

func (m *Manager) reconcile() {
	if m.records == nil {
		return
	}
	m.tick.Store(m.clock.Now().UnixNano())
	m.pruneForwarders() // first: the queues' rounds then reach members where they are now
	qs := m.snapshot()
	full := m.rounds%quietRounds == 0
	m.rounds++
	m.readmit() // its pings run beside the rounds: a member that answers is a candidate from the next
	for _, q := range qs {
		if !full && m.quiet(q) {
			continue
		}
		m.reconcileQueue(q)
	}
	m.forgetIdle(qs)
	m.adoptRecords()
	m.reconcileBackups()
	m.sweepDeadLetters()
	m.rehomeValues()
	m.bindLocals()
}

// bindLocals binds every consumer watch on this member to its queue's
// dispatcher, here or over a stream: the last step of a reconcile round.
// A consumer's member claims a queue whose dispatcher hosts no consumer
// when the consumer registers (Consume) or in the queue's round; here it
// only claims a queue nobody alive dispatches. Moving the dispatcher
// because its own consumer left would hand over messages in flight to
// the others.
func (m *Manager) bindLocals() {
	m.mu.Lock()
	locals := make([]*localConsumer, 0, len(m.locals))
	for lc := range m.locals {
		locals = append(locals, lc)
	}
	m.mu.Unlock()
	for _, lc := range locals {
		m.bind(lc, m.dispatcherOf(context.Background(), lc.queue, claimAsProducer))
	}
}

// quiet reports whether q may skip this reconcile round: it holds
// nothing (queue.quiet), and, its record (the view cached for puts, read
// again only when the key space changed) naming another member, it owes
// that member no DONE and runs no drainer. The member a queue moved to
// waits for the DONE (or asks whether anything is held: once, and an
// insert in flight then said yes); the drainer of a queue dispatched
// elsewhere is stopped by the round.
func (m *Manager) quiet(q *queue) bool {
	if !q.quiet() {
		return false
	}
	v := m.view(q.name)
	if v.ok && v.rec.Member == m.cfg.MemberID {
		return true
	}
	if v.ok && v.rec.From == m.cfg.MemberID {
		q.mu.Lock()
		owed := q.epoch != 0 && q.doneFor < v.rec.Epoch // as sendDoneOnce
		q.mu.Unlock()
		if owed {
			return false
		}
	}
	m.mu.RLock()
	_, draining := m.drainers[q.name]
	m.mu.RUnlock()
	return !draining
}

// quietRounds is how often a quiet queue (Manager.quiet) gets its
// reconcile round: every tenth, once a second at the default interval.
// Each round reads a queue's record and settings and takes its locks,
// about 3 µs a queue with 2000 of them: a member with 2000 idle
// ClickHouse queues spent 8% of a core on rounds with nothing to do.
// What a quiet queue's round could still find waits at most that long
// and has no row at stake: the record's From to clear, local consumers
// whose dispatcher hosts none (Consume claims for them as they
// register).
const quietRounds = 10

// handoverAwait bounds how long a new dispatcher waits for the hand-over
// of the member it took the queue from (Record.From), or after a
// failover of every other member, before it delivers anything: a member
// sends its DONE after its messages, in its next reconcile round or at
// once when it leaves; one that had forgotten the queue, or runs an
// older version, sends none.
const handoverAwait = 2 * time.Second

// dispatchLocked prepares q for dispatching under rec, a record naming
// this member (becomeDispatcherLocked). Entering a new epoch whose record
// comes from another member alive, it delivers nothing until that
// member's DONE (takeDone), its going, or handoverAwait: one producer's
// put through a third member reached this one while an earlier put of
// the same connection was still on the member the queue came from, and
// was delivered first. Messages handed over carry that member's numbers,
// below this epoch's, so they go first once the wait ends. Entering an
// epoch it claimed from a member gossip called gone (failedOver), it
// waits for every other alive member the same way: each may hold copies
// of puts made while the dispatcher was unreachable, and once this one
// delivered and a consumer acknowledged its own copies of them, theirs
// would be queued again by the next dispatcher, which does not know
// them acknowledged, should this one go too; collected first, they are
// dropped here by id. The caller holds q.mu.
//
// It reports false, preparing nothing, when this member may not number
// the queue's messages in rec's epoch (mayNumber): the caller claims its
// next epoch (enterSoon) when it has messages to number, and they wait
// for it. A queue that has none (one adopted idle after a restart, to be
// forgotten) costs no write.
func (m *Manager) dispatchLocked(q *queue, rec Record) bool {
	if !m.mayNumber(q.name, rec) {
		return false
	}
	now := m.clock.Now()
	if rec.Epoch > q.epoch {
		q.awaiting = nil // a wait of an epoch before, if any, is over
		if rec.From != 0 && rec.From != m.cfg.MemberID && m.alive(rec.From) {
			q.awaiting = map[uint64]bool{rec.From: false}
		}
		if e, ok := m.failedOver.LoadAndDelete(q.name); ok && e.(uint64) == rec.Epoch && m.cluster != nil {
			for _, p := range m.cluster.Peers() {
				if q.awaiting == nil {
					q.awaiting = make(map[uint64]bool)
				}
				q.awaiting[p.ID] = false
			}
		}
		q.awaitUntil = now.Add(handoverAwait)
	}
	q.becomeDispatcherLocked(rec.Epoch, now)
	return true
}

// awaitPrevious ends q's wait for each member it awaits (dispatchLocked)
// once that member is gone, and for all of them once handoverAwait
// passed; it asks each once whether it holds anything (askPrevious).
// Then it writes the queue's record without From, so that a restart of
// this member does not wait again. The reconcile loop's, for a queue
// this member dispatches under rec.
func (m *Manager) awaitPrevious(q *queue, rec Record) {
	q.mu.Lock()
	if len(q.awaiting) > 0 {
		now := m.clock.Now()
		for member := range q.awaiting {
			if !m.alive(member) {
				q.heardFromLocked(member, now)
			}
		}
		var ask []uint64
		if now.Before(q.awaitUntil) {
			for member, asked := range q.awaiting {
				if !asked {
					q.awaiting[member] = true
					ask = append(ask, member)
				}
			}
		} else if len(q.awaiting) > 0 {
			silent := make([]string, 0, len(q.awaiting))
			for member := range q.awaiting {
				silent = append(silent, gossip.ID(member).String())
			}
			q.stopAwaitingLocked(now)
			m.log.Info("members sent no word of their hand-over; delivering", "queue", q.name, "members", silent)
		}
		waiting := len(q.awaiting) > 0
		q.mu.Unlock()
		for _, member := range ask {
			m.askPrevious(q, member)
		}
		if waiting {
			return
		}
	} else {
		q.mu.Unlock()
	}
	if rec.From == 0 || !m.records.Writable() {
		return
	}
	raw := m.records.Get(q.recordKey)
	if cur, ok := ParseRecord(string(raw)); ok && cur == rec {
		next := rec
		next.From = 0
		_, _ = m.writeRecord(context.Background(), q.name, raw, next) // refused: another claim came, or the next round
	}
}

// askPrevious asks member from, one q's wait is for, whether it holds
// anything of q, in a goroutine of its own (the reconcile round does not
// wait for an answer), and ends the wait when it says no: a member that
// has no state of the queue (forgotten, its record kept; restarted and
// not yet adopted) never sends its DONE, and every move of such a queue
// waited handoverAwait. A member of an older version says no as well.
func (m *Manager) askPrevious(q *queue, from uint64) {
	addr, ok := m.peerAddr(from)
	if !ok {
		return
	}
	select {
	case <-m.stop:
		return
	default:
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r, err := m.ping(context.Background(), addr, q.name)
		if err != nil || r.Holding {
			return // its DONE ends the wait, or handoverAwait
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		q.heardFromLocked(from, m.clock.Now())
	}()
}

// sendDoneOnce sends the DONE of a member the queue's record says it came
// from (rec.From), once per epoch: the new dispatcher delivers nothing
// until it has it (dispatchLocked). After a hand-over, whose last frame
// was one, it goes again, empty of news but harmless.
func (m *Manager) sendDoneOnce(q *queue, rec Record) {
	if rec.From != m.cfg.MemberID {
		return
	}
	q.mu.Lock()
	owed := q.epoch != 0 && q.doneFor < rec.Epoch
	if owed {
		q.doneFor = rec.Epoch
	}
	q.mu.Unlock()
	if owed {
		m.sendDone(context.Background(), q, rec.Member)
	}
}

// reconcileQueue hands over or claims one queue, and tells the members
// that may keep stale copies of it for this member to drop them, whoever
// dispatches it now (a queue handed over notes its backup stale).
func (m *Manager) reconcileQueue(q *queue) {
	m.refreshSettings(q)
	defer m.resetStale(q)
	rec, ok := m.record(q.name)
	switch {
	case ok && rec.Member == m.cfg.MemberID:
		q.mu.Lock()
		ready := m.dispatchLocked(q, rec)
		numbers := len(q.held) > 0 // copies recovered or held, to number
		replicated := q.set.Ack == AckReplicated
		q.mu.Unlock()
		if !ready {
			if numbers && m.records.Synced() {
				m.enterSoon(q.name) // its own epoch first: the next round
			}
			return
		}
		m.awaitPrevious(q, rec)
		m.ensureDrainer(q)
		if replicated { // a new backup gets its full copy without waiting for a put
			ctx, cancel := context.WithTimeout(context.Background(), reconcileRemoteTimeout)
			_, _ = m.ensureBackup(ctx, q)
			cancel()
		} else if b := q.backupMember.Swap(0); b != 0 { // no longer replicated
			q.noteStale(b)
		}
		m.flushReleases(q)
	case ok && m.alive(rec.Member):
		m.stopDrainer(q.name)
		if m.passedOver(rec.Member) && q.holding() {
			return // kept, tried once it answers a ping (readmit)
		}
		if !m.handedOverFirst(q, rec) {
			return // kept and retried next round
		}
		if m.localConsumers(q.name) > 0 && !m.hostsConsumer(q.name, rec.Member) {
			// Lost a claim race while hosting the consumers: claim again.
			if m.dispatcherOf(context.Background(), q.name, claimAsConsumer).Member == m.cfg.MemberID {
				return
			}
		}
		m.sendDoneOnce(q, rec)
	default:
		m.stopDrainer(q.name)
		if q.holding() && m.records.Synced() {
			m.dispatcherOf(context.Background(), q.name, claimAsProducer)
		}
	}
}

// handedOverFirst hands what this member holds of q to rec.Member, the
// alive member that dispatches it, and reports whether nothing is left
// here: only then may this member claim q for its consumers. The copies
// it held while the dispatcher before was unreachable may be delivered
// and acknowledged by rec.Member already, and only that member knows
// which (it drops them as done); numbered here in a claim of this
// member's, every one of them was delivered twice.
func (m *Manager) handedOverFirst(q *queue, rec Record) bool {
	return !q.holding() || m.handover(q, rec.Member) == nil
}

// handover forwards everything this member holds of q to its dispatcher;
// what cannot be sent is kept for the next round, and the error returned.
func (m *Manager) handover(q *queue, member uint64) error {
	q.handoverMu.Lock()
	defer q.handoverMu.Unlock()
	return m.handoverLocked(q, member)
}

// handoverLocked is handover for a caller holding q.handoverMu.
func (m *Manager) handoverLocked(q *queue, member uint64) error {
	m.stopDrainer(q.name) // its rows go back to the queue and over with it
	msgs := q.takeAll()
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), reconcileRemoteTimeout)
	defer cancel()
	for i := 0; i < len(msgs); {
		part := msgs[i:chunkEnd(msgs, i)]
		if err := m.forward(ctx, member, q.name, part, false, forwardTimeout); err != nil {
			m.log.Debug("handover to the dispatcher failed; keeping the rest", "queue", q.name, "dispatcher", gossip.ID(member), "err", err)
			m.metrics.handoverFailures.Add(1)
			if holdsOn(err) {
				m.markUnreachable(member)
			}
			q.putBack(msgs[i:], m.clock.Now())
			m.tellTaken(q.name, member, msgs[:i])
			return err
		}
		// The dispatcher answered: the part is on its disk, no longer in
		// this member's custody.
		q.handedOver(part)
		for _, in := range part {
			m.release(in.lseq, in.batchRec)
		}
		m.metrics.handovers.Add(uint64(len(part)))
		i += len(part)
	}
	m.tellTaken(q.name, member, msgs)
	m.sendDone(ctx, q, member)
	m.resetBackup(ctx, q) // the new dispatcher's backup holds them now
	m.log.Debug("handed messages to the dispatcher", "queue", q.name, "dispatcher", gossip.ID(member), "messages", len(msgs))
	return nil
}

// probeTimeout bounds pingForwarded's call.
const probeTimeout = time.Second

// pingForwarded reports whether member answers a Ping within
// probeTimeout over the connection of this member's forward stream to
// it, which forwards, hand-overs and backup frames take.
func (m *Manager) pingForwarded(member uint64) bool {
	f, err := m.forwarderFor(member)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(f.ctx, probeTimeout)
	defer cancel()
	_, err = peerpb.NewQueuesClient(f.conn).Ping(ctx, &peerpb.PingRequest{}, grpc.WaitForReady(true))
	return err == nil
}

// errNotAnswering is what a put of queue name meets while its
// dispatcher is passed over (markUnreachable): it holds its messages at
// once, behind the held ones, without trying the dispatcher, or, in the
// modes that do not hold (ack=replicated, ack=inserted), fails at once.
// Each try of a dispatcher on a dead path (its connection open, nothing
// coming back) waits the forward timeout, 5 s: puts that tried again
// after 250 ms took 5-9 s each, and each try also took and put back
// every held copy (20,000 held puts, each trying, took 70 s).
func errNotAnswering(name string) error {
	return status.Errorf(codes.Unavailable, "dispatch: the dispatcher of %s does not answer this member; retry, or put through another", name)
}

// noteIfUnreachable passes member, the dispatcher a put's forward went
// to, over when the forward failed with err for want of an answer. A put
// that gave up first (its client's deadline, before the forward's own
// timeout: ack=replicated waits 30 s, ack=inserted minutes) says nothing
// of the dispatcher, so a ping does: one answered passes nobody over.
func (m *Manager) noteIfUnreachable(ctx context.Context, member uint64, err error) {
	if !holdsOn(err) || ctx.Err() != nil && m.pingForwarded(member) {
		return
	}
	m.markUnreachable(member)
}

// holdsOn reports whether a forward that failed with err is held
// (produceRemote): the dispatcher did not answer, rather than refused.
func holdsOn(err error) bool {
	switch status.Code(err) {
	case codes.OK, codes.ResourceExhausted, codes.InvalidArgument, codes.FailedPrecondition:
		return false
	}
	return true
}

// maxFrameBytes bounds the message bytes of one peer frame (a handover
// chunk, a forward frame, a delivery batch), far below the peer
// connection's message limit whatever the queue's byte cap.
const maxFrameBytes = 4 << 20

// chunkEnd returns the end of the chunk of msgs starting at i: at most 512
// messages and maxFrameBytes, at least one message, all of one owner
// (incoming.owner): a batch says whose backup's copies it holds.
func chunkEnd(msgs []incoming, i int) int {
	j, bytes := i, 0
	for j < len(msgs) && j-i < 512 && msgs[j].owner.same(msgs[i].owner) {
		bytes += len(msgs[j].value) + len(msgs[j].tail)
		if j > i && bytes > maxFrameBytes {
			break
		}
		j++
	}
	return j
}

// pruneForwarders closes the forward streams of members that are gone,
// or that are back at another peer address (a process restarted
// elsewhere under its name before serf reported it gone): the stream
// dialed the old address for as long as the member stayed alive.
func (m *Manager) pruneForwarders() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, f := range m.forwarders {
		if addr, ok := m.peerAddr(id); !ok || addr != f.addr {
			f.close()
			delete(m.forwarders, id)
		}
	}
}

// outgoing returns ctx carrying this member's identity for peer calls.
func (m *Manager) outgoing(ctx context.Context) context.Context {
	return peer.OutgoingContext(ctx, m.cfg.ClusterID, m.cfg.MemberID)
}

// conn returns the shared connection to a peer listener, opening it
// when needed. Connections live until Shutdown.
func (m *Manager) conn(addr string) (*grpc.ClientConn, error) {
	return m.conns.Get(addr)
}
