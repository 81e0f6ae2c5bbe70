package kv

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"chute/internal/testutil"
)

// TestWatch_stuckWatcherBlocksNobody opens 100 watch streams on one key
// prefix. One is a raw gRPC stream that never reads, over a connection with
// a small flow-control window, so the server soon cannot send to it. Puts
// must all succeed, the other 99 must get every event in order, and the
// stuck watcher must have fallen behind (unsynced) rather than hold a
// growing buffer.
func TestWatch_stuckWatcherBlocksNobody(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := testCtx(t, 60*time.Second)
	addr := srv.ClientAddrs()[0].String()

	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64*1024),
		grpc.WithInitialConnWindowSize(64*1024))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stuck, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stuck.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: []byte("s/"), RangeEnd: []byte("s0")}}}); err != nil {
		t.Fatal(err)
	}
	// Never Recv on stuck.

	const watchers, puts = 99, 600
	value := strings.Repeat("v", 1024)
	chans := make([]clientv3.WatchChan, watchers)
	for i := range chans {
		// Distinct metadata gives each watch its own gRPC stream.
		wctx := metadata.AppendToOutgoingContext(ctx, "watcher", fmt.Sprint(i))
		chans[i] = cli.Watch(wctx, "s/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		<-chans[i] // created
	}
	testutil.EventuallyTrue(t, 10*time.Second, "100 watchers registered", func() bool { return watcherCount(srv) == 100 })

	var wg sync.WaitGroup
	errs := make([]error, watchers)
	for i, wc := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := 0
			for next < puts {
				resp, ok := <-wc
				if !ok {
					errs[i] = fmt.Errorf("watcher %d: channel closed at event %d", i, next)
					return
				}
				for _, ev := range resp.Events {
					if want := fmt.Sprintf("s/%05d", next); string(ev.Kv.Key) != want {
						errs[i] = fmt.Errorf("watcher %d: got %s, want %s", i, ev.Kv.Key, want)
						return
					}
					next++
				}
			}
		}()
	}

	var slowest time.Duration
	for i := range puts {
		start := time.Now()
		if _, err := cli.Put(ctx, fmt.Sprintf("s/%05d", i), value); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		slowest = max(slowest, time.Since(start))
	}
	t.Logf("slowest of %d puts with a stuck watcher: %v", puts, slowest)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, behind := srv.store.Watchers()
	if behind != 1 {
		t.Fatalf("watchers behind: got %d, want exactly the stuck one", behind)
	}
}
