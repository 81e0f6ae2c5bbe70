package dispatch

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
	"chute/kv"
)

// stuckStream is a Consume stream whose peer stopped reading (SIGSTOP,
// or a link that stalls without closing): Send blocks until ctx ends.
type stuckStream struct {
	ctx   context.Context
	sends chan struct{}
}

var _ grpc.ServerStreamingServer[peerpb.Deliveries] = (*stuckStream)(nil)

func (s *stuckStream) Send(*peerpb.Deliveries) error {
	select {
	case s.sends <- struct{}{}:
	default:
	}
	<-s.ctx.Done()
	return s.ctx.Err()
}
func (s *stuckStream) SetHeader(metadata.MD) error  { return nil }
func (s *stuckStream) SendHeader(metadata.MD) error { return nil }
func (s *stuckStream) SetTrailer(metadata.MD)       {}
func (s *stuckStream) Context() context.Context     { return s.ctx }
func (s *stuckStream) SendMsg(any) error            { return nil }
func (s *stuckStream) RecvMsg(any) error            { return nil }

// workStatus returns what /status shows of queue work on n.
func workStatus(n *testNode) QueueStatus {
	for _, q := range n.mgr.Status().Queues {
		if q.Name == "work" {
			return q
		}
	}
	return QueueStatus{}
}

// putWork puts n messages of size bytes to queue work.
func putWork(t *testing.T, n *testNode, count, size int) {
	t.Helper()
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	val := strings.Repeat("x", size)
	for i := range count {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/work/p/m%02d", i), val); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStall_remoteConsumerNotReading: a remote consumer whose member
// stopped reading its Consume stream, its deliveries expiring with some
// still waiting to be sent, is removed: its stream ends Aborted saying
// why, and its messages go to the next consumer. It used to stay, and
// every visibility timeout its messages were delivered to it again, a
// copy more each time in its stream's buffer.
func TestStall_remoteConsumerNotReading(t *testing.T) {
	clk := clockwork.NewFakeClock()
	n := startNode(t, func(c *Config) { c.Visibility = time.Minute; c.Clock = clk; c.Prefetch = 64 })
	putWork(t, n, 64, 10<<10)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &stuckStream{ctx: sctx, sends: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		done <- n.mgr.PeerService().Consume(&peerpb.ConsumeRequest{Queue: "work", Consumer: "far", Prefix: "q"}, st)
	}()
	<-st.sends // the first batch is on its way, and stuck
	clk.Advance(time.Minute + time.Second)
	n.mgr.expireAll(clk.Now())
	if q := workStatus(n); q.Consumers != 0 || q.Unacked != 0 {
		t.Fatalf("after its deliveries expired unsent: %d consumers, %d unacked; want the consumer removed", q.Consumers, q.Unacked)
	}
	cancel() // the connection goes at last: the stuck Send returns
	select {
	case err := <-done:
		if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "did not read") {
			t.Fatalf("the stalled consumer's stream ended with %v, want Aborted saying why", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled consumer's stream did not end")
	}
	wc := n.client(t).Watch(testCtx(t, 30*time.Second), "/q/work/c/near")
	if got := collectN(t, wc, 64, 10*time.Second); len(got) != 64 {
		t.Fatalf("the next consumer got %d of the 64 messages", len(got))
	}
}

// TestStall_watchNotRead: a consumer watch on the dispatcher's member
// whose client reads nothing (a raw stream never received from: a frozen
// process keeps its connection) is removed once its deliveries expire
// with some still unsent; its messages go to the next consumer and no
// more pile up for it. It used to be given its prefetch again every
// visibility timeout, into its stream's unbounded send queue.
func TestStall_watchNotRead(t *testing.T) {
	clk := clockwork.NewFakeClock()
	n := startNode(t, func(c *Config) { c.Visibility = time.Minute; c.Clock = clk; c.Prefetch = 64 })
	putWork(t, n, 64, 100<<10) // 6.4 MiB: far past the stream's flow-control window
	// A fixed window, as a frozen client's stays: grpc-go's default may
	// grow it to 16 MiB as data comes (BDP estimation), past what is put.
	conn, err := grpc.NewClient(n.kv.ClientAddrs()[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, err := pb.NewWatchClient(conn).Watch(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("/q/work/c/hung")}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the consumer holding its prefetch", func() bool {
		q := workStatus(n)
		return q.Consumers == 1 && q.Unacked == 64
	})
	clk.Advance(time.Minute + time.Second)
	n.mgr.expireAll(clk.Now())
	q := workStatus(n)
	if q.Consumers != 0 || q.Unacked != 0 {
		t.Fatalf("after its deliveries expired unsent: %d consumers, %d unacked; want the consumer removed", q.Consumers, q.Unacked)
	}
	wc := n.client(t).Watch(testCtx(t, 30*time.Second), "/q/work/c/next")
	if got := collectN(t, wc, 64, 10*time.Second); len(got) != 64 {
		t.Fatalf("the next consumer got %d of the 64 messages", len(got))
	}
}

// fakeStallable is a Deliveries whose backlog the test sets.
type fakeStallable struct{ backlog atomic.Int64 }

func (f *fakeStallable) Deliver([]*mvccpb.KeyValue) {}
func (f *fakeStallable) Backlog() int               { return int(f.backlog.Load()) }
func (f *fakeStallable) Stall(string)               {}

// TestStall_remoteWatchNotRead: a consumer watch on b, streaming from
// the dispatcher a, whose client reads nothing is removed once its
// deliveries reach the visibility timeout, and b ends its watch, as a
// watch on the dispatcher is: b's relay read up to 1024 messages off the
// stream, so a saw no backlog and sent the same messages again every
// timeout, a copy more on b each time, and when a did remove it, b bound
// the watch to a new stream.
func TestStall_remoteWatchNotRead(t *testing.T) {
	cl := newCluster(t)
	vis := func(c *Config) { c.Visibility = time.Second; c.Prefetch = 64 }
	a, b := cl.start("a", vis), cl.start("b", vis)
	connect(a, b)
	ctx := testCtx(t, 60*time.Second)
	wctx, wcancel := context.WithCancel(ctx)
	_ = a.cli.Watch(wctx, "/q/work/c/x") // a dispatches: it hosts x
	waitUntil(t, 10*time.Second, "a to dispatch work", func() bool { return strings.HasPrefix(recordOn(b, "work"), fmt.Sprint(a.id)+";") })
	waitUntil(t, 10*time.Second, "x's record seen on b", func() bool { return b.mgr.hostsConsumer("work", a.id) })
	conn, err := grpc.NewClient(b.kv.ClientAddrs()[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ws, err := pb.NewWatchClient(conn).Watch(ctx) // never read
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("/q/work/c/hung")}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "two consumers on a", func() bool { q, _ := queueOn(a, "work"); return q.Consumers == 2 })
	wcancel() // x leaves; a stays the dispatcher, hung streams from it
	waitUntil(t, 10*time.Second, "one consumer on a", func() bool { q, _ := queueOn(a, "work"); return q.Consumers == 1 })
	val := strings.Repeat("x", 100<<10) // 6.4 MiB in all: past any flow-control window
	for i := range 64 {
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/work/p/m%02d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	backlog := 0
	waitUntil(t, 10*time.Second, "the frozen consumer removed from a and its watch ended on b", func() bool {
		q, _ := queueOn(a, "work")
		b.mgr.mu.Lock()
		defer b.mgr.mu.Unlock()
		stalled := len(b.mgr.locals) == 1
		backlog = 0
		for lc := range b.mgr.locals {
			stalled = stalled && lc.stalled.Load()
			backlog += lc.c.out.(kv.Stallable).Backlog()
		}
		return q.Consumers == 0 && stalled
	})
	if backlog > 2*64 {
		t.Fatalf("%d messages wait on b for the frozen client, want at most about a prefetch (64) and a batch", backlog)
	}
}

// TestStall_relayWaitsForItsClient: a member relaying a remote
// dispatcher's deliveries to a watch stops reading the stream while the
// watch's client is relayBacklog messages behind (or the queue's
// prefetch, if fewer), and goes on once it caught up; the wait ends with
// its context.
func TestStall_relayWaitsForItsClient(t *testing.T) {
	clk := clockwork.NewFakeClock()
	out := &fakeStallable{}
	lc := &localConsumer{m: &Manager{clock: clk, cfg: Config{Prefetch: 4 * relayBacklog}}, c: &consumer{out: out}}
	small := &localConsumer{m: &Manager{clock: clk, cfg: Config{Prefetch: 64}}, c: &consumer{out: &fakeStallable{}}}
	small.c.out.(*fakeStallable).backlog.Store(63)
	if !small.waitForClient(context.Background()) {
		t.Fatal("a client less than prefetch behind: the relay waited")
	}
	small.c.out.(*fakeStallable).backlog.Store(64)
	sctx, scancel := context.WithCancel(context.Background())
	scancel()
	if small.waitForClient(sctx) {
		t.Fatal("a client a prefetch (64) behind: the relay went on reading")
	}
	if !lc.waitForClient(context.Background()) {
		t.Fatal("no backlog: the relay waited")
	}
	out.backlog.Store(relayBacklog)
	res := make(chan bool, 1)
	go func() { res <- lc.waitForClient(context.Background()) }()
	if err := clk.BlockUntilContext(testCtx(t, 10*time.Second), 1); err != nil {
		t.Fatalf("the relay does not wait: %v", err)
	}
	select {
	case <-res:
		t.Fatal("the relay went on with its client relayBacklog messages behind")
	default:
	}
	out.backlog.Store(relayBacklog - 1)
	clk.Advance(time.Second)
	select {
	case ok := <-res:
		if !ok {
			t.Fatal("the relay reported its context ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not go on once its client caught up")
	}
	ctx, cancel := context.WithCancel(context.Background())
	out.backlog.Store(relayBacklog)
	go func() { res <- lc.waitForClient(ctx) }()
	cancel()
	if ok := <-res; ok {
		t.Fatal("the relay's wait went on past its context")
	}
}
