package dispatch

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"chute/dispatch/qlog"
	"chute/gossip"
	"chute/kv"
)

// MsgID identifies a message across the cluster: the member that accepted
// the put and that member's counter. Copies of one message held by several
// members (broadcast while the dispatcher was unreachable) share it.
type MsgID struct {
	Origin uint64
	N      uint64
}

// message is one queued message. It is kept to 80 bytes, one size class
// of the allocator: a queue may hold millions. Its number is where the
// queue keeps it (msgStore), the state of its delivery to an ordinary
// consumer is in the queue's out and parked maps, and its trace, when the
// put was traced, in the queue's traces: those concern few messages at a
// time. id, tail and value never change once it is queued, so the drainer
// reads them without the queue's lock; only a message of a queue without
// a drainer may have value and region copied to the heap, under the
// queue's lock (rehomeValues).
//
// With a queue log, value is its record's bytes in the log's mapping
// (custody.go), off the Go heap, and region keeps that mapping: value is
// valid while the message is reachable. What hands value to something
// that may outlive the message (a watch event, a frame to another
// member) copies it, or carries region along (incoming.region).
type message struct {
	id       MsgID
	tail     string
	value    []byte
	region   *qlog.Region // maps value; nil when value is on the heap
	lseq     uint64       // its record in the queue log; 0 for none (memory only)
	attempts int32        // deliveries so far
	state    msgState     // guarded by the queue's mu
}

func (m *message) size() int64 { return int64(len(m.value) + len(m.tail)) }

// rehome copies the value to the Go heap when it is a view of a segment
// the queue log deleted, whose disk space the mapping keeps. The caller
// holds the queue's mu, and no batch in flight reads the message.
func (m *message) rehome() {
	if m.region.Deleted() {
		m.value, m.region = slices.Clone(m.value), nil
	}
}

// heapValue returns the value on the Go heap: a copy when it is a view of
// the queue log, which is valid only while the message is reachable.
func (m *message) heapValue() []byte {
	if m.region == nil {
		return m.value
	}
	return slices.Clone(m.value)
}

// msgState says where a queued message is.
type msgState uint8

const (
	// msgReady: waiting to be delivered (its number is in the ready heap).
	msgReady msgState = iota
	// msgDrained: delivered to the queue's drainer, which a queue has at
	// most one of (Manager.ensureDrainer), counted in its drained.
	msgDrained
	// msgOut: delivered to an ordinary consumer, named by the queue's
	// out, and in that consumer's unacked.
	msgOut
	// msgParked: handed over while delivered to a consumer not attached
	// here yet, named by the queue's parked.
	msgParked
)

// delivery is a message delivered to an ordinary consumer.
type delivery struct {
	c      *consumer
	sentAt int64 // unix nanoseconds of the delivery
}

// parking is a handed-over message waiting for the consumer it was
// delivered to on the previous dispatcher.
type parking struct {
	consumer string // its id
	sentAt   int64  // unix nanoseconds, backdated (handoverSentAt)
}

// consumer is one consumer watch of a queue.
type consumer struct {
	id       string
	prefix   string // spelling of its key, used for its delivery keys
	out      kv.Deliveries
	unacked  map[uint64]*message // by seq; nil for a drainer, which counts them in drained
	drained  int                 // messages a drainer holds
	prefetch int                 // its bound on unacknowledged messages; 0: the queue's
	drain    *drainer            // a ClickHouse drainer, which is woken instead of given deliveries: its messages never expire, it retries them itself
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
	// log is the member's queue log, where every message and held copy
	// has its record until it leaves; nil: memory only.
	log *qlog.Log

	// handoverMu serialises handovers with the forwards that must follow
	// them.
	handoverMu sync.Mutex

	// lastUse is when the member last looked the queue up (queueFor,
	// lookup), as Manager.tick said then: a queue unused for forgetAfter
	// and holding nothing is forgotten (forget.go).
	lastUse atomic.Int64

	mu      sync.Mutex // guards everything below
	set     Settings   // from /config/queues/{name}, refreshed by reconcile
	lim     limits     // of set
	nextSeq uint64
	// epoch is the last epoch this member dispatched the queue in (0:
	// never), doneFor the epoch of the last record naming another
	// member that came from this one which it sent its DONE for.
	epoch, doneFor uint64
	// awaiting are the members whose hand-over may still come, until
	// awaitUntil: the member this one took the queue from, alive, and
	// after a failover every other alive member, which may hold copies
	// of puts made while the dispatcher was unreachable. Nothing is
	// delivered meanwhile (awaitPrevious). Each maps to whether it was
	// asked if it holds any. nil: none.
	awaiting   map[uint64]bool
	awaitUntil time.Time
	// lost is set when, after this process did not run for a while, the
	// record named another member (Manager.afterPause): nothing is
	// delivered until the queue is handed over or dispatched here again.
	lost bool
	// pause is the manager's pause fence (pause.go); nil: none.
	pause *pauseFence
	msgs  msgStore // by seq
	// ids are the ids of msgs while indexed, for the lookups of
	// seenBeforeLocked. Until a lookup needs it the index stays empty:
	// a queue of puts made here or forwarded by their origin (arrival)
	// never looks an id up, and adds and removes none.
	ids     idIndex
	indexed bool
	ready   readySeqs // seqs of messages to deliver; stale entries are skipped
	// out are the messages delivered to ordinary consumers (msgOut), by
	// seq: at most their prefetch each.
	out map[uint64]delivery
	// parked names, by seq, the consumer a handed-over message was
	// delivered to on the previous dispatcher (msgParked), until that
	// consumer is attached here (it then holds it, without a second
	// delivery) or the visibility timeout passes (it is ready again).
	parked map[uint64]parking
	// traces are the traces of the traced puts' messages, by seq; nil
	// when there are none.
	traces map[uint64]*msgTrace
	bytes  int64
	// freed is closed when bytes next fall, waking the puts waiting for
	// room; nil while none waits.
	freed     chan struct{}
	consumers []*consumer
	rr        int // next consumer to try
	stats     queueStats

	lastInsertError *InsertError // of its drainer; nil when none failed

	// forgotten is set when the member forgot the queue: whoever looked
	// it up before takes the queue that replaced it (lockCurrent).
	forgotten bool

	waiters  map[uint64]*putWaiter // by seq: puts waiting for their rows (ack=inserted)
	released []uint64              // seqs left since the backup was last told

	// backupMu orders full copies to a new backup before the copies of
	// later puts; backupMember is the member holding a full copy, 0 none.
	backupMu     sync.RWMutex
	backupMember atomic.Uint64
	// backupBoot is the run of backupMember's process (its serf boot tag)
	// when it took the full copy: a backup back under its name lost what
	// it kept (its log gives the copies back as held ones), and gets a
	// full copy again. Set with backupMember, under backupMu.
	backupBoot atomic.Pointer[string]
	// stale are members that may keep copies of this queue for this
	// member though they are not its backup (passed over, replaced, a
	// full copy cut short), until one of them answers a RESET OK
	// (resetStale); true while one is on its way. Guarded by staleMu.
	staleMu sync.Mutex
	stale   map[uint64]bool

	// held are copies kept for a dispatcher that was unreachable, in
	// arrival order, until they can be handed to the elected one.
	held    []incoming
	heldIDs map[MsgID]bool
	// superseded and taken say, while held copies are out for a
	// hand-over (handing), which of them to drop should they come back
	// (putBack): those kept for a run of a dispatcher that replaced them
	// (supersedeLocked), and copies of puts a dispatcher took from
	// another member (takenLocked), at most maxReturning of each. Both
	// are emptied once nothing is out: they name copies kept before they
	// came, not those kept after.
	superseded []copyOwner
	taken      []*doneSet
	// droppedOwn counts the copies handed back that this member dropped
	// as its own, left its custody (Manager.dropLeftLocked), since the
	// last DONE reported them.
	droppedOwn int
	// handing and handingBytes are the messages taken for a handover and
	// not yet answered by the dispatcher: still in this member's custody,
	// so /status and the depth metric go on counting them as held.
	handing      int
	handingBytes int64
	// done remembers recently acknowledged ids, so that a late copy of an
	// acknowledged message is not queued again.
	done *doneSet
	// copiesFrom are the origins of the copies this queue ever took
	// (arrivedCopy); nil until the first. A put forwarded by its origin can
	// meet an earlier copy of itself only if its origin is here.
	copiesFrom map[uint64]struct{}
	// early remembers acknowledgements of numbered messages this member
	// did not hold yet (a handover still on its way), so the message is
	// dropped when it arrives.
	early *recent[uint64, string] // seq -> tail
	// renamed are handed-over messages that a consumer holds under a
	// number this queue had given already (two members claimed the queue
	// at once and numbered from the same floor), by that number: the next
	// acknowledgement of the number with the same tail is theirs, not the
	// message that has the number here. nil when none.
	renamed map[uint64]renaming
	// tried are the batches an insert sent to ClickHouse and gave up when
	// the drainer stopped (a hand-over) or the member that handed them
	// over had (peerpb.QueueMessage.Batch), by the number of their first
	// row: the drainer forms each again, the same rows in the same order,
	// before anything else of theirs, so that its dedup token, or its
	// block's checksum, is the first attempt's, and ClickHouse drops it if
	// that landed. nil when none.
	tried map[uint64]triedBatch
	// sent are the batches in flight whose marks markOnBackup gives the
	// backup, their rows by the number of their first row, until they
	// settle or are given up (then tried): a new backup's full copy
	// (copyTo) carries them, as it carries tried's. nil when none.
	sent map[uint64]int
}

// triedBatch is a batch of queue.tried.
type triedBatch struct {
	rows int
	at   time.Time // when it was given up or arrived: its rows have triedWait to come
	rec  uint64    // its record in the queue log (recTried); 0 for none
}

// triedWait bounds the wait for the rows of a tried batch that came in a
// hand-over: they come in chunks, and a hand-over cut short leaves the
// batch incomplete for good, to go with what came.
const triedWait = 5 * time.Second

// renaming is a handed-over message renumbered while a consumer holds it
// under its old number (queue.renamed).
type renaming struct {
	tail string
	to   uint64 // its number here
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
	// Waited counts the puts this member's clients made that found the
	// queue full and waited for room, taken in the end or refused.
	Waited uint64 `json:"waited"`
}

func newQueue(name string, set Settings) *queue {
	return &queue{
		name: name, recordKey: RecordKey(name), settingsKey: SettingsKey(name), set: set, lim: set.limits(), nextSeq: 1,
		out: make(map[uint64]delivery), parked: make(map[uint64]parking),
		heldIDs: make(map[MsgID]bool),
		waiters: make(map[uint64]*putWaiter),
		done:    newDoneSet(doneIDs),
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
	// owner is the dispatcher, and its run, a backup's copy was kept for
	// (recBackupOf), nil for none: read back from the log, the copy is
	// handed over saying so. On that dispatcher, such a copy handed back
	// has Manager.ownRun (dropLeftLocked).
	owner    *copyOwner
	batch    int    // heads a tried batch of this many rows (queue.tried); 0 for none
	batchRec uint64 // the queue log record of that mark (recTried); 0 for none
	trace    *msgTrace
	lseq     uint64 // its record in this member's queue log; 0 for none yet
	// region maps value when value is a view of the queue log (message.region).
	region *qlog.Region
}

// hasRoom is roomLocked, taking mu.
func (q *queue) hasRoom(msgs []incoming) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.roomLocked(msgs)
}

// bump adds one to c, a counter of q.stats, taking mu.
func (q *queue) bump(c *uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	*c++
}

// roomSignal returns a channel closed when the queue next frees bytes.
func (q *queue) roomSignal() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.freed == nil {
		q.freed = make(chan struct{})
	}
	return q.freed
}

// freedLocked wakes the puts waiting for room (roomSignal). The caller
// holds mu.
func (q *queue) freedLocked() {
	if q.freed != nil {
		close(q.freed)
		q.freed = nil
	}
}

// roomLocked reports whether msgs fit under the byte cap. The caller
// holds mu.
func (q *queue) roomLocked(msgs []incoming) bool {
	var n int64
	for _, m := range msgs {
		n += int64(len(m.value) + len(m.tail))
	}
	return q.bytes+n <= q.lim.maxBytes
}

// numbersLeftLocked reports whether n more messages can be numbered
// without going past maxSeq. The caller holds mu.
func (q *queue) numbersLeftLocked(n int) bool {
	return q.nextSeq <= maxSeq && maxSeq-q.nextSeq+1 >= uint64(n)
}

// arrival is how messages reached a queue, which decides whether their
// ids are looked up for duplicates (enqueueLocked). The lookups, two
// misses in large tables per message, stood out in profiles of txn
// batches and forwarded puts (docs/benchmarks.md).
type arrival uint8

const (
	// arrivedCopy: handed over, held for an unreachable dispatcher, taken
	// over from a backup, put back after a failed handover. Every id is
	// looked up, and its origin noted in copiesFrom.
	arrivedCopy arrival = iota
	// arrivedForwarded: puts forwarded by the member that made them, which
	// waits for this answer (peerpb.ForwardBatch.puts). Its ids were made
	// for these puts and sent once; the only earlier copies there can be
	// are those the origin held when an earlier forward of them failed,
	// which arrive as copies: the ids are looked up only if copiesFrom has
	// their origin.
	arrivedForwarded
	// arrivedLocal: puts made on this member and still running; their ids
	// are new here and never looked up.
	arrivedLocal
	// arrivedHanded: copies from another member (a handover, copies held
	// for an unreachable dispatcher), looked up as arrivedCopy. A number
	// they carry of this member's epoch or a later one was given by a
	// dispatcher of the queue before it started over at epoch 1 (its
	// record deleted): it is replaced, as this member may have given it
	// to another message, and a delete of that message's delivery key,
	// sent again, would remove this one.
	arrivedHanded
)

// enqueueLocked appends msgs in order, skipping ids already held or
// recently acknowledged (looked up as how says), and delivers what it can.
// The caller holds mu and checked the room. With collect it returns the
// messages it added, with their numbers.
func (q *queue) enqueueLocked(msgs []incoming, now time.Time, how arrival, collect bool) (added []incoming) {
	// The messages are allocated together, a txn's or a handover chunk's
	// in one slice, which lives until the last of them leaves: they
	// mostly leave together, in a batch or in order.
	var slab []message
	for i, in := range msgs {
		if q.seenBeforeLocked(in.id, how) {
			releaseLog(q.log, in.lseq, in.batchRec) // a second copy: the first keeps its record
			continue
		}
		if in.seq == 0 {
			// Not numbered by an earlier dispatcher: no early ack.
		} else if ack, ok := q.early.get(in.seq); ok && (ack == in.tail || ack == earlyAck(in.tail, in.consumer)) {
			q.early.forget(in.seq) // acknowledged before it arrived
			q.done.add(in.id)
			releaseLog(q.log, in.lseq, in.batchRec)
			continue
		}
		seq := in.seq
		if seq == 0 || seq > maxSeq || q.msgs.get(seq) != nil || how == arrivedHanded && epochOfSeq(seq) >= max(q.epoch, 1) {
			for q.nextSeq <= maxSeq && q.msgs.get(q.nextSeq) != nil {
				q.nextSeq++
			}
			if q.nextSeq > maxSeq {
				q.holdLocked([]incoming{in}) // no number left: kept, not numbered past maxSeq
				continue
			}
			seq = q.nextSeq
			if in.seq != 0 && in.consumer != "" {
				// Its consumer acknowledges the old number: see renamed.
				if q.renamed == nil {
					q.renamed = make(map[uint64]renaming)
				}
				q.renamed[in.seq] = renaming{tail: in.tail, to: seq}
			}
		}
		q.nextSeq = max(q.nextSeq, seq+1) // numbers only grow: none is reused
		if in.batch > 0 {
			q.setTriedLocked(seq, triedBatch{rows: in.batch, at: now, rec: in.batchRec})
		}
		if len(slab) == 0 {
			slab = make([]message, len(msgs)-i)
		}
		m := &slab[0]
		slab = slab[1:]
		*m = message{id: in.id, tail: in.tail, value: in.value, region: in.region, lseq: in.lseq, attempts: int32(in.attempts)}
		q.msgs.put(seq, m)
		if q.indexed {
			q.ids.add(m)
		}
		if in.trace != nil {
			if q.traces == nil {
				q.traces = make(map[uint64]*msgTrace)
			}
			q.traces[seq] = in.trace
		}
		q.bytes += m.size()
		q.stats.Enqueued++
		if collect {
			added = append(added, incoming{id: m.id, tail: m.tail, value: m.value, region: m.region, seq: seq})
		}
		if in.consumer != "" {
			sentAt := q.handoverSentAt(now).UnixNano()
			if c := q.consumerByID(in.consumer); c != nil {
				m.state = msgOut
				q.out[seq] = delivery{c: c, sentAt: sentAt}
				c.unacked[seq] = m
			} else {
				m.state = msgParked
				q.parked[seq] = parking{consumer: in.consumer, sentAt: sentAt}
			}
			continue
		}
		q.ready.push(seq)
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
	if len(q.consumers) == 0 || len(q.awaiting) > 0 || q.lost || q.pause.holds() {
		return
	}
	batches := make(map[*consumer][]*mvccpb.KeyValue)
	drained := false // rows went to the drainer, a queue's only consumer when it has one
	for q.ready.len() > 0 {
		c := q.nextConsumerLocked()
		if c == nil {
			break
		}
		seq := q.ready.pop()
		m := q.msgs.get(seq)
		if m == nil || m.state != msgReady {
			continue // acknowledged or delivered since it was pushed
		}
		if c.drain != nil {
			q.drainLocked(c, m)
			drained = true
			continue
		}
		q.countDeliveryLocked(m)
		m.state = msgOut
		q.out[seq] = delivery{c: c, sentAt: now.UnixNano()}
		c.unacked[seq] = m
		batches[c] = append(batches[c], &mvccpb.KeyValue{
			Key:     []byte(DeliveryKey(c.prefix, q.name, seq, m.tail)),
			Value:   m.heapValue(), // the watch may send it after the message left
			Version: int64(m.attempts),
		})
	}
	for _, c := range q.consumers { // in consumer order, so the output is deterministic
		if c.drain != nil && drained {
			c.drain.wake()
		}
		if b := batches[c]; len(b) > 0 {
			c.out.Deliver(b)
		}
	}
}

// countDeliveryLocked counts a delivery of m: its attempts and the
// queue's stats. The caller holds mu.
func (q *queue) countDeliveryLocked(m *message) {
	m.attempts++
	if m.attempts > 1 {
		q.stats.Redelivered++
	}
	q.stats.Delivered++
}

// drainLocked delivers m, ready, to the drainer's consumer c. The caller
// holds mu.
func (q *queue) drainLocked(c *consumer, m *message) {
	q.countDeliveryLocked(m)
	m.state = msgDrained
	c.drained++
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
			limit = (max(q.set.MaxInflightInserts, 1) + 1) * q.set.BatchRows // batches in flight, the next one gathering
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
// reports whether it did; with consumer set, only if it is delivered to
// that consumer (ackLocked).
func (q *queue) ack(seq uint64, tail, consumer string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ackLocked(seq, tail, consumer, now, true)
}

// ackLocked removes the message an acknowledgement of number seq with
// tail names (see renamedLocked), delivers, and reports whether it
// removed one. An acknowledgement that names its consumer (a delete of
// /q/{name}/c/{id}/{seq}/{key}) removes only a message out or parked
// with that consumer: a consumer allowed to write under its own key
// alone acknowledges its own deliveries, not another's. With early, an
// acknowledgement of a number not held here is remembered for a handover
// still on its way (earlyAck). The caller holds mu.
func (q *queue) ackLocked(seq uint64, tail, consumer string, now time.Time, early bool) bool {
	seq = q.renamedLocked(seq, tail)
	m := q.msgs.get(seq)
	if m == nil || m.tail != tail {
		if early && m == nil && seq != 0 {
			q.early.add(seq, earlyAck(tail, consumer))
		}
		return false
	}
	if consumer != "" && q.deliveredToLocked(seq, m) != consumer {
		return false
	}
	q.removeLocked(seq, m)
	q.stats.Acked++
	q.deliverLocked(now)
	return true
}

// removeLocked drops an acknowledged message, number seq; the caller
// counts the acknowledgement (queueStats.Acked) where it was made here.
// The caller holds mu and delivers afterwards.
func (q *queue) removeLocked(seq uint64, m *message) {
	releaseLog(q.log, q.removeKeepRecordLocked(seq, m))
}

// removeKeepRecordLocked is removeLocked except that it returns the
// message's record in the queue log (0: none) for the caller to release,
// as ackRows does for many at a time.
func (q *queue) removeKeepRecordLocked(seq uint64, m *message) uint64 {
	switch m.state {
	case msgDrained:
		if c := q.drainerLocked(); c != nil {
			c.drained--
		}
	case msgOut:
		delete(q.out[seq].c.unacked, seq)
		delete(q.out, seq)
	case msgParked:
		delete(q.parked, seq)
	}
	q.msgs.remove(seq)
	if q.indexed {
		if q.ids.remove(m); q.msgs.len() == 0 {
			q.ids, q.indexed = idIndex{}, false // lookups index again, when any come
		}
	}
	if q.traces != nil {
		if delete(q.traces, seq); len(q.traces) == 0 {
			q.traces = nil // a map never shrinks: drop it once the traced puts are gone
		}
	}
	q.done.add(m.id)
	q.bytes -= m.size()
	q.freedLocked()
	q.settledLocked(seq)
	return m.lseq
}

// drainerLocked returns the queue's drainer, nil when it has none. The
// caller holds mu.
func (q *queue) drainerLocked() *consumer {
	for _, c := range q.consumers {
		if c.drain != nil {
			return c
		}
	}
	return nil
}

// ackIfHeld acknowledges the message if this member holds it, without
// remembering a miss.
func (q *queue) ackIfHeld(seq uint64, tail, consumer string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ackLocked(seq, tail, consumer, now, false)
}

// deliveredToLocked returns the id of the consumer message seq (m) is
// out or parked with; "" when it is with none. The caller holds mu.
func (q *queue) deliveredToLocked(seq uint64, m *message) string {
	switch m.state {
	case msgOut:
		return q.out[seq].c.id
	case msgParked:
		return q.parked[seq].consumer
	}
	return ""
}

// earlyAck is what the early acknowledgements remember of one: its tail,
// and with the consumer it named, "/" and that consumer's id (a tail
// has no "/"), so that it drops only a message handed over as delivered
// to that consumer (enqueueLocked).
func earlyAck(tail, consumer string) string {
	if consumer == "" {
		return tail
	}
	return tail + "/" + consumer
}

// renamedLocked returns the number an acknowledgement of seq with tail
// removes: a renamed message's new number the first time (see renamed),
// seq itself otherwise, so a second acknowledgement of seq is the
// message's that has the number here. Of the two a consumer may have
// meant, the one handed over goes first: if the ack was for the other,
// that one is delivered again (at-least-once) rather than lost. The caller
// holds mu.
func (q *queue) renamedLocked(seq uint64, tail string) uint64 {
	r, ok := q.renamed[seq]
	if !ok || r.tail != tail {
		return seq
	}
	delete(q.renamed, seq)
	if len(q.renamed) == 0 {
		q.renamed = nil
	}
	if m := q.msgs.get(r.to); m != nil && m.tail == tail {
		return r.to
	}
	return seq // gone already (delivered again under its new number and acknowledged)
}

// ackDuringHandover is ackIfHeld after any handover in progress: a message
// being handed over is then either still here or already at the new
// dispatcher, never in between.
func (q *queue) ackDuringHandover(seq uint64, tail, consumer string, now time.Time) bool {
	q.handoverMu.Lock()
	defer q.handoverMu.Unlock()
	return q.ackIfHeld(seq, tail, consumer, now)
}

// isDone reports whether id was acknowledged recently. The caller holds mu.
func (q *queue) isDone(id MsgID) bool {
	return q.done.has(id)
}

// seenBeforeLocked reports whether a message with id, arrived as how, is
// held already or was acknowledged recently; a copy's origin is noted
// first. The caller holds mu.
func (q *queue) seenBeforeLocked(id MsgID, how arrival) bool {
	switch how {
	case arrivedLocal:
		return false
	case arrivedForwarded:
		if _, ok := q.copiesFrom[id.Origin]; !ok {
			return false
		}
	default:
		if q.copiesFrom == nil {
			q.copiesFrom = make(map[uint64]struct{})
		}
		q.copiesFrom[id.Origin] = struct{}{}
	}
	q.indexLocked()
	return q.ids.has(id) || q.isDone(id)
}

// indexLocked fills the id index with the queued messages, if it is not
// filled already; from then on enqueueLocked and removeLocked keep it,
// until the queue is empty again. The caller holds mu.
func (q *queue) indexLocked() {
	if q.indexed {
		return
	}
	q.indexed = true
	for _, m := range q.msgs.all() {
		q.ids.add(m)
	}
}

// holdLocked keeps copies for an unreachable dispatcher, once per id. The
// caller holds mu.
func (q *queue) holdLocked(msgs []incoming) {
	for _, in := range msgs {
		if q.heldIDs[in.id] || q.isDone(in.id) {
			releaseLog(q.log, in.lseq, in.batchRec)
			continue
		}
		q.heldIDs[in.id] = true
		q.held = append(q.held, in)
		q.bytes += int64(len(in.value) + len(in.tail))
	}
}

// maxReturning bounds queue.superseded and queue.taken: a few calls
// come in the seconds a hand-over is out at most.
const maxReturning = 4

// supersedeLocked drops the held copies read back from the log that were
// kept for owner, a run of a dispatcher of the queue that has just said
// which copies it wants this member to keep (Manager.supersede), and
// those out for a hand-over should they come back. Copies kept for it
// since this process started (a takeover holding a backup set until it
// may number) are that run's latest word, and stay. The caller holds mu.
func (q *queue) supersedeLocked(owner copyOwner) {
	q.dropHeldLocked(func(in *incoming) bool { return in.owner.readBackFor(owner) })
	if q.handing > 0 && !slices.Contains(q.superseded, owner) {
		if len(q.superseded) == maxReturning {
			q.superseded = slices.Delete(q.superseded, 0, 1)
		}
		q.superseded = append(q.superseded, owner)
	}
}

// returnedLocked drops, of copies back from a hand-over that failed,
// those superseded or taken while they were out, their records
// released, and returns the rest. The caller holds mu.
func (q *queue) returnedLocked(copies []incoming) []incoming {
	if len(q.superseded) == 0 && len(q.taken) == 0 {
		return copies
	}
	kept := copies[:0]
	for _, in := range copies {
		if slices.ContainsFunc(q.superseded, in.owner.readBackFor) ||
			slices.ContainsFunc(q.taken, func(s *doneSet) bool { return s.has(in.id) }) {
			releaseLog(q.log, in.lseq, in.batchRec)
			continue
		}
		kept = append(kept, in)
	}
	return kept
}

// nothingOutLocked forgets what supersedeLocked and takenLocked noted
// for copies out for a hand-over, once none is. The caller holds mu.
func (q *queue) nothingOutLocked() {
	if q.handing == 0 {
		q.superseded, q.taken = nil, nil
	}
}

// dropHeldLocked drops the held copies drop reports, their records
// released, and returns how many. The caller holds mu.
func (q *queue) dropHeldLocked(drop func(*incoming) bool) int {
	kept := q.held[:0]
	for i := range q.held {
		in := &q.held[i]
		if !drop(in) {
			kept = append(kept, *in)
			continue
		}
		delete(q.heldIDs, in.id)
		q.bytes -= int64(len(in.value) + len(in.tail))
		releaseLog(q.log, in.lseq, in.batchRec)
	}
	dropped := len(q.held) - len(kept)
	clear(q.held[len(kept):])
	q.held = kept
	return dropped
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
	out := make([]incoming, 0, q.msgs.len()+len(q.held))
	for seq, m := range q.msgs.all() {
		in := incoming{id: m.id, tail: m.tail, value: m.value, region: m.region, seq: seq, attempts: int(m.attempts), trace: q.traces[seq], lseq: m.lseq,
			batch: q.tried[seq].rows, batchRec: q.tried[seq].rec}
		switch m.state {
		case msgOut:
			in.consumer = q.out[seq].c.id
		case msgParked:
			in.consumer = q.parked[seq].consumer
		}
		out = append(out, in)
	}
	out = append(out, q.held...)
	q.dropGoneTriedLocked() // marks no row carries
	q.msgs = msgStore{}
	q.ids, q.indexed = idIndex{}, false
	q.out = make(map[uint64]delivery)
	q.parked = make(map[uint64]parking)
	q.traces = nil
	q.ready = readySeqs{}
	q.held = nil
	q.heldIDs = make(map[MsgID]bool)
	q.lost = false
	q.renamed = nil // the numbers they name are no longer here
	q.tried = nil   // they go with their first rows
	q.handing, q.handingBytes = len(out), q.bytes
	q.superseded, q.taken = nil, nil // only words that come while these are out
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
// back into the queue (with their numbers), copies back to the held list,
// a backup's that name their owner too, ahead of the copies held while
// they were out (a put's, which came after them).
func (q *queue) putBack(msgs []incoming, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var numbered, copies []incoming
	for _, in := range msgs {
		if in.seq != 0 && in.owner == nil {
			numbered = append(numbered, in)
		} else {
			copies = append(copies, in)
		}
	}
	q.handing, q.handingBytes = 0, 0 // the rest is counted again where it goes
	// Held while these were out: after them, in put order.
	later := q.held
	q.held = nil
	for _, in := range later {
		delete(q.heldIDs, in.id)
	}
	q.holdLocked(q.returnedLocked(copies))
	for _, in := range later {
		if q.heldIDs[in.id] { // another copy of one back: it keeps its place
			q.bytes -= int64(len(in.value) + len(in.tail))
			releaseLog(q.log, in.lseq, in.batchRec)
			continue
		}
		q.heldIDs[in.id] = true
		q.held = append(q.held, in)
	}
	q.nothingOutLocked()
	q.enqueueLocked(numbered, now, arrivedCopy, false)
}

// handedOver notes that the dispatcher took msgs of a handover.
func (q *queue) handedOver(msgs []incoming) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handing -= len(msgs)
	for _, in := range msgs {
		q.handingBytes -= int64(len(in.value) + len(in.tail))
	}
	q.nothingOutLocked()
}

// dropDoneCopiesLocked drops the messages waiting to be delivered that
// arrived as copies and whose ids are now known done: held here while
// their dispatcher was unreachable, they joined the queue as this member
// entered its epoch, before the DONE of the member it took the queue
// from named them acknowledged there. Nothing was delivered meanwhile
// (awaiting). The caller holds mu.
func (q *queue) dropDoneCopiesLocked() {
	if len(q.copiesFrom) == 0 {
		return
	}
	var drop []uint64
	for seq, m := range q.msgs.all() {
		if _, copied := q.copiesFrom[m.id.Origin]; copied && m.state == msgReady && q.isDone(m.id) {
			drop = append(drop, seq)
		}
	}
	for _, seq := range drop {
		q.removeLocked(seq, q.msgs.get(seq)) // acknowledged elsewhere: not counted here
	}
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
	q.enqueueLocked(held, now, arrivedCopy, false)
}

// becomeDispatcherLocked prepares the queue for dispatching at epoch:
// epoch e numbers its messages from (e-1)<<32 + 1, above every number an
// earlier epoch can have given (epoch 1 from 1), so an acknowledgement
// never removes another epoch's message; held copies join the queue. The
// caller holds mu.
func (q *queue) becomeDispatcherLocked(epoch uint64, now time.Time) {
	if floor := (max(epoch, 1)-1)<<32 + 1; q.nextSeq < floor {
		q.nextSeq = floor
	}
	if epoch > q.epoch {
		q.lost = false // claimed again: a round that read the record before the pause's check does not clear it
	}
	q.epoch = max(q.epoch, epoch)
	if len(q.held) > 0 {
		q.adoptHeldLocked(now)
	}
}

// stopAwaitingLocked ends the wait for the previous dispatcher's
// hand-over (awaitPrevious) and delivers what waited for it, in number
// order: the handed-over messages, numbered in its epoch, first. The
// caller holds mu.
func (q *queue) stopAwaitingLocked(now time.Time) {
	if len(q.awaiting) == 0 {
		return
	}
	q.awaiting = nil
	q.deliverLocked(now)
}

// heardFromLocked ends the wait for member (awaiting): its hand-over is
// done, or it holds nothing; the last one's word starts the deliveries.
// The caller holds mu.
func (q *queue) heardFromLocked(member uint64, now time.Time) {
	if _, ok := q.awaiting[member]; !ok {
		return
	}
	if len(q.awaiting) == 1 {
		q.stopAwaitingLocked(now)
		return
	}
	delete(q.awaiting, member)
}

// holding reports whether this member holds any message of the queue.
func (q *queue) holding() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.msgs.len() > 0 || len(q.held) > 0
}

// addConsumer registers a consumer and delivers to it.
func (q *queue) addConsumer(c *consumer, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addConsumerLocked(c, now)
}

// addConsumerLocked is addConsumer for a caller holding mu.
func (q *queue) addConsumerLocked(c *consumer, now time.Time) {
	q.consumers = append(q.consumers, c)
	for seq, p := range q.parked { // messages handed over while it held them
		if m := q.msgs.get(seq); m != nil && c.drain == nil && p.consumer == c.id {
			delete(q.parked, seq)
			m.state = msgOut
			q.out[seq] = delivery{c: c, sentAt: p.sentAt}
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
	q.dropConsumerLocked(c)
	q.deliverLocked(now)
}

// dropConsumerLocked takes c out of the consumers and makes what it
// holds ready. The caller holds mu.
func (q *queue) dropConsumerLocked(c *consumer) {
	for i, o := range q.consumers {
		if o == c {
			q.consumers = slices.Delete(q.consumers, i, i+1) // clears the place it frees
			break
		}
	}
	q.releaseLocked(c, func(delivery) bool { return true })
}

// expire makes messages unacknowledged past the visibility timeout ready
// again, and delivers.
func (q *queue) expire(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	deadline := now.Add(-q.lim.visibility).UnixNano()
	expired := func(d delivery) bool { return d.sentAt < deadline }
	for i := len(q.consumers) - 1; i >= 0; i-- { // backwards: stalledLocked may take out the i-th
		c := q.consumers[i]
		if c.drain != nil {
			continue
		}
		if q.stalledLocked(c, expired) {
			continue
		}
		q.releaseLocked(c, expired)
	}
	for seq, p := range q.parked {
		if m := q.msgs.get(seq); m == nil || p.sentAt < deadline {
			delete(q.parked, seq)
			if m != nil {
				m.state = msgReady
				q.ready.push(seq)
			}
		}
	}
	q.deliverLocked(now)
}

// errStalled is why a consumer that does not read is removed.
const errStalled = "etcdserver: the consumer did not read its deliveries within the queue's visibility timeout; they went to other consumers: watch again"

// stalledLocked removes consumer c when a delivery of its expired while
// messages delivered to it still wait to be written to its client
// (kv.Stallable): redelivering to it piled copies up in its buffers, one
// per visibility timeout for as long as its connection stayed open (a
// frozen process keeps it so), while it kept its share of the queue.
// Its messages are ready for the others, and its watch or stream ends
// saying why. It reports whether it removed c. The caller holds mu.
func (q *queue) stalledLocked(c *consumer, expired func(delivery) bool) bool {
	st, ok := c.out.(kv.Stallable)
	if !ok || st.Backlog() == 0 {
		return false
	}
	due := false
	for seq := range c.unacked {
		if expired(q.out[seq]) {
			due = true
			break
		}
	}
	if !due {
		return false
	}
	q.dropConsumerLocked(c)
	st.Stall(errStalled)
	return true
}

// releaseLocked returns the messages c holds whose delivery matches to the
// ready heap; a drainer's are all returned (they never expire: only its
// removal releases them).
func (q *queue) releaseLocked(c *consumer, match func(delivery) bool) {
	var seqs []uint64
	if c.drain != nil { // a drainer keeps no map: find its messages
		for seq, m := range q.msgs.all() {
			if m.state == msgDrained {
				seqs = append(seqs, seq)
			}
		}
		c.drained -= len(seqs)
	} else {
		for seq := range c.unacked {
			if match(q.out[seq]) {
				seqs = append(seqs, seq)
			}
		}
		slices.Sort(seqs)
		for _, seq := range seqs {
			delete(c.unacked, seq)
			delete(q.out, seq)
		}
	}
	for _, seq := range seqs {
		q.msgs.get(seq).state = msgReady
		q.ready.push(seq)
	}
}

// holds is how many unacknowledged messages c holds.
func (c *consumer) holds() int {
	if c.drain != nil {
		return c.drained
	}
	return len(c.unacked)
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
	st := QueueStatus{Name: q.name, Rows: q.msgs.len(), Held: len(q.held) + q.handing, Bytes: q.bytes + q.handingBytes, Consumers: len(q.consumers), Stats: q.stats,
		LastInsertError: q.lastInsertError, Ack: q.set.Ack}
	if b := q.backupMember.Load(); b != 0 {
		st.Backup = gossip.ID(b).String()
	}
	for _, c := range q.consumers {
		st.Unacked += c.holds()
	}
	return st
}
