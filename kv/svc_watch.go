package kv

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"chute/kv/mvcc"
)

// watchService is etcd's Watch service. Each stream has a receive loop that
// creates and cancels watchers, and a send loop (the handler's goroutine)
// that writes the stream's sendQueue. Watchers push to the queue without
// blocking, so a client that stops reading stalls only its own stream.
type watchService struct {
	pb.UnimplementedWatchServer
	store  *mvcc.Store
	queues Queues          // nil: no queue namespace
	authz  *authorizer     // checks each watch's keys as it is created
	wg     *sync.WaitGroup // the server's: receive loops are waited for at shutdown
	stop   <-chan struct{}
	// maxBytes is --max-request-bytes: a watch created with fragment set
	// gets its larger answers in fragments of about that size, as etcd's.
	maxBytes int
}

var _ pb.WatchServer = (*watchService)(nil)

// invalidWatchID is the watch id etcd answers a create it refuses for
// its range or its id with (clientv3.InvalidWatchID): the id asked for
// may be a live watch's, which a client would take as cancelled.
const invalidWatchID = -1

// Reasons etcd gives when it refuses a watch.
const (
	reasonEmptyRange  = "mvcc: watcher range is empty"
	reasonDuplicateID = "mvcc: duplicate watch ID provided on the WatchStream"
)

// watchStream is the state of one Watch call.
type watchStream struct {
	store  *mvcc.Store
	queues Queues
	queue  *sendQueue
	allow  func(*pb.WatchCreateRequest) (reason string, ok bool) // nil: every watch

	// mu guards watchers (nil once the stream closed), nextID and
	// progressDue. Lock
	// order: mu before the store's lock.
	mu       sync.Mutex
	watchers map[int64]streamWatch
	nextID   int64
	// progressDue: a progress request waits for the stream's watchers to
	// catch up (deferProgress). Guarded by mu.
	progressDue bool
	// fragmenting counts the stream's watches created with fragment
	// set: while there is none, the send loop sizes no answer. fragIDs
	// are their ids, under fragMu, a lock of their own: mu is held
	// through a consumer's creation, which may wait for a claim, and the
	// send loop must not.
	fragmenting atomic.Int32
	fragMu      sync.Mutex
	fragIDs     map[int64]bool
}

// streamWatch is one watch of a stream: a watcher of the store, or the
// watch of a queue's consumer key, which the store never sees.
type streamWatch struct {
	w        *mvcc.Watcher // nil for a consumer
	consumer func()        // a consumer's: cancels it
}

// stop ends the watch: a consumer leaves its queue, any other watcher
// leaves the store.
func (sw streamWatch) stop(s *mvcc.Store) {
	if sw.consumer != nil {
		sw.consumer()
		return
	}
	s.Unwatch(sw.w)
}

func (ws *watchService) Watch(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse]) error {
	st := &watchStream{store: ws.store, queues: ws.queues, queue: newSendQueue(), watchers: make(map[int64]streamWatch)}
	defer st.close()
	if ws.authz != nil {
		ctx := stream.Context()
		st.allow = func(cr *pb.WatchCreateRequest) (string, bool) { return ws.authz.allowWatch(ctx, cr) }
	}

	recvErr := make(chan error, 1)
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		recvErr <- st.recvLoop(stream)
	}()

	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ws.stop:
			return toGRPC(ErrStopped)
		case err := <-recvErr:
			if err != nil {
				return err
			}
			recvErr = nil // the client closed its side; keep sending until it goes
		case <-st.queue.ready:
			for _, it := range st.queue.take() {
				if err := st.send(stream, it.resp, ws.maxBytes); err != nil {
					return err
				}
				it.sent()
			}
		}
	}
}

// recvLoop handles the client's requests until it closes its side (nil) or
// the stream fails.
func (st *watchStream) recvLoop(stream grpc.BidiStreamingServer[pb.WatchRequest, pb.WatchResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !st.queue.waitRoom(stream.Context().Done()) {
			return stream.Context().Err()
		}
		switch r := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			st.create(r.CreateRequest)
		case *pb.WatchRequest_CancelRequest:
			st.cancel(r.CancelRequest.WatchId)
		case *pb.WatchRequest_ProgressRequest:
			st.progress()
		}
	}
}

func (st *watchStream) create(cr *pb.WatchCreateRequest) {
	r := mvcc.KeyRange{Key: cr.Key, End: cr.RangeEnd}
	if !r.Single() && !r.FromKey() && bytes.Compare(r.End, r.Key) <= 0 {
		st.refuse(invalidWatchID, reasonEmptyRange)
		return
	}
	if st.allow != nil {
		if reason, ok := st.allow(cr); !ok {
			// Under -1, as etcd refuses any watch: under the id asked for
			// (0 for one the server numbers), a client that matches
			// answers to watches by id took it for the stream's live
			// watch 0.
			st.refuse(invalidWatchID, reason)
			return
		}
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	if st.watchers == nil {
		return // the stream is closing
	}
	id := cr.WatchId
	if id == 0 { // clientv3.AutoWatchID: the server picks
		for st.taken(st.nextID) {
			st.nextID++
		}
		id = st.nextID
		st.nextID++
	} else if st.taken(id) {
		st.refuse(invalidWatchID, reasonDuplicateID) // not id: that is the live watch's
		return
	}
	if st.queues != nil && r.Single() && !dropsPuts(cr.Filters) && st.queues.Route(r.Key) == RouteConsumer {
		st.consume(id, r.Key)
		return
	}

	// Created goes out before any event: it is queued before the watcher
	// can be fed. Registering under mu keeps close from missing it. A
	// watch from the next write starts after the revision Created names,
	// as etcd's: a write the client makes once it has Created may land
	// before the watcher is registered, and is then caught up from the
	// log instead of missed. (cr was decoded for this call: nothing else
	// holds it.)
	rev := st.store.Rev()
	if cr.StartRevision == 0 {
		cr.StartRevision = rev + 1
	}
	st.queue.PushControl(&pb.WatchResponse{Header: st.store.Header(rev), WatchId: id, Created: true})
	st.watchers[id] = streamWatch{w: st.store.Watch(id, cr, st.queue)}
	if cr.Fragment {
		st.setFragments(id, true)
	}
}

// setFragments notes whether watch id asked for its answers in
// fragments.
func (st *watchStream) setFragments(id int64, on bool) {
	st.fragMu.Lock()
	defer st.fragMu.Unlock()
	if on == st.fragIDs[id] {
		return
	}
	if on {
		if st.fragIDs == nil {
			st.fragIDs = make(map[int64]bool)
		}
		st.fragIDs[id] = true
		st.fragmenting.Add(1)
		return
	}
	delete(st.fragIDs, id)
	st.fragmenting.Add(-1)
}

// send sends resp, in fragments when its watch asked for them and it
// holds more than one event and over maxBytes encoded: each fragment but
// the last has Fragment set, as etcd sends them, and holds events up to
// about maxBytes (at least one). clientv3 joins them into one answer. A
// client whose receive limit is near maxBytes (4 MiB, most non-Go gRPC
// clients' default) can then watch a revision that changed more than it
// could take in one message.
func (st *watchStream) send(stream grpc.ServerStream, resp *pb.WatchResponse, maxBytes int) error {
	if len(resp.Events) < 2 || maxBytes <= 0 || st.fragmenting.Load() == 0 || !st.fragments(resp.WatchId) || proto.Size(resp) <= maxBytes {
		return stream.SendMsg(resp)
	}
	events := resp.Events
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) {
			e := protowire.SizeBytes(proto.Size(events[n])) + 1 // the field's tag and length too
			if n > 0 && size+e > maxBytes {
				break
			}
			size += e
			n++
		}
		part := &pb.WatchResponse{Header: resp.Header, WatchId: resp.WatchId, Events: events[:n:n], Fragment: n < len(events)}
		if err := stream.SendMsg(part); err != nil {
			return err
		}
		events = events[n:]
	}
	return nil
}

// fragments reports whether watch id asked for its answers in fragments.
func (st *watchStream) fragments(id int64) bool {
	st.fragMu.Lock()
	defer st.fragMu.Unlock()
	return st.fragIDs[id]
}

// dropsPuts reports whether filters hold NOPUT. A watch of a consumer key
// that drops PUT events cannot take deliveries (PUT events): it is the
// store's watch of the consumer record, as in etcd, not a consumer that
// would hold the queue's messages and never see them.
func dropsPuts(filters []pb.WatchCreateRequest_FilterType) bool {
	return slices.Contains(filters, pb.WatchCreateRequest_NOPUT)
}

// taken reports whether the stream has a watch with id. The caller holds
// mu.
func (st *watchStream) taken(id int64) bool {
	_, ok := st.watchers[id]
	return ok
}

// consume registers the watch of a consumer key with the queues instead of
// the store: its events are the queue's deliveries. A consumer key the
// queues refuse (ConsumerChecker) is answered as etcd refuses a watch,
// created and canceled at once with the reason: clientv3 drops a cancel
// that follows a created answer without a word, and its channel just
// closed. The created answer goes before Consume, which may take a
// while (a claim of the queue) and deliver at once. The caller holds mu.
func (st *watchStream) consume(id int64, key []byte) {
	if cc, ok := st.queues.(ConsumerChecker); ok {
		if err := cc.CheckConsumer(key); err != nil {
			st.refuse(id, err.Error())
			return
		}
	}
	st.queue.PushControl(&pb.WatchResponse{Header: st.store.Header(st.store.Rev()), WatchId: id, Created: true})
	cancel, err := st.queues.Consume(key, &consumerSink{id: id, st: st})
	if err != nil {
		st.queue.PushControl(&pb.WatchResponse{Header: st.store.Header(st.store.Rev()), WatchId: id, Canceled: true, CancelReason: err.Error()})
		return
	}
	st.watchers[id] = streamWatch{consumer: cancel}
}

// consumerSink turns a queue's deliveries into PUT events of one watch.
type consumerSink struct {
	id      int64
	st      *watchStream
	backlog atomic.Int64 // messages delivered, not yet written to the client
	stalled atomic.Bool  // Stall ended the watch: deliveries are dropped
}

var _ Stallable = (*consumerSink)(nil)

func (c *consumerSink) Deliver(kvs []*mvccpb.KeyValue) {
	if c.stalled.Load() {
		return // the queue removed the consumer: nothing is delivered after
	}
	evs := make([]*mvccpb.Event, len(kvs))
	for i, kv := range kvs {
		evs[i] = &mvccpb.Event{Type: mvccpb.PUT, Kv: kv}
	}
	hdr := c.st.store.Header(c.st.store.Rev())
	for len(evs) > 0 {
		n, size := 1, len(evs[0].Kv.Key)+len(evs[0].Kv.Value)
		for n < len(evs) && size+len(evs[n].Kv.Key)+len(evs[n].Kv.Value) <= deliveryBytes {
			size += len(evs[n].Kv.Key) + len(evs[n].Kv.Value)
			n++
		}
		c.st.queue.pushCounted(&pb.WatchResponse{Header: hdr, WatchId: c.id, Events: evs[:n:n]}, &c.backlog)
		evs = evs[n:]
	}
}

// deliveryBytes bounds the keys and values of one answer carrying a
// consumer's deliveries (one message may exceed it alone). gRPC takes a
// message whole into its buffers whatever the client's flow-control
// window, and holds back only the next one (a stream's write quota, 64
// KiB): a client that read nothing was sent its whole prefetch in one
// answer as far as Backlog could tell, and kept its consumer.
const deliveryBytes = 64 << 10

// Backlog implements Stallable.
func (c *consumerSink) Backlog() int { return int(c.backlog.Load()) }

// Stall implements Stallable: the watch is answered canceled with
// reason after what it was sent before. Its entry stays in the stream
// until the client cancels it or the stream ends (Stall is called under
// the queue's lock, which the stream's own lock comes before).
func (c *consumerSink) Stall(reason string) {
	if c.stalled.Swap(true) {
		return
	}
	c.st.queue.PushControl(&pb.WatchResponse{Header: c.st.store.Header(c.st.store.Rev()), WatchId: c.id, Canceled: true, CancelReason: reason})
}

// refuse answers a create that cannot be served as etcd does: created and
// canceled at once, with the reason.
func (st *watchStream) refuse(id int64, reason string) {
	st.queue.PushControl(&pb.WatchResponse{
		Header:       st.store.Header(st.store.Rev()),
		WatchId:      id,
		Created:      true,
		Canceled:     true,
		CancelReason: reason,
	})
}

func (st *watchStream) cancel(id int64) {
	st.mu.Lock()
	sw, ok := st.watchers[id]
	delete(st.watchers, id)
	st.mu.Unlock()
	if !ok {
		return
	}
	st.setFragments(id, false)
	sw.stop(st.store)
	st.queue.PushControl(&pb.WatchResponse{Header: st.store.Header(st.store.Rev()), WatchId: id, Canceled: true})
}

// progress answers a progress request under watch id -1, as etcd does,
// with the current revision once every watcher of the stream has been
// sent all its events up to it: at once, or later (deferProgress), as etcd
// 3.5 answers. clientv3 takes the answer as every watch's resume point:
// the revision the slowest watcher was brought up to, sent while others
// were past it, made those watch again from there after a reconnect,
// their events twice (from revision 1 for a watch of the whole history
// beside them, or compacted).
func (st *watchStream) progress() {
	rev, current, ok := st.progressRev()
	switch {
	case !ok:
	case current:
		st.queue.PushControl(&pb.WatchResponse{Header: st.store.Header(rev), WatchId: -1})
	default:
		st.mu.Lock()
		start := !st.progressDue
		st.progressDue = true
		st.mu.Unlock()
		if start {
			go st.deferProgress()
		}
	}
}

// progressRev is the store's ProgressRev of the stream's watchers; ok
// false once the stream closed.
func (st *watchStream) progressRev() (rev int64, current, ok bool) {
	st.mu.Lock()
	if st.watchers == nil {
		st.mu.Unlock()
		return 0, false, false
	}
	ws := make([]*mvcc.Watcher, 0, len(st.watchers))
	for _, sw := range st.watchers {
		if sw.w != nil {
			ws = append(ws, sw.w)
		}
	}
	st.mu.Unlock()
	rev, current = st.store.ProgressRev(ws)
	return rev, current, true
}

// progressPoll is how often a deferred progress answer looks whether the
// stream's watchers caught up.
const progressPoll = 10 * time.Millisecond

// deferProgress answers the progress requests made while a watcher of the
// stream was behind, once, when none is (or gives up when the stream
// closes): one goroutine at a time per stream (progressDue).
func (st *watchStream) deferProgress() {
	t := time.NewTicker(progressPoll)
	defer t.Stop()
	for range t.C {
		rev, current, ok := st.progressRev()
		if !ok {
			return
		}
		if current {
			st.mu.Lock()
			st.progressDue = false
			st.mu.Unlock()
			st.queue.PushControl(&pb.WatchResponse{Header: st.store.Header(rev), WatchId: -1})
			return
		}
	}
}

// close removes the stream's watchers and drops what it had queued.
func (st *watchStream) close() {
	st.mu.Lock()
	ws := st.watchers
	st.watchers = nil
	st.mu.Unlock()
	for _, sw := range ws {
		sw.stop(st.store)
	}
	st.queue.close()
}
