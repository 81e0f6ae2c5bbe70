package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/internal/backoff"
)

// forwardTimeout bounds how long a put waits for its dispatcher's answer
// before it is held by every member instead.
const forwardTimeout = 5 * time.Second

// forwarder is this member's long-lived Forward stream to one dispatcher.
// Produce calls queue batches; one goroutine writes them in frames (several
// batches per frame when they pile up), another reads the results and
// answers each call by batch id. A broken stream answers every pending
// call Unavailable and is reopened by the next batch.
//
// The frames go on a gRPC stream of the peer link, which the link's TLS
// and member check already guard. A plain TCP stream of the same
// frames, length-prefixed, with neither (an experiment, not kept) saved
// about 6% of the three nodes' CPU on the development machine: under
// txn-128 from 100 clients, four interleaved pairs, 3.31 against 3.51
// µs per row of the three (medians); unary, three pairs, within the
// noise (-5%, -4%, +3%). Not enough to authenticate and bound a second
// transport for.
type forwarder struct {
	m      *Manager
	member uint64
	addr   string // the member's peer address dialed
	conn   *grpc.ClientConn
	ctx    context.Context // carries this member's identity; cancelled by close
	cancel context.CancelFunc
	sendC  chan *peerpb.SendBatch
	// batches are the forwarder's SendBatches, their buffers kept from
	// one put to the next: a batch goes back once its frame is encoded.
	batches sync.Pool

	mu      sync.Mutex // guards pending and next
	pending map[uint64]*call
	next    uint64
}

// forwardFrameBatches bounds the batches in one frame.
const forwardFrameBatches = peerpb.MaxFrameBatches

func (m *Manager) newForwarder(member uint64, addr string) (*forwarder, error) {
	conn, err := peer.Dial(addr, m.dialOpts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(peer.OutgoingContext(context.Background(), m.cfg.ClusterID, m.cfg.MemberID))
	f := &forwarder{
		m: m, member: member, addr: addr, conn: conn, ctx: ctx, cancel: cancel,
		sendC:   make(chan *peerpb.SendBatch, 1024),
		pending: make(map[uint64]*call),
	}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		f.run()
	}()
	go func() {
		defer m.wg.Done()
		f.expireLoop()
	}()
	return f, nil
}

func (f *forwarder) close() {
	f.cancel()
	_ = f.conn.Close()
}

// call is one batch sent on a forwarder, waiting for its answer.
type call struct {
	f  *forwarder
	id uint64
	ch chan *peerpb.ForwardResult
	// deadline is when expireLoop answers the call Unavailable, in unix
	// nanoseconds; 0 while nobody waits. Guarded by f.mu.
	deadline int64
}

// start queues b on the stream (giving it an id) and returns the call to
// wait on; b is the forwarder's from then on. It waits at most
// forwardTimeout for room on the stream. A batch the stream could not
// encode is refused here, alone, rather than breaking the stream for
// every batch pending on it (see batchOf for its messages).
func (f *forwarder) start(ctx context.Context, b *peerpb.SendBatch) (*call, error) {
	if !b.Encodable() {
		if !utf8.ValidString(b.Head.Queue) {
			return nil, errQueueNotUTF8(b.Head.Queue)
		}
		return nil, status.Error(codes.InvalidArgument, "dispatch: a forward batch that cannot be encoded")
	}
	c := &call{f: f, ch: make(chan *peerpb.ForwardResult, 1)}
	f.mu.Lock()
	f.next++
	c.id = f.next
	f.pending[c.id] = c
	f.mu.Unlock()
	b.Head.Id = c.id
	select {
	case f.sendC <- b: // room: no timer needed (a put's hot path)
		return c, nil
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	select {
	case f.sendC <- b:
		return c, nil
	case <-ctx.Done():
		c.forget()
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-f.ctx.Done():
		c.forget()
		return nil, status.Error(codes.Unavailable, "dispatch: forwarder closed")
	}
}

func (c *call) forget() {
	c.f.mu.Lock()
	delete(c.f.pending, c.id)
	c.f.mu.Unlock()
}

// wait returns the receiver's answer: nil when it did what the batch
// asked, its error otherwise (a status error), Unavailable when no answer
// came within timeout (give or take expireEvery) or ctx ended first.
func (c *call) wait(ctx context.Context, timeout time.Duration) error {
	defer c.forget()
	c.f.mu.Lock()
	c.deadline = c.f.m.clock.Now().Add(timeout).UnixNano()
	c.f.mu.Unlock()
	select {
	case r := <-c.ch:
		if r.Code == 0 {
			return nil
		}
		return status.Error(codes.Code(r.Code), r.Message)
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-c.f.ctx.Done():
		return status.Error(codes.Unavailable, "dispatch: forwarder closed")
	}
}

// expireEvery is how often a forwarder looks for calls past their
// deadline: one sweep instead of a timer per put.
const expireEvery = 100 * time.Millisecond

// expireLoop answers Unavailable the calls whose deadline passed, until
// the forwarder closes.
func (f *forwarder) expireLoop() {
	tick := f.m.clock.NewTicker(expireEvery)
	defer tick.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case now := <-tick.Chan():
			f.expire(now)
		}
	}
}

// expire answers Unavailable the calls whose deadline is before now.
func (f *forwarder) expire(now time.Time) {
	msg := "dispatch: no answer from " + gossip.ID(f.member).String()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, c := range f.pending {
		if c.deadline != 0 && c.deadline < now.UnixNano() {
			c.deadline = 0
			c.answer(&peerpb.ForwardResult{Id: id, Code: uint32(codes.Unavailable), Message: msg})
		}
	}
}

// send sends b and waits up to timeout for the answer.
func (f *forwarder) send(ctx context.Context, b *peerpb.SendBatch, timeout time.Duration) error {
	c, err := f.start(ctx, b)
	if err != nil {
		return err
	}
	return c.wait(ctx, timeout)
}

// complete answers the call waiting for r, if any.
func (f *forwarder) complete(r *peerpb.ForwardResult) {
	f.mu.Lock()
	c := f.pending[r.Id]
	f.mu.Unlock()
	if c != nil {
		c.answer(r)
	}
}

// answer hands r to the call's waiter, unless it has an answer already.
func (c *call) answer(r *peerpb.ForwardResult) {
	select {
	case c.ch <- r:
	default:
	}
}

// failAll answers every pending call Unavailable.
func (f *forwarder) failAll(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, c := range f.pending {
		c.answer(&peerpb.ForwardResult{Id: id, Code: uint32(codes.Unavailable), Message: msg})
	}
}

// run owns the stream until the forwarder closes.
func (f *forwarder) run() {
	client := peerpb.NewQueuesClient(f.conn)
	b := backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	for f.ctx.Err() == nil {
		var first *peerpb.SendBatch
		select {
		case first = <-f.sendC:
		case <-f.ctx.Done():
			return
		}
		sctx, scancel := context.WithCancel(f.ctx)
		stream, err := client.Forward(sctx)
		if err != nil {
			scancel()
			f.answer(first, codes.Unavailable, err.Error())
			f.failAll(err.Error())
			f.refuseFor(b.Next(), err.Error())
			continue
		}
		b.Reset()
		err = f.pump(stream, first)
		scancel()
		f.failAll("dispatch: forward stream broke: " + errString(err))
	}
}

// refuseFor answers every batch Unavailable at once for d, so that puts
// fall back to holding without waiting while the dispatcher is down.
func (f *forwarder) refuseFor(d time.Duration, msg string) {
	timer := f.m.clock.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case b := <-f.sendC:
			f.answer(b, codes.Unavailable, msg)
		case <-timer.Chan():
			return
		case <-f.ctx.Done():
			return
		}
	}
}

func (f *forwarder) answer(b *peerpb.SendBatch, code codes.Code, msg string) {
	f.complete(&peerpb.ForwardResult{Id: b.Head.Id, Code: uint32(code), Message: msg})
}

// forwardWindow bounds the frames on a stream the dispatcher has not
// applied yet. Batches that come while the window is full wait on sendC and
// go in one frame when it opens: under load a frame carries many puts for
// one write, one queue log append and one answer, while a lone put still
// goes at once. One frame, not two: with a second frame in flight, the
// puts of a round trip went in two frames and two fsyncs (the
// three-node rows of docs/benchmarks.md measure what each node spends).
const forwardWindow = 1

// pump writes frames and reads results until the stream fails.
func (f *forwarder) pump(stream grpc.BidiStreamingClient[peerpb.ForwardFrame, peerpb.ForwardResults], first *peerpb.SendBatch) error {
	recvErr := make(chan error, 1)
	var applied atomic.Uint64        // frames the dispatcher has applied, from its answers
	var sent atomic.Uint64           // frames written, counted before each is
	opened := make(chan struct{}, 1) // a token when applied moved on
	f.m.wg.Add(1)
	go func() {
		defer f.m.wg.Done()
		for {
			res, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			for _, r := range res.Results {
				f.complete(r)
			}
			if res.Applied > sent.Load() {
				// sent-applied would wrap and shut the window for good.
				recvErr <- fmt.Errorf("dispatch: the dispatcher answered for %d frames, %d sent", res.Applied, sent.Load())
				return
			}
			if res.Applied > applied.Load() {
				applied.Store(res.Applied)
				select {
				case opened <- struct{}{}:
				default:
				}
			}
		}
	}()
	next := first
	var frame peerpb.SendFrame
	for {
		for sent.Load()-applied.Load() >= forwardWindow {
			select {
			case <-opened:
			case err := <-recvErr:
				return err
			case <-f.ctx.Done():
				_ = stream.CloseSend()
				return f.ctx.Err()
			}
		}
		frame.Batches = append(frame.Batches[:0], next)
		bytes, seqs := next.Bytes(), len(next.Head.Seqs)
		next = nil
	more:
		for len(frame.Batches) < forwardFrameBatches && bytes < maxFrameBytes {
			select {
			case b := <-f.sendC:
				if bytes+b.Bytes() > maxFrameBytes || seqs+len(b.Head.Seqs) > peerpb.MaxFrameSeqs {
					next = b // starts the next frame
					break more
				}
				frame.Batches = append(frame.Batches, b)
				bytes += b.Bytes()
				seqs += len(b.Head.Seqs)
			default:
				break more
			}
		}
		// Counted first: the answer may come before SendMsg returns.
		sent.Add(1)
		// kv's codec encodes the frame (SendFrame.AppendEncoded) before
		// SendMsg returns: the batches are free again then.
		if err := stream.SendMsg(&frame); err != nil {
			return err
		}
		for i, b := range frame.Batches {
			f.release(b)
			frame.Batches[i] = nil
		}
		if next != nil {
			continue
		}
		select {
		case next = <-f.sendC:
		case err := <-recvErr:
			return err
		case <-f.ctx.Done():
			_ = stream.CloseSend()
			return f.ctx.Err()
		}
	}
}

// batchOf returns a batch of f's holding msgs of queue name, their
// values copied: a value in the queue log's mapping may go once it
// returns. A queue name, key or consumer id that is not UTF-8 is
// refused: etcd keys are any bytes, but members pass them as protobuf
// strings, which gRPC's codec refuses to encode, and a frame it cannot
// encode ends the stream. The put fails InvalidArgument; a held copy
// stays held.
func (f *forwarder) batchOf(name string, msgs []incoming) (*peerpb.SendBatch, error) {
	if !utf8.ValidString(name) {
		return nil, errQueueNotUTF8(name)
	}
	b, _ := f.batches.Get().(*peerpb.SendBatch)
	if b == nil {
		b = new(peerpb.SendBatch)
	}
	b.Reset()
	n := 0
	for i := range msgs {
		n += len(msgs[i].value) + len(msgs[i].tail) + len(msgs[i].consumer) + len(name) + messageFieldBytes
	}
	b.Grow(n)
	var q peerpb.QueueMessage
	q.Queue = name
	for i := range msgs {
		in := &msgs[i]
		q.Tail, q.Value, q.Origin, q.N, q.Seq = in.tail, in.value, in.id.Origin, in.id.N, in.seq
		q.Consumer, q.Attempts, q.Batch = in.consumer, int64(in.attempts), uint32(in.batch)
		if !b.AddMessage(&q, true) {
			return nil, errKeyNotUTF8(name, in.tail)
		}
	}
	return b, nil
}

// messageFieldBytes bounds what a forwarded message's wire form takes
// besides its queue name, tail, value and consumer id: its tag and
// length and those of those four fields (at most 17 bytes, a value being
// under 2 MiB and a key under 16 KiB), and five varints of at most 11
// bytes with their tags.
const messageFieldBytes = 17 + 5*11

// maxPooledBatch is the largest buffer of messages a forwarder keeps for
// another batch: a full copy of a queue sent to a new backup goes in
// frames of megabytes, which are not kept.
const maxPooledBatch = 1 << 20

// release gives b back for another batch.
func (f *forwarder) release(b *peerpb.SendBatch) {
	if b.Cap() <= maxPooledBatch {
		f.batches.Put(b)
	}
}

func errQueueNotUTF8(name string) error {
	return status.Errorf(codes.InvalidArgument, "etcdserver: queue name %q is not UTF-8: members pass queue keys as UTF-8", name)
}

func errKeyNotUTF8(name, tail string) error {
	return status.Errorf(codes.InvalidArgument, "etcdserver: queue %q: key %q is not UTF-8: members pass queue keys as UTF-8", name, tail)
}

func errString(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return "closed"
	}
	return err.Error()
}
