package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"chute/internal/testutil"
)

// collect reads events from wc until it has n of them or d passes.
func collect(t *testing.T, wc clientv3.WatchChan, n int, d time.Duration) []*clientv3.Event {
	t.Helper()
	var evs []*clientv3.Event
	timeout := time.After(d)
	for len(evs) < n {
		select {
		case resp, ok := <-wc:
			if !ok {
				t.Fatalf("watch channel closed after %d of %d events", len(evs), n)
			}
			if err := resp.Err(); err != nil {
				t.Fatalf("watch error after %d of %d events: %v", len(evs), n, err)
			}
			evs = append(evs, resp.Events...)
		case <-timeout:
			t.Fatalf("got %d of %d events in %v", len(evs), n, d)
		}
	}
	return evs
}

func describe(evs []*clientv3.Event) string {
	s := ""
	for _, ev := range evs {
		s += fmt.Sprintf("%s %s=%s@%d", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
		if ev.PrevKv != nil {
			s += fmt.Sprintf("(prev %s)", ev.PrevKv.Value)
		}
		s += ";"
	}
	return s
}

// TestWatch_replaysHistoryFromOldRevision checks that a watch starting in
// the past gets every change since, then live ones, with DELETE events and
// previous values when asked.
func TestWatch_replaysHistoryFromOldRevision(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	for _, op := range []clientv3.Op{
		clientv3.OpPut("w/a", "1"), // 2
		clientv3.OpPut("other", "x"),
		clientv3.OpPut("w/a", "2"), // 4
		clientv3.OpDelete("w/a"),   // 5
	} {
		if _, err := cli.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	wc := cli.Watch(ctx, "w/", clientv3.WithPrefix(), clientv3.WithRev(2), clientv3.WithPrevKV())
	got := describe(collect(t, wc, 3, 5*time.Second))
	want := "PUT w/a=1@2;PUT w/a=2@4(prev 1);DELETE w/a=@5(prev 2);"
	if got != want {
		t.Fatalf("replay: got %q, want %q", got, want)
	}
	if _, err := cli.Put(ctx, "w/b", "3"); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(collect(t, wc, 1, 5*time.Second)), "PUT w/b=3@6;"; got != want {
		t.Fatalf("live: got %q, want %q", got, want)
	}
}

// TestWatch_filtersAndPrevKV checks, on one raw stream, server-assigned
// watch ids, NOPUT/NODELETE filters, and that prev_kv is only sent to the
// watcher that asked.
func TestWatch_filtersAndPrevKV(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	stream, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	creates := []*pb.WatchCreateRequest{
		{Key: []byte("f"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}},
		{Key: []byte("f"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}},
		{Key: []byte("f"), PrevKv: true},
	}
	for i, cr := range creates {
		if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Created || resp.WatchId != int64(i) {
			t.Fatalf("create %d: got %+v, want created with id %d", i, resp, i)
		}
	}
	for _, op := range []clientv3.Op{clientv3.OpPut("f", "1"), clientv3.OpDelete("f")} {
		if _, err := cli.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int64]string{}
	// 0 gets the delete, 1 the put, 2 both: four events, in three
	// responses or four (2's may come together when it syncs late).
	for n := 0; n < 4; {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		n += len(resp.Events)
		for _, ev := range resp.Events {
			got[resp.WatchId] += fmt.Sprintf("%s:%s", ev.Type, ev.Kv.Value)
			if ev.PrevKv != nil {
				got[resp.WatchId] += fmt.Sprintf("(prev %s)", ev.PrevKv.Value)
			}
			got[resp.WatchId] += ";"
		}
	}
	want := map[int64]string{0: "DELETE:;", 1: "PUT:1;", 2: "PUT:1;DELETE:(prev 1);"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("watch %d: got %q, want %q", id, got[id], w)
		}
	}
	// A client-chosen id already in use is refused, as etcd does.
	dup := &pb.WatchCreateRequest{Key: []byte("g"), WatchId: 2}
	if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: dup}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Canceled || resp.CancelReason != reasonDuplicateID {
		t.Fatalf("duplicate id: got %+v, want canceled with %q", resp, reasonDuplicateID)
	}
}

// TestWatch_compactedRevision checks that a watch from a compacted revision
// is cancelled with ErrCompacted and the compaction revision.
func TestWatch_compactedRevision(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	for i := range 5 {
		if _, err := cli.Put(ctx, "c", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wc := cli.Watch(ctx, "c", clientv3.WithRev(2))
	select {
	case resp := <-wc:
		if !errors.Is(resp.Err(), rpctypes.ErrCompacted) || resp.CompactRevision != 4 {
			t.Fatalf("got err %v compact revision %d, want ErrCompacted at 4", resp.Err(), resp.CompactRevision)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no response to a watch from a compacted revision")
	}
	// From the compaction revision itself history is still there.
	wc = cli.Watch(ctx, "c", clientv3.WithRev(4))
	if got, want := describe(collect(t, wc, 3, 5*time.Second)), "PUT c=2@4;PUT c=3@5;PUT c=4@6;"; got != want {
		t.Fatalf("from compaction revision: got %q, want %q", got, want)
	}
}

// TestWatch_progressAndCancel checks progress requests and notifications,
// and that a cancelled watch gets nothing more.
func TestWatch_progressAndCancel(t *testing.T) {
	srv, cli := startServer(t, func(c *Config) { c.WatchProgressInterval = 50 * time.Millisecond })
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "p", "1"); err != nil { // rev 2
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wc := cli.Watch(wctx, "p", clientv3.WithProgressNotify())
	select {
	case resp := <-wc:
		if !resp.IsProgressNotify() || resp.Header.Revision != 2 {
			t.Fatalf("got %+v, want a progress notification at revision 2", resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no progress notification")
	}
	if n := watcherCount(srv); n != 1 {
		t.Fatalf("watchers before cancel: got %d, want 1", n)
	}
	cancel()
	for range wc { // drains until the client closes the channel
	}
	testutil.EventuallyTrue(t, 5*time.Second, "the server to drop the cancelled watcher", func() bool {
		return watcherCount(srv) == 0
	})
}

// TestWatch_ids checks that watches on one stream get distinct ids and each
// sees only its own key. Both are created before the puts (the client
// sends a watch's create request after Watch returns).
func TestWatch_ids(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	a := cli.Watch(ctx, "a", clientv3.WithCreatedNotify())
	b := cli.Watch(ctx, "b", clientv3.WithCreatedNotify())
	for name, wc := range map[string]clientv3.WatchChan{"a": a, "b": b} {
		if resp := <-wc; !resp.Created {
			t.Fatalf("watch %s: first response %+v, want the created notification", name, resp)
		}
	}
	if _, err := cli.Put(ctx, "b", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "a", "1"); err != nil {
		t.Fatal(err)
	}
	if got := describe(collect(t, a, 1, 5*time.Second)); got != "PUT a=1@3;" {
		t.Fatalf("watch a: got %q", got)
	}
	if got := describe(collect(t, b, 1, 5*time.Second)); got != "PUT b=1@2;" {
		t.Fatalf("watch b: got %q", got)
	}
}

// TestWatch_emptyRangeRefused: a watch whose range ends before its key
// is refused as etcd refuses it, created and canceled at once under id
// -1 with mvcc's reason, and the stream goes on serving.
func TestWatch_emptyRangeRefused(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	stream, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range []*pb.WatchCreateRequest{{Key: []byte("b"), RangeEnd: []byte("a")}, {Key: []byte("a"), RangeEnd: []byte("b")}} {
		if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := stream.Recv()
	if err != nil || !resp.Created || !resp.Canceled || resp.WatchId != -1 || resp.CancelReason != "mvcc: watcher range is empty" {
		t.Fatalf("watch of [b, a): got %+v, %v; want created and canceled, id -1, mvcc's reason", resp, err)
	}
	if resp, err = stream.Recv(); err != nil || !resp.Created || resp.Canceled {
		t.Fatalf("watch of [a, b) after it: got %+v, %v; want created", resp, err)
	}
}

// refusingQueues is namedQueues that refuses consumer "no"
// (ConsumerChecker) and delivers one message to any other consumer
// before Consume returns, as a dispatcher holding messages may.
type refusingQueues struct{ namedQueues }

var _ ConsumerChecker = (*refusingQueues)(nil)

func (q *refusingQueues) CheckConsumer(key []byte) error {
	if strings.HasSuffix(string(key), "/no") {
		return status.Error(codes.InvalidArgument, "etcdserver: refused for the test")
	}
	return nil
}

func (q *refusingQueues) Consume(key []byte, d Deliveries) (func(), error) {
	if err := q.CheckConsumer(key); err != nil {
		return nil, err
	}
	d.Deliver([]*mvccpb.KeyValue{{Key: []byte("/q/jobs/1/k"), Value: []byte("v")}})
	return func() {}, nil
}

// TestWatch_consumerRefusedOrServed: a consumer the queues refuse is
// answered as etcd refuses a watch, created and canceled at once with
// the reason, which clientv3 shows; it used to be created, then
// canceled, and clientv3 closed the channel without a word. Another is
// created, and a message delivered while Consume registers it comes
// after that.
func TestWatch_consumerRefusedOrServed(t *testing.T) {
	_, cli := startServer(t, func(c *Config) { c.Queues = &refusingQueues{} })
	ctx, cancel := context.WithCancel(testCtx(t, 10*time.Second))
	defer cancel()
	resp, ok := <-cli.Watch(ctx, "/q/jobs/c/no")
	if !ok || !resp.Canceled || resp.Err() == nil || !strings.Contains(resp.Err().Error(), "refused for the test") {
		t.Fatalf("a refused consumer: got %+v (open %v, err %v), want canceled with the reason", resp, ok, resp.Err())
	}
	wc := cli.Watch(ctx, "/q/jobs/c/yes", clientv3.WithCreatedNotify())
	if resp := <-wc; !resp.Created || len(resp.Events) != 0 {
		t.Fatalf("a consumer's first answer: %+v, want created", resp)
	}
	if resp := <-wc; len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != "/q/jobs/1/k" {
		t.Fatalf("a consumer's second answer: %+v, want the delivery", resp)
	}
}

// TestWatch_progressWaitsForTheSlowest: a progress request answers every
// watch of the stream (clientv3 takes it as each one's resume point), so
// it names the current revision once every watcher has been sent all its
// events up to it, as etcd 3.5 does. It named the revision the slowest
// had been brought up to, 0 for a watch of the whole history just
// made: the watch beside it, past that, would after a reconnect have
// its events again from revision 1.
func TestWatch_progressWaitsForTheSlowest(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 30*time.Second)
	val := strings.Repeat("x", 2000)
	for i := range 3000 {
		if _, err := cli.Put(ctx, fmt.Sprintf("h/%d", i%50), val); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r *pb.WatchRequest) {
		t.Helper()
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("a")}}})
	if resp, err := stream.Recv(); err != nil || !resp.Created {
		t.Fatalf("create: %v %v", resp, err)
	}
	put, err := cli.Put(ctx, "a", "1")
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || len(resp.Events) != 1 {
		t.Fatalf("a's event: %v %v", resp, err)
	}
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("h/"), RangeEnd: []byte("h0"), StartRevision: 1}}})
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	events := 0
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.WatchId != -1 {
			events += len(resp.Events)
			continue
		}
		if resp.Header.Revision != put.Header.Revision || events != 3000 {
			t.Errorf("progress at revision %d after %d events of the history watch, want %d after all 3000", resp.Header.Revision, events, put.Header.Revision)
		}
		return
	}
}

// TestWatch_fragments checks that a watch created with fragment set gets
// an answer larger than --max-request-bytes in fragments, as etcd sends
// them: a client whose receive limit is below the whole answer gets
// every event (clientv3 joins the fragments), where the whole answer
// ended its stream with ResourceExhausted; each fragment but the last
// says so, and none is much over the limit. A watch without fragment gets
// the answer whole.
func TestWatch_fragments(t *testing.T) {
	const maxBytes = 64 << 10
	_, cli := startServer(t, func(c *Config) { c.MaxRequestBytes = maxBytes })
	ctx := testCtx(t, 20*time.Second)
	value := strings.Repeat("v", 10<<10)
	const keys = 20 // deleted in one revision: 200 KiB of previous values
	for i := range keys {
		if _, err := cli.Put(ctx, fmt.Sprintf("/f/%02d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	small, err := clientv3.New(clientv3.Config{Endpoints: cli.Endpoints(), DialTimeout: 5 * time.Second,
		MaxCallRecvMsgSize: 128 << 10, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = small.Close() })
	wc := small.Watch(ctx, "/f/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithFragment(), clientv3.WithCreatedNotify())
	if r := <-wc; !r.Created {
		t.Fatalf("first answer of the small client's watch: %+v, want created", r)
	}

	raw, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, fragment := range map[int64]bool{1: true, 2: false} {
		if err := raw.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("/f/"), RangeEnd: []byte("/f0"), PrevKv: true, Fragment: fragment, WatchId: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	created := 0
	for created < 2 {
		r, err := raw.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Created {
			created++
		}
	}

	if _, err := cli.Delete(ctx, "/f/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < keys {
		resp := <-wc
		if err := resp.Err(); err != nil {
			t.Fatalf("watch with a 128 KiB receive limit: %v after %d events, want all %d in fragments", err, got, keys)
		}
		got += len(resp.Events)
	}
	events := map[int64]int{}
	parts := map[int64]int{}
	for events[1] < keys || events[2] < keys {
		r, err := raw.Recv()
		if err != nil {
			t.Fatal(err)
		}
		events[r.WatchId] += len(r.Events)
		parts[r.WatchId]++
		if size := proto.Size(r); r.WatchId == 1 && size > maxBytes+16<<10 {
			t.Errorf("a fragment of %d bytes, want about %d at most", size, maxBytes)
		}
		if last := events[r.WatchId] == keys; r.Fragment == last || r.WatchId == 2 && r.Fragment {
			t.Fatalf("watch %d: an answer with %d events, fragment %v, after which %d of %d events came", r.WatchId, len(r.Events), r.Fragment, events[r.WatchId], keys)
		}
	}
	if parts[1] < 3 || parts[2] != 1 {
		t.Fatalf("answers: %d for the fragmented watch, %d for the other; want at least 3 (200 KiB in 64 KiB parts) and 1", parts[1], parts[2])
	}
}
