package dispatch

import (
	"container/heap"
	"sort"
	"sync"
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

// message is one queued message.
type message struct {
	seq      uint64
	id       MsgID
	tail     string
	value    []byte
	holder   *consumer // delivered to, not yet acknowledged; nil when ready
	sentAt   time.Time
	attempts int // deliveries so far
}

func (m *message) size() int64 { return int64(len(m.value) + len(m.tail)) }

// consumer is one consumer watch of a queue.
type consumer struct {
	id      string
	prefix  string // spelling of its key, used for its delivery keys
	out     kv.Deliveries
	unacked map[uint64]*message
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
	name string
	lim  limits

	mu        sync.Mutex // guards everything below
	nextSeq   uint64
	msgs      map[uint64]*message
	ready     seqHeap // seqs of messages to deliver; stale entries are skipped
	ids       map[MsgID]uint64
	bytes     int64
	consumers []*consumer
	rr        int // next consumer to try
	stats     queueStats
}

// queueStats are a queue's counters since it was created here.
type queueStats struct {
	Enqueued    uint64 `json:"enqueued"`
	Delivered   uint64 `json:"delivered"`
	Redelivered uint64 `json:"redelivered"`
	Acked       uint64 `json:"acked"`
	Refused     uint64 `json:"refused"`
}

func newQueue(name string, lim limits) *queue {
	return &queue{name: name, lim: lim, nextSeq: 1, msgs: make(map[uint64]*message), ids: make(map[MsgID]uint64)}
}

// incoming is a message offered to a queue.
type incoming struct {
	id    MsgID
	tail  string
	value []byte
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
// delivers what it can. The caller holds mu and checked the room.
func (q *queue) enqueueLocked(msgs []incoming, now time.Time) {
	for _, in := range msgs {
		if _, dup := q.ids[in.id]; dup {
			continue
		}
		m := &message{seq: q.nextSeq, id: in.id, tail: in.tail, value: in.value}
		q.nextSeq++
		q.msgs[m.seq] = m
		q.ids[m.id] = m.seq
		q.bytes += m.size()
		heap.Push(&q.ready, m.seq)
		q.stats.Enqueued++
	}
	q.deliverLocked(now)
}

// deliverLocked hands ready messages to consumers with room, oldest first,
// one per consumer in turn. The caller holds mu.
func (q *queue) deliverLocked(now time.Time) {
	if len(q.consumers) == 0 {
		return
	}
	batches := make(map[*consumer][]*mvccpb.KeyValue)
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
		m.holder, m.sentAt = c, now
		m.attempts++
		if m.attempts > 1 {
			q.stats.Redelivered++
		}
		q.stats.Delivered++
		c.unacked[seq] = m
		batches[c] = append(batches[c], &mvccpb.KeyValue{
			Key:     []byte(DeliveryKey(c.prefix, q.name, seq, m.tail)),
			Value:   m.value,
			Version: int64(m.attempts),
		})
	}
	for _, c := range q.consumers { // in consumer order, so the output is deterministic
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
		if len(c.unacked) < q.lim.prefetch {
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
		return false
	}
	if m.holder != nil {
		delete(m.holder.unacked, seq)
	}
	delete(q.msgs, seq)
	delete(q.ids, m.id)
	q.bytes -= m.size()
	q.stats.Acked++
	q.deliverLocked(now)
	return true
}

// addConsumer registers a consumer and delivers to it.
func (q *queue) addConsumer(c *consumer, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.consumers = append(q.consumers, c)
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
	deadline := now.Add(-q.lim.visibility)
	for _, c := range q.consumers {
		q.releaseLocked(c, func(m *message) bool { return m.sentAt.Before(deadline) })
	}
	q.deliverLocked(now)
}

// releaseLocked returns the messages c holds that match to the ready heap.
func (q *queue) releaseLocked(c *consumer, match func(*message) bool) {
	seqs := make([]uint64, 0, len(c.unacked))
	for seq, m := range c.unacked {
		if match(m) {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		m := c.unacked[seq]
		delete(c.unacked, seq)
		m.holder = nil
		heap.Push(&q.ready, seq)
	}
}

// QueueStatus is a queue as /status shows it.
type QueueStatus struct {
	Name       string     `json:"name"`
	Dispatcher string     `json:"dispatcher"`
	Epoch      uint64     `json:"epoch"`
	Rows       int        `json:"depth_rows"`
	Bytes      int64      `json:"depth_bytes"`
	Unacked    int        `json:"unacked"`
	Consumers  int        `json:"consumers"`
	Stats      queueStats `json:"stats"`
}

func (q *queue) status() QueueStatus {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueStatus{Name: q.name, Rows: len(q.msgs), Bytes: q.bytes, Consumers: len(q.consumers), Stats: q.stats}
	for _, c := range q.consumers {
		st.Unacked += len(c.unacked)
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
