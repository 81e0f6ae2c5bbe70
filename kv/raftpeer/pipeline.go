package raftpeer

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/gossip/peer/peerpb"
)

// pipeline is an AppendEntriesPipeline stream to one peer. AppendEntries
// sends on the caller's goroutine; one receive goroutine, owned by the
// pipeline and stopped by Close, matches answers with requests in order.
type pipeline struct {
	t      *Transport
	target raft.ServerAddress
	stream grpc.BidiStreamingClient[peerpb.RaftRequest, peerpb.RaftResponse]
	cancel context.CancelFunc // cuts the stream: on Close, or when an answer is late

	slots chan struct{}          // one per request sent and not answered: MaxInFlight
	sent  chan *appendFuture     // requests sent, oldest first; never fuller than slots
	done  chan raft.AppendFuture // answered requests for raft, in order

	sendMu sync.Mutex // serialises AppendEntries: Send and sent stay in one order

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// AppendEntriesPipeline opens a pipeline to target, or returns
// raft.ErrPipelineReplicationNotSupported when MaxInFlight is 1.
func (t *Transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.cfg.MaxInFlight < 2 {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	c, err := t.client(target)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(t.callContext(id))
	opening := time.AfterFunc(t.cfg.Timeout, cancel)
	stream, err := c.AppendEntriesPipeline(ctx)
	if !opening.Stop() || err != nil {
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	p := &pipeline{
		t:      t,
		target: target,
		stream: stream,
		cancel: cancel,
		slots:  make(chan struct{}, t.cfg.MaxInFlight),
		sent:   make(chan *appendFuture, t.cfg.MaxInFlight),
		done:   make(chan raft.AppendFuture, t.cfg.MaxInFlight),
		stop:   make(chan struct{}),
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		cancel()
		return nil, raft.ErrTransportShutdown
	}
	t.pipelines[p] = struct{}{}
	t.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.receive()
	}()
	return p, nil
}

// AppendEntries sends a request once fewer than MaxInFlight are waiting
// for their answer; the wait is raft's back-pressure.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	msg, err := p.t.encodeRequest(args)
	if err != nil {
		return nil, err
	}
	select {
	case p.slots <- struct{}{}:
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	}
	f := &appendFuture{start: time.Now(), args: args, resp: resp, done: make(chan struct{})}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	f.seq = p.t.answers.number()
	late := time.AfterFunc(p.t.cfg.Timeout, p.cancel)
	err = p.stream.Send(&peerpb.RaftRequest{Msgpack: msg})
	late.Stop()
	if err != nil {
		<-p.slots
		return nil, err
	}
	p.sent <- f // never blocks: a slot is held for f
	return f, nil
}

// receive answers the sent requests in order until the pipeline closes.
// An answer later than Timeout cuts the stream: that request and those
// after it fail, and raft falls back to single calls.
func (p *pipeline) receive() {
	for {
		var f *appendFuture
		select {
		case f = <-p.sent:
		case <-p.stop:
			return
		}
		late := time.AfterFunc(p.t.cfg.Timeout, p.cancel)
		out, err := p.stream.Recv()
		late.Stop()
		if err == nil {
			err = p.t.decodeResponse(out, f.resp)
		}
		if err == nil {
			p.t.answers.record(p.target, f.args.Term, f.seq, f.resp)
		}
		f.err = err
		close(f.done)
		<-p.slots
		select {
		case p.done <- f:
		case <-p.stop:
			return
		}
	}
}

// Consumer returns the answered requests, in the order they were sent.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.done }

// Close cuts the stream and waits for the receive goroutine. Requests in
// flight get no answer on Consumer. It is safe to call more than once.
func (p *pipeline) Close() error {
	p.stopOnce.Do(func() {
		close(p.stop)
		p.cancel()
	})
	p.wg.Wait()
	p.t.mu.Lock()
	delete(p.t.pipelines, p)
	p.t.mu.Unlock()
	return nil
}

// appendFuture is one pipelined AppendEntries request. err is written
// once, before done is closed.
type appendFuture struct {
	start time.Time
	seq   uint64 // its number among the transport's requests (answers)
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	done  chan struct{}
}

// Error waits for the answer and returns its error.
func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

// Start returns when the request was made.
func (f *appendFuture) Start() time.Time { return f.start }

// Request returns the request.
func (f *appendFuture) Request() *raft.AppendEntriesRequest { return f.args }

// Response returns the answer, valid once Error returned nil.
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }
