package dispatch

import (
	"context"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer/peerpb"
)

// A member is the backup of queues other members dispatch with
// ack=replicated: it keeps the copies they send, by queue and dispatcher,
// until they release them. When serf reports such a dispatcher failed or
// gone, the backup takes its queues over at once (no put is needed): it
// claims each queue and queues the copies, numbers and ids kept, or hands
// them to whoever claimed it first; ids make every later copy of a message
// (broadcast ones) a duplicate that is dropped.

// backupKey names the copies kept for one dispatcher of one queue.
type backupKey struct {
	queue      string
	dispatcher uint64
	boot       string // the run of the dispatcher's process that sent them
}

// backupSet is the copies kept for one dispatcher of one queue.
type backupSet struct {
	msgs  map[uint64]incoming // by seq
	bytes int64
	// released remembers releases of copies not received yet (a release
	// can overtake the copy on another path), so the copy is not kept.
	released *recent[uint64, struct{}]
	seen     time.Time // last frame from the dispatcher
	// reset says the set began with a RESET to this run of the process:
	// the last frame of a full copy (ForwardBatch.full) makes it whole.
	reset bool
}

// releasedMemory bounds the early releases a backup set remembers.
const releasedMemory = 4096

// staleBackup is how long copies are kept for a member that is alive but
// no longer dispatches the queue and sends nothing: it handed the queue
// over, and its RESET went missing.
const staleBackup = time.Minute

// keepBackup applies a BACKUP, RELEASE or RESET frame from member from.
// The copies kept for one dispatcher of a queue are held to the queue's
// byte cap, as its messages are on the dispatcher: a frame that would go
// over it keeps nothing and is answered errOverCap. The copies are in
// the queue log before the frame is answered; a copy's record is released
// with the copy.
func (m *Manager) keepBackup(ctx context.Context, from uint64, b *peerpb.ForwardBatch) error {
	if !validQueueName(b.Queue) {
		return status.Error(codes.InvalidArgument, "dispatch: backup frame without a valid queue name")
	}
	if len(b.Seqs) > peerCallSeqs {
		return status.Errorf(codes.InvalidArgument, "dispatch: %d numbers in one release, at most %d", len(b.Seqs), peerCallSeqs)
	}
	var n int64
	for _, msg := range b.Messages {
		if msg.Queue != b.Queue {
			return status.Error(codes.InvalidArgument, "dispatch: backup frame with messages of another queue")
		}
		n += int64(len(msg.Value) + len(msg.Tail))
	}
	if err := m.checkPeerMessages(b.Messages); err != nil {
		return err
	}
	maxBytes := m.settingsOf(b.Queue).MaxBytes // before backupMu, taken alone
	copies := make([]incoming, len(b.Messages))
	owner := &copyOwner{member: from, boot: b.Boot} // in their records: read back, they are handed over saying so
	for i, msg := range b.Messages {
		copies[i] = incoming{id: MsgID{Origin: msg.Origin, N: msg.N}, tail: msg.Tail, value: msg.Value, seq: msg.Seq, batch: int(msg.Batch), owner: owner}
	}
	if err := m.persistAs(ctx, recBackup, b.Queue, copies); err != nil { // before backupMu: no fsync under it
		return err
	}
	key := backupKey{queue: b.Queue, dispatcher: from, boot: b.Boot}
	m.backupMu.Lock()
	defer m.backupMu.Unlock()
	set := m.backups[key]
	if b.Kind == peerpb.ForwardKind_RESET {
		if set != nil {
			set.releaseAll(m)
		}
		set = nil
	}
	if set == nil {
		set = &backupSet{msgs: make(map[uint64]incoming), released: newRecent[uint64, struct{}](releasedMemory),
			reset: b.Kind == peerpb.ForwardKind_RESET}
		m.backups[key] = set
	}
	set.seen = m.clock.Now()
	for _, seq := range b.Seqs { // RELEASE, or releases sent with copies
		if in, ok := set.msgs[seq]; ok {
			delete(set.msgs, seq)
			m.release(in.lseq)
			set.bytes -= int64(len(in.value) + len(in.tail))
		} else {
			set.released.add(seq, struct{}{})
		}
	}
	if set.bytes+n > maxBytes {
		if len(set.msgs) == 0 {
			delete(m.backups, key)
		}
		m.unpersist(copies)
		return errOverCap
	}
	set.keep(m, copies)
	if len(set.msgs) == 0 && b.Kind == peerpb.ForwardKind_RESET && len(b.Messages) == 0 {
		delete(m.backups, key)
	}
	return nil
}

// supersede applies a frame from member from, kept, that ends with what
// that run of its process wants this member to keep of queue (a RESET
// alone, or the last frame of a full copy whose RESET came to this run
// of this process: ForwardBatch.full): the copies this member kept for
// that run before it restarted, read back from its queue log and held
// since, are replaced by it and dropped. Handed to that run they are
// dropped there (dropLeftLocked), but the hand-over may not have reached
// it yet; taken over once it fails, those acknowledged meanwhile were
// delivered again. The last frame of a copy begun before a restart of
// this process says nothing of what it holds (the next full copy does).
func (m *Manager) supersede(from uint64, b *peerpb.ForwardBatch) {
	if !b.Full || from == 0 || b.Boot == "" || b.Boot == "?" {
		return
	}
	if b.Kind != peerpb.ForwardKind_RESET {
		m.backupMu.Lock()
		set := m.backups[backupKey{queue: b.Queue, dispatcher: from, boot: b.Boot}]
		whole := set != nil && set.reset
		m.backupMu.Unlock()
		if !whole {
			return
		}
	}
	q := m.lookup(b.Queue)
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.supersedeLocked(copyOwner{member: from, boot: b.Boot})
}

// keep adds copies to set, but for those it holds or had released, whose
// records are released. A copy it holds takes the mark of a tried batch
// a copy sent again carries (markOnBackup). The caller holds backupMu.
func (set *backupSet) keep(m *Manager, copies []incoming) {
	for _, in := range copies {
		if _, gone := set.released.get(in.seq); gone {
			m.release(in.lseq)
			continue
		}
		if held, dup := set.msgs[in.seq]; dup {
			if in.batch > 0 && held.id == in.id {
				held.batch = in.batch
				set.msgs[in.seq] = held
			}
			m.release(in.lseq)
			continue
		}
		set.msgs[in.seq] = in
		set.bytes += int64(len(in.value) + len(in.tail))
	}
}

// releaseAll releases the records of the copies in set, which is dropped.
func (set *backupSet) releaseAll(m *Manager) {
	for _, in := range set.msgs {
		m.release(in.lseq)
	}
}

// BackupStatus is what /status shows of the copies this member keeps.
type BackupStatus struct {
	Queue      string `json:"queue"`
	Dispatcher string `json:"dispatcher"`
	Rows       int    `json:"rows"`
	Bytes      int64  `json:"bytes"`
}

// backupStatus lists the copies kept here, by queue and dispatcher.
func (m *Manager) backupStatus() []BackupStatus {
	m.backupMu.Lock()
	defer m.backupMu.Unlock()
	out := make([]BackupStatus, 0, len(m.backups))
	for k, set := range m.backups {
		out = append(out, BackupStatus{Queue: k.queue, Dispatcher: gossip.ID(k.dispatcher).String(), Rows: len(set.msgs), Bytes: set.bytes})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].Dispatcher < out[j].Dispatcher
	})
	return out
}

// backupKeys returns the keys of the copies kept now, for a caller that
// works on them outside backupMu.
func (m *Manager) backupKeys() []backupKey {
	m.backupMu.Lock()
	defer m.backupMu.Unlock()
	keys := make([]backupKey, 0, len(m.backups))
	for k := range m.backups {
		keys = append(keys, k)
	}
	return keys
}

// reconcileBackups takes over the queues of dispatchers that are gone and
// drops copies nobody needs.
func (m *Manager) reconcileBackups() {
	keys := m.backupKeys()
	sort.Slice(keys, func(i, j int) bool { return keys[i].queue < keys[j].queue })
	for _, k := range keys {
		boot := m.peerBoot(k.dispatcher)
		switch {
		case boot == "": // gone: serf reported it failed or left
			m.takeOver(k, false)
		case k.boot != "" && boot != "?" && boot != k.boot:
			// Back under the same name, with an empty queue. (Serf may
			// still show the earlier run for a moment when a new run's
			// copies arrive: taking those over moves the queue for
			// nothing, and ids drop the duplicates.)
			m.takeOver(k, true)
		default:
			rec, ok := m.record(k.queue)
			m.backupMu.Lock()
			if set := m.backups[k]; set != nil && ok && rec.Member != k.dispatcher && m.clock.Now().Sub(set.seen) > staleBackup {
				delete(m.backups, k)
				set.releaseAll(m)
			}
			m.backupMu.Unlock()
		}
	}
}

// peerBoot returns the run of an alive peer's process, "" when it is not
// an alive peer.
func (m *Manager) peerBoot(id uint64) string {
	if m.cluster == nil {
		return ""
	}
	for _, p := range m.cluster.Peers() {
		if p.ID == id {
			return runOf(p)
		}
	}
	return ""
}

// runOf returns the run of an alive peer's process, "?" when it does not
// say.
func runOf(p gossip.Peer) string {
	if p.Boot == "" {
		return "?"
	}
	return p.Boot
}

// takeOver moves the copies kept for a dispatcher that is gone (or that
// restarted: force) into the queue: here, when this member wins the claim,
// or at whoever dispatches it now. Copies that cannot be moved are kept
// for the next round.
func (m *Manager) takeOver(k backupKey, force bool) {
	m.backupMu.Lock()
	set := m.backups[k]
	m.backupMu.Unlock()
	if set == nil {
		return
	}
	var rec Record
	if force {
		var err error
		if rec, err = m.claimFrom(context.Background(), k.queue, k.dispatcher); err != nil {
			return // not written (logged): next round
		}
	} else {
		rec = m.dispatcherOf(context.Background(), k.queue, claimAsProducer) // claims when the recorded dispatcher is gone
	}
	if rec.Member == k.dispatcher && !force || !m.alive(rec.Member) {
		return // the claim did not settle, or was not written; next round
	}
	m.backupMu.Lock()
	if m.backups[k] != set { // changed meanwhile
		m.backupMu.Unlock()
		return
	}
	delete(m.backups, k)
	m.backupMu.Unlock()
	msgs := make([]incoming, 0, len(set.msgs))
	for _, in := range set.msgs {
		msgs = append(msgs, in)
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].seq < msgs[j].seq })
	if rec.Member == m.cfg.MemberID {
		// The marks the copies carry, outside the queue's lock (an
		// fsync): without them, a restart before the batches go forms
		// their rows anew. Their own records are written.
		_ = m.persist(context.Background(), k.queue, msgs)
		q := m.lockCurrent(m.queueFor(k.queue))
		if m.dispatchLocked(q, rec) {
			q.enqueueLocked(msgs, m.clock.Now(), arrivedCopy, false) // over the byte cap if need be: these were acknowledged
		} else {
			q.holdLocked(msgs) // until its own epoch
			m.enterSoon(k.queue)
		}
		q.mu.Unlock()
		m.ensureDrainer(q)
		m.log.Warn("took over the queue of a failed dispatcher from its copies", "queue", k.queue,
			"failed", gossip.ID(k.dispatcher).String(), "messages", len(msgs), "epoch", rec.Epoch)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), reconcileRemoteTimeout)
	defer cancel()
	for i := 0; i < len(msgs); {
		j := chunkEnd(msgs, i)
		err := m.forward(ctx, rec.Member, k.queue, msgs[i:j], false, forwardTimeout)
		if err == nil { // on the dispatcher's disk now
			for _, in := range msgs[i:j] {
				m.release(in.lseq)
			}
		} else {
			m.backupMu.Lock() // keep the rest for the next round
			rest := m.backups[k]
			if rest == nil {
				rest = &backupSet{msgs: make(map[uint64]incoming), released: set.released, seen: set.seen}
				m.backups[k] = rest
			}
			// Into a set made meanwhile, too (frames of the same run
			// came): dropped, the copies' records stayed in the log.
			rest.keep(m, msgs[i:])
			m.backupMu.Unlock()
			return
		}
		i = j
	}
	m.log.Warn("handed the copies of a failed dispatcher to the new one", "queue", k.queue,
		"failed", gossip.ID(k.dispatcher).String(), "dispatcher", gossip.ID(rec.Member).String(), "messages", len(msgs))
}
