package kv

import (
	"context"
	"runtime"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestSendQueue_waitRoom: the receive loop waits while sendQueueControls
// control responses wait, until the send loop takes them or the queue
// closes.
func TestSendQueue_waitRoom(t *testing.T) {
	q := newSendQueue()
	for range sendQueueControls {
		q.PushControl(&pb.WatchResponse{})
	}
	done := make(chan struct{})
	waited := make(chan bool, 1)
	go func() { waited <- q.waitRoom(done) }()
	select {
	case <-waited:
		t.Fatal("waitRoom returned with the control responses all waiting")
	case <-time.After(50 * time.Millisecond):
	}
	if n := len(q.take()); n != sendQueueControls {
		t.Fatalf("took %d, want %d", n, sendQueueControls)
	}
	if ok := <-waited; !ok {
		t.Fatal("waitRoom: false once the send loop took the responses")
	}
	for range sendQueueControls {
		q.PushControl(&pb.WatchResponse{})
	}
	close(done)
	if q.waitRoom(done) {
		t.Fatal("waitRoom: true with the responses waiting and done ended")
	}
	q.close()
	if !q.waitRoom(make(chan struct{})) {
		t.Fatal("waitRoom: false on a closed queue")
	}
}

// TestWatch_unreadProgressRequestsAreBounded: a client that sends
// progress requests and never reads the answers is held back by gRPC's
// flow control once sendQueueControls answers wait; the server queued one
// for each before (about 240 bytes a request, 70 MiB for 300,000).
func TestWatch_unreadProgressRequestsAreBounded(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 200_000
	sent := make(chan int, 1)
	go func() {
		req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
		i := 0
		for ; i < n; i++ {
			if ws.Send(req) != nil {
				break
			}
		}
		sent <- i
	}()
	var got int
	select {
	case got = <-sent:
	case <-time.After(3 * time.Second): // held back: the point
		got = -1
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	if got == n || grew > 32<<20 {
		t.Fatalf("%d progress requests unread: all sent: %v, heap grew %d MiB; want the client held back and the heap bounded", n, got == n, grew>>20)
	}
	cancel()
	if got < 0 {
		<-sent // the stream's end releases the sender
	}
}
