package kv

import (
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/kv/mvcc"
)

// sendQueueEvents bounds the event responses waiting for one watch stream,
// as etcd's per-stream channel of 128 does. A watcher that finds it full
// falls behind and catches up from history later.
const sendQueueEvents = 128

// sendQueueControls bounds the control responses waiting for one watch
// stream before its receive loop waits (waitRoom): each answers a request
// of the client, and a client that sends requests without reading the
// answers made the server queue them without bound. Waiting, the loop
// reads no more requests, and gRPC's flow control holds the client back,
// as etcd's fixed control channel does.
const sendQueueControls = 1024

// sendQueue holds a watch stream's responses until its send loop writes them.
// Pushing never blocks: event responses are refused when the queue holds
// sendQueueEvents of them; control responses (created, canceled, progress)
// are always taken, since each answers a request of the client, and the
// stream reads no more requests while sendQueueControls of them wait.
type sendQueue struct {
	mu       sync.Mutex // guards items, events, controls, closed
	items    []queued
	events   int
	controls int
	closed   bool
	ready    chan struct{} // capacity 1: something was queued
	room     chan struct{} // capacity 1: the send loop took what was queued
}

// queued is a response waiting, and for a consumer's delivery the count
// of its watch's messages not yet written, which the send loop lowers
// once it wrote them.
type queued struct {
	resp    *pb.WatchResponse
	backlog *atomic.Int64 // nil but for deliveries
}

// sent notes that the response was written.
func (it queued) sent() {
	if it.backlog != nil {
		it.backlog.Add(-int64(len(it.resp.Events)))
	}
}

var _ mvcc.WatchSink = (*sendQueue)(nil)

func newSendQueue() *sendQueue {
	return &sendQueue{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// PushEvents queues an event response unless sendQueueEvents of them wait.
func (q *sendQueue) PushEvents(resp *pb.WatchResponse) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return true // the stream is gone; nothing will read it
	}
	if q.events >= sendQueueEvents {
		return false
	}
	q.items = append(q.items, queued{resp: resp})
	q.events++
	q.signal()
	return true
}

// PushControl queues a response whatever the queue holds.
func (q *sendQueue) PushControl(resp *pb.WatchResponse) {
	q.pushCounted(resp, nil)
}

// pushCounted queues a response whatever the queue holds; its events
// count in backlog until they are written.
func (q *sendQueue) pushCounted(resp *pb.WatchResponse, backlog *atomic.Int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if backlog != nil {
		backlog.Add(int64(len(resp.Events)))
	} else {
		q.controls++
	}
	q.items = append(q.items, queued{resp: resp, backlog: backlog})
	q.signal()
}

func (q *sendQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take removes and returns everything queued.
func (q *sendQueue) take() []queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	q.events, q.controls = 0, 0
	select {
	case q.room <- struct{}{}:
	default:
	}
	return items
}

// close drops what is queued and refuses everything after.
func (q *sendQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.items = nil
	select {
	case q.room <- struct{}{}:
	default:
	}
}

// waitRoom waits while sendQueueControls control responses wait to be
// sent, and reports false when done ends first.
func (q *sendQueue) waitRoom(done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		ok := q.closed || q.controls < sendQueueControls
		q.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-q.room:
		case <-done:
			return false
		}
	}
}
