package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/kv"
)

// localConsumer is a consumer watch on this member. It is bound either to
// the queue here (this member dispatches it) or to a Consume stream from
// the dispatcher. Its binding is guarded by Manager.mu.
type localConsumer struct {
	m     *Manager
	queue string
	c     *consumer

	attached *queue        // the local queue it is registered with, or nil
	remote   *remoteStream // the stream from a remote dispatcher, or nil
	// stalled is set once its watch was ended for not reading (stall):
	// it is bound to no queue or stream again.
	stalled atomic.Bool

	// from remembers which member delivered each unacknowledged delivery
	// key that came over a remote stream, so that its acknowledgement goes
	// back there: that member holds the message, or knows where it went.
	fromMu sync.Mutex
	from   map[string]uint64
}

// maxFrom bounds the delivery keys a consumer remembers the sender of.
const maxFrom = 4096

// noteFrom records the member that delivered key.
func (lc *localConsumer) noteFrom(key string, member uint64) {
	lc.fromMu.Lock()
	defer lc.fromMu.Unlock()
	if lc.from == nil {
		lc.from = make(map[string]uint64)
	}
	if len(lc.from) >= maxFrom {
		for k := range lc.from { // forget one; its ack falls back to the record
			delete(lc.from, k)
			break
		}
	}
	lc.from[key] = member
}

// takeFrom returns and forgets the member that delivered key.
func (lc *localConsumer) takeFrom(key string) (uint64, bool) {
	lc.fromMu.Lock()
	defer lc.fromMu.Unlock()
	id, ok := lc.from[key]
	delete(lc.from, key)
	return id, ok
}

// deliveredBy returns the member that delivered key to a consumer on this
// member over a remote stream, if one did.
func (m *Manager) deliveredBy(queue, key string) (uint64, bool) {
	m.mu.Lock()
	var lcs []*localConsumer
	for lc := range m.locals {
		if lc.queue == queue {
			lcs = append(lcs, lc)
		}
	}
	m.mu.Unlock()
	for _, lc := range lcs {
		if id, ok := lc.takeFrom(key); ok {
			return id, true
		}
	}
	return 0, false
}

// remoteStream feeds a local consumer from a remote dispatcher.
type remoteStream struct {
	member uint64
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream ended
}

func (r *remoteStream) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// bind attaches lc where the queue's dispatcher rec is.
func (m *Manager) bind(lc *localConsumer, rec Record) {
	m.mu.Lock()
	if _, live := m.locals[lc]; !live || lc.stalled.Load() {
		m.mu.Unlock()
		return
	}
	if rec.Member == m.cfg.MemberID || m.cluster == nil {
		lc.unbindRemote()
		if lc.attached == nil {
			m.mu.Unlock()
			q := m.queueFor(lc.queue) // reads settings from the KV: not under m.mu
			m.mu.Lock()
			if _, live := m.locals[lc]; !live || lc.attached != nil {
				m.mu.Unlock() // stopped or bound meanwhile
				return
			}
			lc.attached = q
			m.mu.Unlock()
			m.attachHere(lc, q, rec)
			return
		}
		m.mu.Unlock()
		return
	}
	if q := lc.attached; q != nil {
		lc.attached = nil
		defer q.removeConsumer(lc.c, m.clock.Now())
	}
	if lc.remote != nil && lc.remote.member == rec.Member && !lc.remote.ended() {
		m.mu.Unlock()
		return
	}
	lc.unbindRemote()
	addr, ok := m.peerAddr(rec.Member)
	if !ok {
		m.mu.Unlock()
		return // the dispatcher is not alive; the reconcile loop claims
	}
	ctx, cancel := context.WithCancel(peer.OutgoingContext(context.Background(), m.cfg.ClusterID, m.cfg.MemberID))
	rs := &remoteStream{member: rec.Member, cancel: cancel, done: make(chan struct{})}
	lc.remote = rs
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(rs.done)
		lc.consumeRemote(ctx, addr, rs.member)
	}()
}

// unbindRemote ends the remote stream, if any. The caller holds Manager.mu.
func (lc *localConsumer) unbindRemote() {
	if lc.remote != nil {
		lc.remote.cancel()
		lc.remote = nil
	}
}

// stop ends lc wherever it is bound.
func (lc *localConsumer) stop() {
	m := lc.m
	m.mu.Lock()
	lc.unbindRemote()
	q := lc.attached
	lc.attached = nil
	m.mu.Unlock()
	if q != nil {
		q.removeConsumer(lc.c, m.clock.Now())
	}
}

// consumeRemote relays the dispatcher's deliveries to the watch until the
// stream ends.
func (lc *localConsumer) consumeRemote(ctx context.Context, addr string, member uint64) {
	conn, err := peer.Dial(addr, lc.m.dialOpts...)
	if err != nil {
		return
	}
	defer conn.Close()
	stream, err := peerpb.NewQueuesClient(conn).Consume(ctx, &peerpb.ConsumeRequest{Queue: lc.queue, Consumer: lc.c.id, Prefix: lc.c.prefix})
	if err != nil {
		return
	}
	for {
		batch, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				lc.m.log.Debug("remote consumer stream ended", "queue", lc.queue, "consumer", lc.c.id, "err", err)
			}
			if st, ok := status.FromError(err); ok && st.Code() == codes.Aborted && st.Message() == errStalled {
				lc.stall() // the dispatcher removed it (stalledLocked)
			}
			return
		}
		// Before the batch goes in: a stream the dispatcher ends while
		// this waits takes the batch with it (the dispatcher delivers
		// its messages again), where after it the client's backlog grew
		// by a batch with each new stream.
		if !lc.waitForClient(ctx) {
			return
		}
		kvs := make([]*mvccpb.KeyValue, len(batch.Deliveries))
		for i, d := range batch.Deliveries {
			kvs[i] = &mvccpb.KeyValue{Key: d.Key, Value: d.Value, Version: d.Attempt}
			lc.noteFrom(string(d.Key), member)
		}
		lc.c.out.Deliver(kvs)
	}
}

// relayBacklog is how many messages a remote consumer's watch may have
// waiting for its client, at most, before the relay stops reading the
// stream; fewer for a queue whose prefetch is smaller.
const relayBacklog = 1024

// waitForClient holds the relay while the watch's client is the queue's
// prefetch (at most relayBacklog) messages behind, so that a client that
// does not read leaves them on the dispatcher's side of the stream, where
// its deliveries expire and the dispatcher removes it
// (queue.stalledLocked), rather than pile up here, a copy per visibility
// timeout. A client has at most prefetch deliveries unacknowledged: one
// that many behind has not read for a visibility timeout. With 1024, a
// frozen client of a queue of prefetch 64 was sent its messages again
// for 16 timeouts before the dispatcher saw it. It reports false when
// ctx ended.
//
// A client that stays that far behind for the queue's visibility timeout
// has its watch ended with the reason (stall), as the dispatcher ends a
// local one's; the dispatcher, which sees the batch this holds back, has
// removed it by then. Blocked here, the relay never read the stream's
// end, and the watch was left open for ever.
func (lc *localConsumer) waitForClient(ctx context.Context) bool {
	st, ok := lc.c.out.(kv.Stallable)
	if !ok {
		return true
	}
	set := lc.m.settingsOf(lc.queue)
	limit := min(relayBacklog, max(set.Prefetch, 1))
	var since time.Time
	for st.Backlog() >= limit {
		now := lc.m.clock.Now()
		if since.IsZero() {
			since = now
		} else if set.Visibility > 0 && now.Sub(since) >= set.Visibility {
			lc.stall()
			return false
		}
		t := lc.m.clock.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.Chan():
		}
	}
	return true
}

// stall ends lc's watch, whose client does not read, with the reason a
// dispatcher gives (errStalled), and keeps it from being bound again: a
// new stream sent the same messages to a watch that drops them.
func (lc *localConsumer) stall() {
	lc.stalled.Store(true)
	if st, ok := lc.c.out.(kv.Stallable); ok {
		st.Stall(errStalled)
	}
	lc.m.log.Info("consumer watch ended: its client did not read its deliveries", "queue", lc.queue, "consumer", lc.c.id)
}

// attachHere registers lc's consumer with q, which bind has just
// published as lc.attached, this member dispatching it in rec's epoch. A
// stop in between (the watch cancelled) found nothing to remove: the
// consumer is taken out again then, or it stayed with no watch, its
// share of the queue delivered to nobody until each visibility timeout.
func (m *Manager) attachHere(lc *localConsumer, q *queue, rec Record) {
	q.mu.Lock()
	m.dispatchLocked(q, rec)
	q.mu.Unlock()
	q.addConsumer(lc.c, m.clock.Now())
	m.mu.Lock()
	gone := lc.attached != q // stopped, or bound elsewhere meanwhile
	m.mu.Unlock()
	if gone {
		q.removeConsumer(lc.c, m.clock.Now())
	}
}

// localConsumers counts the consumer watches of a queue on this member.
func (m *Manager) localConsumers(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for lc := range m.locals {
		if lc.queue == name {
			n++
		}
	}
	return n
}

// streamSink is a remote consumer's Deliveries on its dispatcher: it
// queues batches for the Consume stream's sender. The queue bounds the
// messages outstanding by the prefetch, and removes a consumer whose
// deliveries expire while some still wait here (kv.Stallable: its member
// does not read the stream), so the list stays small.
type streamSink struct {
	mu      sync.Mutex // guards items
	items   [][]*mvccpb.KeyValue
	ready   chan struct{}
	backlog atomic.Int64  // messages queued or being sent, not yet sent
	stalled chan struct{} // closed by Stall: the sender ends the stream
	once    sync.Once
}

var _ kv.Stallable = (*streamSink)(nil)

func newStreamSink() *streamSink {
	return &streamSink{ready: make(chan struct{}, 1), stalled: make(chan struct{})}
}

func (s *streamSink) Deliver(kvs []*mvccpb.KeyValue) {
	s.backlog.Add(int64(len(kvs)))
	s.mu.Lock()
	s.items = append(s.items, kvs)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *streamSink) take() [][]*mvccpb.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := s.items
	s.items = nil
	return items
}

// Backlog implements kv.Stallable.
func (s *streamSink) Backlog() int { return int(s.backlog.Load()) }

// Stall implements kv.Stallable: the Consume stream ends, with reason.
func (s *streamSink) Stall(string) { s.once.Do(func() { close(s.stalled) }) }

// err is the error a Consume stream ends with when sending failed with
// err: why the consumer was removed, if it was.
func (s *streamSink) err(err error) error {
	select {
	case <-s.stalled:
		return status.Error(codes.Aborted, errStalled)
	default:
		return err
	}
}

// reconcileRemoteTimeout bounds one handover or hold call.
const reconcileRemoteTimeout = 10 * time.Second
