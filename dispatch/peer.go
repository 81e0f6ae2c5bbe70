package dispatch

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
)

// counters are the manager's cluster counters, for /status and metrics.
type counters struct {
	forwards   atomic.Uint64 // messages forwarded to another dispatcher
	broadcasts atomic.Uint64 // messages held by every member instead
	elections  atomic.Uint64 // dispatcher claims this member won locally
	handovers  atomic.Uint64 // messages handed to a new dispatcher
	// handoverFailures counts hand-overs of what this member holds that
	// the dispatcher did not take (unreachable, moved, full).
	handoverFailures atomic.Uint64
}

// PeerService returns the Queues service other members call; register it
// on the peer listener.
func (m *Manager) PeerService() peerpb.QueuesServer { return &queueService{m: m} }

// queueService serves the Queues peer service.
type queueService struct {
	peerpb.UnimplementedQueuesServer
	m *Manager
}

// toIncoming returns msgs by queue. A member sends one queue per call
// (checkPeerMessages holds it to that), so the messages of the first
// queue go in one slice made once, not grown message by message.
func toIncoming(msgs []*peerpb.QueueMessage) map[string][]incoming {
	out := make(map[string][]incoming, 1)
	if len(msgs) == 0 {
		return out
	}
	first := msgs[0].Queue
	same := make([]incoming, 0, len(msgs))
	for _, q := range msgs {
		if q.Queue == first {
			same = append(same, incomingOf(q))
		} else {
			out[q.Queue] = append(out[q.Queue], incomingOf(q))
		}
	}
	out[first] = same
	return out
}

// incomingOf returns q as a message arriving here.
func incomingOf(q *peerpb.QueueMessage) incoming {
	return incoming{id: MsgID{Origin: q.Origin, N: q.N}, tail: q.Tail, value: q.Value, seq: q.Seq,
		consumer: q.Consumer, attempts: int(q.Attempts), batch: int(q.Batch)}
}

// toMessages returns msgs as messages of queue name, for a call that
// holds copies (Hold); a forward stream's batches encode msgs instead
// (batchOf). Their structs are made in one allocation. Values that are
// views of the queue log are copied, into one buffer: the call may be
// sent after msgs are gone, and their mapping with them.
func toMessages(name string, msgs []incoming) []*peerpb.QueueMessage {
	n := 0
	for _, in := range msgs {
		if in.region != nil {
			n += len(in.value)
		}
	}
	buf := make([]byte, 0, n)
	out := make([]*peerpb.QueueMessage, len(msgs))
	structs := make([]peerpb.QueueMessage, len(msgs))
	for i, in := range msgs {
		v := in.value
		if in.region != nil {
			start := len(buf)
			buf = append(buf, v...)
			v = buf[start:len(buf):len(buf)]
		}
		q := &structs[i]
		q.Queue, q.Tail, q.Value, q.Origin, q.N, q.Seq = name, in.tail, v, in.id.Origin, in.id.N, in.seq
		q.Consumer, q.Attempts = in.consumer, int64(in.attempts)
		out[i] = q
	}
	return out
}

// Forward takes produce batches for queues this member dispatches, and
// backup frames from members whose queues it keeps copies of. Frames are
// applied in order; a batch whose put waits for more (its ack mode) is
// answered when that is done, while later frames go on.
func (s *queueService) Forward(stream grpc.BidiStreamingServer[peerpb.ForwardFrame, peerpb.ForwardResults]) error {
	from, _ := peer.CallerMember(stream.Context())
	ctx, cancel := context.WithCancel(stream.Context())
	var waits sync.WaitGroup
	defer waits.Wait()
	defer cancel() // before the wait: it ends the waits
	var sendMu sync.Mutex
	send := func(res *peerpb.ForwardResults) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(res)
	}
	// Frames are decoded into one RecvFrame, its buffer and arrays used
	// again for the next once nothing refers to the last (detached).
	var rf peerpb.RecvFrame
	defer rf.Done(false)
	var fw frameMsgs
	for applied := uint64(1); ; applied++ {
		if err := stream.RecvMsg(&rf); err != nil {
			return err
		}
		frame := &rf.ForwardFrame
		if len(frame.Batches) > forwardFrameBatches {
			return status.Errorf(codes.InvalidArgument, "dispatch: %d batches in one frame, at most %d", len(frame.Batches), forwardFrameBatches)
		}
		res := &peerpb.ForwardResults{Results: make([]*peerpb.ForwardResult, 0, len(frame.Batches)), Applied: applied}
		s.m.persistFrame(ctx, &fw, frame.Batches) // the frame's puts share one fsync
		for i := 0; i < len(frame.Batches); {
			b := frame.Batches[i]
			if b.Kind != peerpb.ForwardKind_PRODUCE {
				var err error
				if b.Kind == peerpb.ForwardKind_DONE {
					err = s.m.takeDone(from, b)
				} else if err = s.m.keepBackup(ctx, from, b); err == nil {
					s.m.supersede(from, b)
				}
				res.Results = append(res.Results, forwardResult(b.Id, err))
				i++
				continue
			}
			if fw.errs[i] != nil || len(b.Messages) == 0 {
				res.Results = append(res.Results, forwardResult(b.Id, fw.errs[i]))
				i++
				continue
			}
			name, how := b.Messages[0].Queue, arrivalOf(b, from)
			var span trace.Span
			var tr *msgTrace
			j := i + 1
			if b.Traceparent != "" {
				span, tr = s.m.acceptSpan(b.Traceparent, name, len(b.Messages))
			} else {
				for j < len(frame.Batches) && fw.joins(frame.Batches[j], j, name, how, from) {
					j++
				}
			}
			wait, errs := s.m.acceptRun(&fw, i, j, name, how, tr)
			for k := i; k < j; k++ {
				if errs != nil && errs[k-i] != nil || wait == nil {
					var err error
					if errs != nil {
						err = errs[k-i]
					}
					endSpan(span, err)
					res.Results = append(res.Results, forwardResult(frame.Batches[k].Id, err))
				}
			}
			if wait != nil {
				ids := make([]uint64, 0, j-i)
				for k := i; k < j; k++ {
					if errs == nil || errs[k-i] == nil {
						ids = append(ids, frame.Batches[k].Id)
					}
				}
				waits.Add(1)
				go func() {
					defer waits.Done()
					err := wait(ctx)
					endSpan(span, err)
					out := &peerpb.ForwardResults{Results: make([]*peerpb.ForwardResult, len(ids))}
					for k, id := range ids {
						out.Results[k] = forwardResult(id, err)
					}
					_ = send(out)
				}()
			}
			i = j
		}
		rf.Done(fw.detached(frame.Batches))
		fw.done()
		// Sent even with no result in it: the sender waits for applied.
		if err := send(res); err != nil {
			return err
		}
	}
}

func forwardResult(id uint64, err error) *peerpb.ForwardResult {
	r := &peerpb.ForwardResult{Id: id}
	if err != nil {
		st := status.Convert(err)
		r.Code, r.Message = uint32(st.Code()), st.Message()
	}
	return r
}

// madeBy reports whether every message of msgs was made by member.
func madeBy(msgs []*peerpb.QueueMessage, member uint64) bool {
	for _, q := range msgs {
		if q.Origin != member {
			return false
		}
	}
	return member != 0
}

// arrivalOf returns how the messages of b, a produce batch from member
// from, arrive: as forwarded puts when it says they are new puts and
// from made them all, as copies otherwise.
func arrivalOf(b *peerpb.ForwardBatch, from uint64) arrival {
	if b.Puts && madeBy(b.Messages, from) {
		return arrivedForwarded
	}
	return arrivedHanded
}

// frameMsgs is the produce batches of a forward frame, checked and in
// the queue log. The messages of the batches that passed are in one
// slice, in frame order, so a run of batches of one queue is one
// sub-slice of it, enqueued at once. A Forward stream keeps one for all
// its frames (persistFrame fills it again, done empties it): nothing
// keeps its messages once the frame is answered, for a queue copies
// what it enqueues.
type frameMsgs struct {
	msgs []incoming
	at   []int   // batch i's messages are msgs[at[i]:at[i+1]]
	errs []error // each batch's error: the batch is answered with it
}

// maxKeptFrameMsgs is the most messages a frameMsgs keeps room for from
// one frame to the next: a stream that once carried a frame of a
// backup's full copy does not keep megabytes for it.
const maxKeptFrameMsgs = 16 << 10

// done empties f for the next frame, letting go of what its messages
// refer to (values in the queue log's mapping, traces).
func (f *frameMsgs) done() {
	clear(f.msgs)
	clear(f.errs)
	f.msgs, f.errs, f.at = f.msgs[:0], f.errs[:0], f.at[:0]
	if cap(f.msgs) > maxKeptFrameMsgs {
		f.msgs = nil
	}
}

// detached reports whether nothing refers to batches, the frame f was
// made of, or to their values, once the frame's answers are made: they
// are all produce batches (a backup keeps its batch's messages as they
// came), and every message in the log holds its value as a view of the
// log's mapping (persistGroups), not of the frame.
func (f *frameMsgs) detached(batches []*peerpb.ForwardBatch) bool {
	for _, b := range batches {
		if b.Kind != peerpb.ForwardKind_PRODUCE {
			return false
		}
	}
	return inLog(f.msgs)
}

// batch returns batch i's messages: none for a batch of another kind or
// one that failed.
func (f *frameMsgs) batch(i int) []incoming { return f.run(i, i+1) }

// run returns the messages of batches i to j-1.
func (f *frameMsgs) run(i, j int) []incoming { return f.msgs[f.at[i]:f.at[j]:f.at[j]] }

// joins reports whether batch b, the frame's batch j, goes in one
// enqueue with the batches before it, of queue name and arrived as how:
// an untraced produce batch that passed its checks, of the same queue,
// arrived alike.
func (f *frameMsgs) joins(b *peerpb.ForwardBatch, j int, name string, how arrival, from uint64) bool {
	return b.Kind == peerpb.ForwardKind_PRODUCE && f.errs[j] == nil && b.Traceparent == "" &&
		len(b.Messages) > 0 && b.Messages[0].Queue == name && arrivalOf(b, from) == how
}

// persistFrame checks the produce batches of a forward frame and appends
// their messages to the queue log in one append, so that a frame's
// batches share one fsync. It fills f, empty (new, or done), and
// returns it.
func (m *Manager) persistFrame(ctx context.Context, f *frameMsgs, batches []*peerpb.ForwardBatch) *frameMsgs {
	f.at = slices.Grow(f.at[:0], len(batches)+1)[:len(batches)+1]
	f.errs = slices.Grow(f.errs[:0], len(batches))[:len(batches)]
	n := 0
	for _, b := range batches {
		if b.Kind == peerpb.ForwardKind_PRODUCE {
			n += len(b.Messages)
		}
	}
	// Room for every message at once: a group is a sub-slice of f.msgs
	// that grows in place as its batches are appended.
	if cap(f.msgs) < n {
		f.msgs = make([]incoming, 0, n)
	}
	f.msgs = f.msgs[:0]
	var groups []custodyGroup
	lim := peerLimits{maxKeyBytes: m.cfg.MaxKeyBytes, maxRequestBytes: m.cfg.MaxRequestBytes}
	var name string // of the last batch checked, whose epoch is epoch
	var epoch uint64
	for i, b := range batches {
		f.at[i] = len(f.msgs)
		if b.Kind != peerpb.ForwardKind_PRODUCE || len(b.Messages) == 0 {
			continue
		}
		if q := b.Messages[0].Queue; q != name {
			name, epoch = q, 0
			if validQueueName(q) {
				epoch = m.epochOf(q) // once per run of one queue, not per batch
			}
		}
		if f.errs[i] = lim.checkPeerMessages(b.Messages, epoch); f.errs[i] != nil {
			continue
		}
		start := len(f.msgs)
		for _, q := range b.Messages {
			f.msgs = append(f.msgs, incomingOf(q))
		}
		if m.keptForThisRun(b) {
			for k := start; k < len(f.msgs); k++ {
				f.msgs[k].owner = m.ownRun
			}
		}
		// The log's records are written per queue name: the batches of
		// one queue that follow each other are one group.
		if k := len(groups) - 1; k >= 0 && groups[k].name == name {
			groups[k].msgs = groups[k].msgs[:len(groups[k].msgs)+len(b.Messages)]
		} else {
			groups = append(groups, custodyGroup{name: name, msgs: f.msgs[start:]})
		}
	}
	f.at[len(batches)] = len(f.msgs)
	if err := m.persistGroups(ctx, recMessage, groups); err != nil {
		for i, b := range batches {
			if b.Kind == peerpb.ForwardKind_PRODUCE && f.errs[i] == nil {
				f.errs[i] = err
			}
		}
		f.msgs = f.msgs[:0]
		clear(f.at)
	}
	return f
}

// keptForThisRun reports whether b holds copies a backup kept for this
// run of the process and read back after a restart (ForwardBatch's
// backup_of and backup_boot). A run without a boot (tests, embedders)
// cannot tell its copies from an earlier run's: none is.
func (m *Manager) keptForThisRun(b *peerpb.ForwardBatch) bool {
	return b.BackupOf == m.cfg.MemberID && b.BackupBoot == m.cfg.Boot && m.cfg.Boot != "" && b.BackupOf != 0
}

// acceptRun enqueues the messages of batches i to j-1 of f, a run of
// produce batches of queue name arrived as how (tr traces them, nil for
// none), if this member dispatches the queue; FailedPrecondition tells
// the sender to read the record again. It returns what the run still
// waits for (its queue's ack mode), nil for nothing, and each batch's
// error, nil when none failed. The run is enqueued at once, one lock and
// one record lookup for all its puts; when it does not fit under the
// queue's byte cap its batches are tried one by one, as they would have
// been alone. What it does not enqueue is released from the queue log.
func (m *Manager) acceptRun(f *frameMsgs, i, j int, name string, how arrival, tr *msgTrace) (func(context.Context) error, []error) {
	msgs := f.run(i, j)
	if tr != nil {
		for k := range msgs {
			msgs[k].trace = tr
		}
	}
	fail := func(err error) []error {
		m.unpersist(msgs)
		errs := make([]error, j-i)
		for k := range errs {
			errs[k] = err
		}
		return errs
	}
	if rec, ok := m.record(name); !ok || rec.Member != m.cfg.MemberID {
		return nil, fail(status.Error(codes.FailedPrecondition, "dispatch: not the dispatcher of "+name))
	}
	q := m.queueFor(name)
	wait, err := m.enqueuePersisted(q, name, msgs, how)
	if err == nil {
		m.ensureDrainer(q)
		return wait, nil
	}
	if err != errOverCap || j-i == 1 {
		return nil, fail(err)
	}
	errs := make([]error, j-i)
	var waits []func(context.Context) error
	enqueued := false
	for k := i; k < j; k++ {
		w, err := m.enqueuePersisted(q, name, f.batch(k), how)
		if err != nil {
			m.unpersist(f.batch(k))
			errs[k-i] = err
			continue
		}
		enqueued = true
		if w != nil {
			waits = append(waits, w)
		}
	}
	if enqueued {
		m.ensureDrainer(q)
	}
	if len(waits) == 0 {
		return nil, errs
	}
	return func(ctx context.Context) error {
		for _, w := range waits {
			if err := w(ctx); err != nil {
				return err
			}
		}
		return nil
	}, errs
}

// Hold keeps copies for an unreachable dispatcher, under the queue's byte
// cap as a put would be.
func (s *queueService) Hold(ctx context.Context, r *peerpb.HoldRequest) (*peerpb.HoldResponse, error) {
	if err := s.m.checkPeerMessages(r.Messages); err != nil {
		return nil, err
	}
	for name, msgs := range toIncoming(r.Messages) { // one queue
		if err := s.m.holdHere(ctx, name, msgs); err != nil {
			return nil, err
		}
	}
	return &peerpb.HoldResponse{}, nil
}

// Ping answers that this member's queues serve, with its run.
func (s *queueService) Ping(_ context.Context, r *peerpb.PingRequest) (*peerpb.PingResponse, error) {
	resp := &peerpb.PingResponse{Boot: s.m.cfg.Boot}
	if r.Queue != "" && validQueueName(r.Queue) {
		resp.Holding = s.m.holdsAny(r.Queue)
	}
	return resp, nil
}

// holdsAny reports whether this member holds messages or copies of queue
// name, or is handing them over (its handoverMu held: they are out of the
// queue then, in flight): what a new dispatcher waiting for this
// member's hand-over asks (awaitPrevious).
func (m *Manager) holdsAny(name string) bool {
	q := m.lookup(name)
	if q == nil {
		return false
	}
	if !q.handoverMu.TryLock() {
		return true
	}
	defer q.handoverMu.Unlock()
	return q.holding()
}

// holdHere keeps copies of msgs on this member for an unreachable
// dispatcher, or refuses them all over the queue's byte cap.
func (m *Manager) holdHere(ctx context.Context, name string, msgs []incoming) error {
	q := m.queueFor(name)
	if err := m.persist(ctx, name, msgs); err != nil { // outside the queue's lock, as enqueueLocal
		return err
	}
	set := m.settingsAt(name, q.settingsKey)
	q = m.lockCurrent(q) // the fsync may have outlasted q
	defer q.mu.Unlock()
	q.applySettingsLocked(set, m.clock.Now())
	if !q.roomLocked(msgs) {
		m.unpersist(msgs) // counted by the member the put came to
		return errOverCap
	}
	q.holdLocked(msgs)
	return nil
}

// checkPeerMessages holds messages from another member to the client
// limits (peerLimits.checkPeerMessages), numbers to the epoch of this
// member's record of their queue.
func (m *Manager) checkPeerMessages(msgs []*peerpb.QueueMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	var epoch uint64
	if validQueueName(msgs[0].Queue) {
		epoch = m.epochOf(msgs[0].Queue)
	}
	return peerLimits{maxKeyBytes: m.cfg.MaxKeyBytes, maxRequestBytes: m.cfg.MaxRequestBytes}.checkPeerMessages(msgs, epoch)
}

// Consume serves a consumer hosted by another member.
func (s *queueService) Consume(r *peerpb.ConsumeRequest, stream grpc.ServerStreamingServer[peerpb.Deliveries]) error {
	m := s.m
	if !validQueueName(r.Queue) || r.Consumer == "" || strings.Contains(r.Consumer, "/") || len(r.Consumer) > m.cfg.MaxKeyBytes ||
		(r.Prefix != "q" && r.Prefix != "queue") {
		return status.Error(codes.InvalidArgument, "dispatch: consume: queue, consumer or prefix outside the key grammar")
	}
	rec, ok := m.record(r.Queue)
	if !ok || rec.Member != m.cfg.MemberID {
		return status.Error(codes.FailedPrecondition, "dispatch: not the dispatcher of "+r.Queue)
	}
	sink := newStreamSink()
	c := &consumer{id: r.Consumer, prefix: r.Prefix, out: sink, unacked: make(map[uint64]*message)}
	q := m.lockCurrent(m.queueFor(r.Queue))
	m.dispatchLocked(q, rec)
	q.addConsumerLocked(c, m.clock.Now())
	q.mu.Unlock()
	defer q.removeConsumer(c, m.clock.Now())
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-m.stop:
			return status.Error(codes.Unavailable, "dispatch: member stopping")
		case <-sink.stalled:
			return status.Error(codes.Aborted, errStalled)
		case <-sink.ready:
			for _, kvs := range sink.take() {
				out := &peerpb.Deliveries{}
				bytes := 0
				for _, kv := range kvs {
					if len(out.Deliveries) > 0 && bytes+len(kv.Value) > maxFrameBytes {
						if err := stream.Send(out); err != nil {
							return sink.err(err)
						}
						out, bytes = &peerpb.Deliveries{}, 0
					}
					out.Deliveries = append(out.Deliveries, &peerpb.Delivery{Key: kv.Key, Value: kv.Value, Attempt: kv.Version})
					bytes += len(kv.Value)
				}
				if err := stream.Send(out); err != nil {
					return sink.err(err)
				}
				sink.backlog.Add(-int64(len(kvs)))
			}
		}
	}
}

// Ack acknowledges a message of a queue this member dispatches. A member
// that no longer dispatches the queue passes the acknowledgement on to the
// one that does (its messages went there).
func (s *queueService) Ack(ctx context.Context, r *peerpb.AckRequest) (*peerpb.AckResponse, error) {
	m := s.m
	if !validQueueName(r.Queue) || r.Tail == "" || strings.Contains(r.Tail, "/") || len(r.Tail) > m.cfg.MaxKeyBytes ||
		strings.Contains(r.Consumer, "/") || len(r.Consumer) > m.cfg.MaxKeyBytes {
		return nil, status.Error(codes.InvalidArgument, "dispatch: ack: queue, key or consumer outside the key grammar")
	}
	if err := checkAckable(r.Queue); err != nil {
		return nil, err
	}
	if err := checkPeerSeq(r.Queue, r.Seq, m.epochOf(r.Queue)); err != nil {
		return nil, err
	}
	if rec, ok := m.record(r.Queue); ok && rec.Member != m.cfg.MemberID && m.alive(rec.Member) {
		if q := m.lookup(r.Queue); q == nil || !q.ackDuringHandover(r.Seq, r.Tail, r.Consumer, m.clock.Now()) {
			acked, err := m.ackRemote(ctx, rec.Member, Key{Queue: r.Queue, Seq: r.Seq, Tail: r.Tail, Consumer: r.Consumer})
			return &peerpb.AckResponse{Acked: acked}, err
		}
		return &peerpb.AckResponse{Acked: true}, nil
	}
	return &peerpb.AckResponse{Acked: m.ackHere(r.Queue, r.Seq, r.Tail, r.Consumer)}, nil
}

// forwarderFor returns the forward stream to member, opening it when needed.
func (m *Manager) forwarderFor(member uint64) (*forwarder, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.stop:
		// Shutdown closes the forwarders it finds under mu after closing
		// stop: one made now would run, and be waited for, forever.
		return nil, status.Error(codes.Unavailable, "dispatch: shutting down")
	default:
	}
	if f, ok := m.forwarders[member]; ok {
		return f, nil
	}
	addr, ok := m.peerAddr(member)
	if !ok {
		return nil, status.Error(codes.Unavailable, "dispatch: dispatcher is not alive")
	}
	f, err := m.newForwarder(member, addr)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	m.forwarders[member] = f
	return f, nil
}

// forward sends msgs of one queue to its dispatcher and waits for it to
// hold them. puts says they are new puts made on this member, which wait
// for the answer, not copies (peerpb.ForwardBatch.puts).
func (m *Manager) forward(ctx context.Context, member uint64, name string, msgs []incoming, puts bool, timeout time.Duration) error {
	f, err := m.forwarderFor(member)
	if err != nil {
		return err
	}
	span, traceparent := m.startForward(ctx, name, member, len(msgs))
	b, err := f.batchOf(name, msgs)
	if err == nil {
		b.Head.Traceparent, b.Head.Puts = traceparent, puts
		if o := msgs[0].owner; o != nil { // a chunk of a hand-over: all alike (chunkEnd)
			b.Head.BackupOf, b.Head.BackupBoot = o.member, o.boot
		}
		err = f.send(ctx, b, timeout)
	}
	endSpan(span, err)
	return err
}

// hold keeps msgs here and asks every other alive member to keep a copy,
// until a dispatcher is elected; they are handed to it then, once each.
// A member passed over (one a forward could not reach: markUnreachable)
// is not asked: on a dead path each put waited 2 s for its answer. Over
// the queue's byte cap here it keeps nothing and returns errOverCap.
func (m *Manager) hold(ctx context.Context, name string, msgs []incoming) error {
	if err := m.holdHere(ctx, name, msgs); err != nil {
		return err
	}
	m.metrics.broadcasts.Add(uint64(len(msgs)))
	if m.cluster == nil {
		return nil
	}
	req := &peerpb.HoldRequest{Messages: toMessages(name, msgs)}
	var wg sync.WaitGroup
	for _, p := range m.cluster.Peers() {
		if m.passedOver(p.ID) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(m.outgoing(ctx), 2*time.Second)
			defer cancel()
			conn, err := m.conn(p.Addr)
			if err != nil {
				return
			}
			if _, err := peerpb.NewQueuesClient(conn).Hold(cctx, req); err != nil {
				m.log.Debug("hold copy", "queue", name, "peer", gossip.ID(p.ID), "err", err)
			}
		}()
	}
	wg.Wait()
	return nil
}

// ackRemote sends an acknowledgement to the queue's dispatcher.
func (m *Manager) ackRemote(ctx context.Context, member uint64, k Key) (bool, error) {
	addr, ok := m.peerAddr(member)
	if !ok {
		return false, status.Error(codes.Unavailable, "dispatch: the queue's dispatcher is not reachable; retry")
	}
	conn, err := m.conn(addr)
	if err != nil {
		return false, status.Error(codes.Unavailable, err.Error())
	}
	cctx, cancel := context.WithTimeout(m.outgoing(ctx), forwardTimeout)
	defer cancel()
	r, err := peerpb.NewQueuesClient(conn).Ack(cctx, &peerpb.AckRequest{Queue: k.Queue, Seq: k.Seq, Tail: k.Tail, Consumer: k.Consumer})
	if err != nil {
		return false, status.Error(codes.Unavailable, "dispatch: acknowledging on the dispatcher: "+err.Error())
	}
	return r.Acked, nil
}
