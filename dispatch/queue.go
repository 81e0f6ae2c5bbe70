package dispatch

import (
	"container/heap"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"chute/kv"
)

// MsgID identifies a message across the cluster: the member that accepted
// the put and that member's counter. Copies of one message held by several
// members (broadcast while the dispatcher was unreachable) share it.
type MsgID struct {
	Origin uint64
	N      uint64
}

// message is one queued message. It is kept small (96 bytes): a queue
// may hold millions. seq, id, tail, value and trace never change once it
// is queued.
type message struct {
	seq      uint64
	id       MsgID
	tail     string
	value    []byte
	holder   *consumer // delivered to, not yet acknowledged; nil when ready
	trace    *msgTrace // the put's trace; nil when not traced
	sentAt   int64     // unix nanoseconds of its last delivery
	attempts int32     // deliveries so far
}

func (m *message) size() int64 { return int64(len(m.value) + len(m.tail)) }

// consumer is one consumer watch of a queue.
type consumer struct {
	id       string
	prefix   string // spelling of its key, used for its delivery keys
	out      kv.Deliveries
	unacked  map[uint64]*message // by seq; nil for a drainer, which counts them in drained
	drained  int                 // messages a drainer holds (it keeps them itself)
	prefetch int                 // its bound on unacknowledged messages; 0: the queue's
	drain    *drainer            // a ClickHouse drainer, which takes rows instead of out: its messages never expire, it retries them itself
}

// limits are a queue's settings.
type limits struct {
	maxBytes   int64
	prefetch   int
	visibility time.Duration
}

// queue holds one queue's messages on its dispatcher and hands them to its
// consumers: oldest first, round-robin, at most prefetch unacknowledged per
// consumer. A message whose consumer goes, or that stays unacknowledged past
// the visibility timeout, is ready again and delivered again.
type queue struct {
	name        string
	recordKey   string // RecordKey(name)
	settingsKey string // SettingsKey(name)

	// handoverMu serialises handovers with the forwards that must follow
	// them.
	handoverMu sync.Mutex

	mu      sync.Mutex // guards everything below
	set     Settings   // from /config/queues/{name}, refreshed by reconcile
	lim     limits     // of set
	nextSeq uint64
	msgs    map[uint64]*message
	ready   seqHeap // seqs of messages to deliver; stale entries are skipped
	ids     map[MsgID]struct{}
	// parked names, by seq, the consumer a handed-over message was
	// delivered to on the previous dispatcher, until that consumer is
	// attached here (it then holds it, without a second delivery) or the
	// visibility timeout passes (it is ready again).
	parked    map[uint64]string
	bytes     int64
	consumers []*consumer
	rr        int // next consumer to try
	stats     queueStats

	lastInsertError *InsertError // of its drainer; nil when none failed

	waiters  map[uint64]*putWaiter // by seq: puts waiting for their rows (ack=inserted)
	released []uint64              // seqs left since the backup was last told

	// backupMu orders full copies to a new backup before the copies of
	// later puts; backupMember is the member holding a full copy, 0 none.
	backupMu     sync.RWMutex
	backupMember atomic.Uint64

	// held are copies kept for a dispatcher that was unreachable, in
	// arrival order, until they can be handed to the elected one.
	held    []incoming
	heldIDs map[MsgID]bool
	// done remembers recently acknowledged ids, so that a late copy of an
	// acknowledged message is not queued again.
	done *recent[MsgID, struct{}]
	// early remembers acknowledgements of numbered messages this member
	// did not hold yet (a handover still on its way), so the message is
	// dropped when it arrives.
	early *recent[uint64, string] // seq -> tail
}

// doneIDs bounds the acknowledged ids a queue remembers.
const doneIDs = 1 << 16

// queueStats are a queue's counters since it was created here.
type queueStats struct {
	Enqueued    uint64 `json:"enqueued"`
	Delivered   uint64 `json:"delivered"`
	Redelivered uint64 `json:"redelivered"`
	Acked       uint64 `json:"acked"`
	Refused     uint64 `json:"refused"`
}

func newQueue(name string, set Settings) *queue {
	return &queue{
		name: name, recordKey: RecordKey(name), settingsKey: SettingsKey(name), set: set, lim: set.limits(), nextSeq: 1,
		msgs: make(map[uint64]*message), ids: make(map[MsgID]struct{}), parked: make(map[uint64]string),
		heldIDs: make(map[MsgID]bool),
		waiters: make(map[uint64]*putWaiter),
		done:    newRecent[MsgID, struct{}](doneIDs),
		early:   newRecent[uint64, string](doneIDs),
	}
}

// incoming is a message offered to a queue.
type incoming struct {
	id       MsgID
	tail     string
	value    []byte
	seq      uint64 // kept from the dispatcher that handed it over; 0 for none
	consumer string // handed over while delivered to this consumer; "" for none
	attempts int    // deliveries so far, for a handed-over message
	trace    *msgTrace
}

// roomLocked reports whether msgs fit under the byte cap. The caller holds mu.
func (q *queue) roomLocked(msgs []incoming) bool {
	var n int64
	for _, m := range msgs {
		n += int64(len(m.value) + len(m.tail))
	}
	return q.bytes+n <= q.lim.maxBytes
}

// enqueueLocked appends msgs in order, skipping ids already held, and
// delivers what it can. The caller holds mu and checked the room. With
// collect it returns the messages it added.
func (q *queue) enqueueLocked(msgs []incoming, now time.Time, collect bool) (added []*message) {
	for _, in := range msgs {
		if _, dup := q.ids[in.id]; dup || q.isDone(in.id) {
			continue
		}
		if tail, ok := q.early.get(in.seq); ok && in.seq != 0 && tail == in.tail {
			q.early.forget(in.seq) // acknowledged before it arrived
			q.done.add(in.id, struct{}{})
			continue
		}
		seq := in.seq
		if _, taken := q.msgs[seq]; seq == 0 || taken {
			for q.msgs[q.nextSeq] != nil {
				q.nextSeq++
			}
			seq = q.nextSeq
		}
		q.nextSeq = max(q.nextSeq, seq+1) // numbers only grow: none is reused
		m := &message{seq: seq, id: in.id, tail: in.tail, value: in.value, attempts: int32(in.attempts), trace: in.trace}
		q.msgs[m.seq] = m
		q.ids[m.id] = struct{}{}
		q.bytes += m.size()
		q.stats.Enqueued++
		if collect {
			added = append(added, m)
		}
		if in.consumer != "" {
			m.sentAt = q.handoverSentAt(now).UnixNano()
			if c := q.consumerByID(in.consumer); c != nil {
				m.holder = c
				c.unacked[seq] = m
			} else {
				q.parked[seq] = in.consumer
			}
			continue
		}
		heap.Push(&q.ready, m.seq)
	}
	q.deliverLocked(now)
	return added
}

// handoverGrace is how long a handed-over message stays with the consumer
// it was delivered to before it is delivered again. The old dispatcher
// cannot tell whether its last deliveries reached the consumer; a consumer
// that got them acknowledges within the grace, the others are not left
// waiting a whole visibility timeout.
const handoverGrace = 10 * time.Second

// handoverSentAt backdates a handed-over message's delivery so that it
// expires after handoverGrace rather than the visibility timeout.
func (q *queue) handoverSentAt(now time.Time) time.Time {
	return now.Add(min(handoverGrace, q.lim.visibility) - q.lim.visibility)
}

// consumerByID returns the attached consumer with that id, or nil. The
// caller holds mu.
func (q *queue) consumerByID(id string) *consumer {
	for _, c := range q.consumers {
		if c.id == id && c.drain == nil {
			return c
		}
	}
	return nil
}

// deliverLocked hands ready messages to consumers with room, oldest first,
// one per consumer in turn. The caller holds mu.
func (q *queue) deliverLocked(now time.Time) {
	if len(q.consumers) == 0 {
		return
	}
	batches := make(map[*consumer][]*mvccpb.KeyValue)
	var rows []*message // for the drainer, a queue's only consumer when it has one
	for q.ready.Len() > 0 {
		c := q.nextConsumerLocked()
		if c == nil {
			break
		}
		seq := heap.Pop(&q.ready).(uint64)
		m, ok := q.msgs[seq]
		if !ok || m.holder != nil {
			continue // acknowledged or delivered since it was pushed
		}
		m.holder, m.sentAt = c, now.UnixNano()
		m.attempts++
		if m.attempts > 1 {
			q.stats.Redelivered++
		}
		q.stats.Delivered++
		if c.drain != nil {
			c.drained++
			rows = append(rows, m)
			continue
		}
		c.unacked[seq] = m
		batches[c] = append(batches[c], &mvccpb.KeyValue{
			Key:     []byte(DeliveryKey(c.prefix, q.name, seq, m.tail)),
			Value:   m.value,
			Version: int64(m.attempts),
		})
	}
	for _, c := range q.consumers { // in consumer order, so the output is deterministic
		if c.drain != nil && len(rows) > 0 {
			c.drain.deliverRows(rows)
		}
		if b := batches[c]; len(b) > 0 {
			c.out.Deliver(b)
		}
	}
}

// nextConsumerLocked returns the next consumer in turn that has room, or
// nil. The caller holds mu.
func (q *queue) nextConsumerLocked() *consumer {
	n := len(q.consumers)
	for i := range n {
		c := q.consumers[(q.rr+i)%n]
		limit := c.prefetch
		switch {
		case c.drain != nil:
			limit = 2 * q.set.BatchRows // one batch in flight, the next one gathering
		case limit == 0:
			limit = q.lim.prefetch
		}
		if c.holds() < limit {
			q.rr = (q.rr + i + 1) % n
			return c
		}
	}
	return nil
}

// ack removes the message seq if its tail matches, wherever it is, and
// reports whether it did.
func (q *queue) ack(seq uint64, tail string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.msgs[seq]
	if !ok || m.tail != tail {
		if !ok && seq != 0 {
			q.early.add(seq, tail)
		}
		return false
	}
	q.removeLocked(m)
	q.deliverLocked(now)
	return true
}

// removeLocked drops an acknowledged message. The caller holds mu and
// delivers afterwards.
func (q *queue) removeLocked(m *message) {
	if m.holder != nil {
		m.holder.forget(m.seq)
	}
	delete(q.msgs, m.seq)
	delete(q.ids, m.id)
	delete(q.parked, m.seq)
	q.done.add(m.id, struct{}{})
	q.bytes -= m.size()
	q.stats.Acked++
	q.settledLocked(m.seq)
}

// ackIfHeld acknowledges the message if this member holds it, without
// remembering a miss.
func (q *queue) ackIfHeld(seq uint64, tail string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := q.msgs[seq]
	if !ok || m.tail != tail {
		return false
	}
	q.removeLocked(m)
	q.deliverLocked(now)
	return true
}

// ackDuringHandover is ackIfHeld after any handover in progress: a message
// being handed over is then either still here or already at the new
// dispatcher, never in between.
func (q *queue) ackDuringHandover(seq uint64, tail string, now time.Time) bool {
	q.handoverMu.Lock()
	defer q.handoverMu.Unlock()
	return q.ackIfHeld(seq, tail, now)
}

// ackMessages removes msgs, whoever holds them, and delivers once.
func (q *queue) ackMessages(msgs []*message, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		if q.msgs[m.seq] == m {
			q.removeLocked(m)
		}
	}
	q.deliverLocked(now)
}

// isDone reports whether id was acknowledged recently. The caller holds mu.
func (q *queue) isDone(id MsgID) bool {
	_, ok := q.done.get(id)
	return ok
}

// holdLocked keeps copies for an unreachable dispatcher, once per id. The
// caller holds mu.
func (q *queue) holdLocked(msgs []incoming) {
	for _, in := range msgs {
		if q.heldIDs[in.id] || q.isDone(in.id) {
			continue
		}
		q.heldIDs[in.id] = true
		q.held = append(q.held, in)
		q.bytes += int64(len(in.value) + len(in.tail))
	}
}

// takeAll removes and returns every message this member holds for the
// queue, dispatched ones first in number order (with their numbers), then
// held copies in arrival order, for handing them to the dispatcher. The
// messages its consumers held are taken too: the new dispatcher delivers
// them again.
func (q *queue) takeAll() []incoming {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failWaitersLocked(errMovedOn)
	seqs := make([]uint64, 0, len(q.msgs))
	for seq := range q.msgs {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	out := make([]incoming, 0, len(seqs)+len(q.held))
	for _, seq := range seqs {
		m := q.msgs[seq]
		in := incoming{id: m.id, tail: m.tail, value: m.value, seq: seq, attempts: int(m.attempts), consumer: q.parked[seq], trace: m.trace}
		if m.holder != nil && m.holder.drain == nil {
			in.consumer = m.holder.id
		}
		out = append(out, in)
	}
	out = append(out, q.held...)
	q.msgs = make(map[uint64]*message)
	q.ids = make(map[MsgID]struct{})
	q.parked = make(map[uint64]string)
	q.ready = nil
	q.held = nil
	q.heldIDs = make(map[MsgID]bool)
	q.bytes = 0
	for _, c := range q.consumers {
		if c.drain == nil {
			c.unacked = make(map[uint64]*message)
		}
		c.drained = 0
	}
	return out
}

// putBack returns messages that could not be handed over: dispatched ones
// back into the queue (with their numbers), copies back to the held list.
func (q *queue) putBack(msgs []incoming, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var numbered, copies []incoming
	for _, in := range msgs {
		if in.seq != 0 {
			numbered = append(numbered, in)
		} else {
			copies = append(copies, in)
		}
	}
	q.holdLocked(copies)
	q.enqueueLocked(numbered, now, false)
}

// adoptHeldLocked moves held copies into the queue on its new dispatcher.
// The caller holds mu.
func (q *queue) adoptHeldLocked(now time.Time) {
	if len(q.held) == 0 {
		return
	}
	held := q.held
	for _, in := range held {
		q.bytes -= int64(len(in.value) + len(in.tail))
	}
	q.held = nil
	q.heldIDs = make(map[MsgID]bool)
	q.enqueueLocked(held, now, false)
}

// becomeDispatcherLocked prepares the queue for dispatching at epoch:
// epoch e numbers its messages from (e-1)<<32 + 1, above every number an
// earlier epoch can have given (epoch 1 from 1), so an acknowledgement
// never removes another epoch's message; held copies join the queue. The
// caller holds mu.
func (q *queue) becomeDispatcherLocked(epoch uint64) {
	if floor := (max(epoch, 1)-1)<<32 + 1; q.nextSeq < floor {
		q.nextSeq = floor
	}
	if len(q.held) > 0 {
		q.adoptHeldLocked(time.Now())
	}
}

// holding reports whether this member holds any message of the queue.
func (q *queue) holding() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs) > 0 || len(q.held) > 0
}

// addConsumer registers a consumer and delivers to it.
func (q *queue) addConsumer(c *consumer, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.consumers = append(q.consumers, c)
	for seq, m := range q.msgs { // messages handed over while it held them
		if c.drain == nil && q.parked[seq] == c.id {
			delete(q.parked, seq)
			m.holder = c
			c.unacked[seq] = m
		}
	}
	q.deliverLocked(now)
}

// removeConsumer unregisters c; its unacknowledged messages are ready again
// and go to the other consumers.
func (q *queue) removeConsumer(c *consumer, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, o := range q.consumers {
		if o == c {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			break
		}
	}
	q.releaseLocked(c, func(*message) bool { return true })
	q.deliverLocked(now)
}

// expire makes messages unacknowledged past the visibility timeout ready
// again, and delivers.
func (q *queue) expire(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	deadline := now.Add(-q.lim.visibility).UnixNano()
	for _, c := range q.consumers {
		if c.drain != nil {
			continue
		}
		q.releaseLocked(c, func(m *message) bool { return m.sentAt < deadline })
	}
	for seq := range q.parked {
		if m, ok := q.msgs[seq]; !ok || m.sentAt < deadline {
			delete(q.parked, seq)
			if ok {
				heap.Push(&q.ready, seq)
			}
		}
	}
	q.deliverLocked(now)
}

// releaseLocked returns the messages c holds that match to the ready heap.
func (q *queue) releaseLocked(c *consumer, match func(*message) bool) {
	var seqs []uint64
	if c.drain != nil { // a drainer keeps no map: find its messages
		for seq, m := range q.msgs {
			if m.holder == c && match(m) {
				seqs = append(seqs, seq)
			}
		}
	} else {
		for seq, m := range c.unacked {
			if match(m) {
				seqs = append(seqs, seq)
			}
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		m := q.msgs[seq]
		c.forget(seq)
		m.holder = nil
		heap.Push(&q.ready, seq)
	}
}

// holds is how many unacknowledged messages c holds.
func (c *consumer) holds() int {
	if c.drain != nil {
		return c.drained
	}
	return len(c.unacked)
}

// forget drops message seq from what c holds.
func (c *consumer) forget(seq uint64) {
	if c.drain != nil {
		c.drained--
		return
	}
	delete(c.unacked, seq)
}

// QueueStatus is a queue as /status shows it.
type QueueStatus struct {
	Name       string `json:"name"`
	Dispatcher string `json:"dispatcher"`
	Epoch      uint64 `json:"epoch"`
	Rows       int    `json:"depth_rows"`
	Held       int    `json:"held_copies"`
	Bytes      int64  `json:"depth_bytes"`
	Unacked    int    `json:"unacked"`
	Consumers  int    `json:"consumers"`
	// LocalConsumers are the consumer watches on this member, wherever
	// the dispatcher is.
	LocalConsumers int        `json:"local_consumers"`
	Stats          queueStats `json:"stats"`
	// Ack is the queue's ack mode; Backup the member holding copies of
	// its messages (ack=replicated), "" for none.
	Ack    AckMode `json:"ack"`
	Backup string  `json:"backup,omitempty"`
	// LastInsertError is the last failed ClickHouse insert of a ch: queue
	// this member dispatched, kept after inserts succeed again; nil when
	// none failed.
	LastInsertError *InsertError `json:"last_insert_error,omitempty"`
}

// InsertError describes a failed insert for /status. Message is redacted
// and cut: it never holds a password, and holds at most ~512 bytes of
// ClickHouse's text (which may echo row data).
type InsertError struct {
	Time    time.Time `json:"time"`
	Table   string    `json:"table"`
	Class   string    `json:"class"`
	Code    int       `json:"code,omitempty"`
	Status  int       `json:"http_status,omitempty"`
	Message string    `json:"message"`
}

func (q *queue) status() QueueStatus {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueStatus{Name: q.name, Rows: len(q.msgs), Held: len(q.held), Bytes: q.bytes, Consumers: len(q.consumers), Stats: q.stats,
		LastInsertError: q.lastInsertError, Ack: q.set.Ack}
	if b := q.backupMember.Load(); b != 0 {
		st.Backup = formatMember(b)
	}
	for _, c := range q.consumers {
		st.Unacked += c.holds()
	}
	return st
}

// seqHeap is a min-heap of sequence numbers.
type seqHeap []uint64

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h seqHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *seqHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *seqHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
