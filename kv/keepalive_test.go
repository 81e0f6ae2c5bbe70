package kv

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"chute/internal/testutil"
)

// freezer is a TCP proxy whose traffic the test can stop in both
// directions while every connection stays open: the server then sees a
// client as it sees a frozen process (SIGSTOP) or a stalled link.
type freezer struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed when the test ends
	frozen atomic.Bool
	mu     sync.Mutex // guards conns
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target, done: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		close(f.done)
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *freezer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", f.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c, s)
		f.mu.Unlock()
		f.wg.Add(2)
		go f.copy(s, c)
		go f.copy(c, s)
	}
}

// copy forwards src to dst until either ends or the test does; while
// frozen it reads nothing, as a stopped process does not.
func (f *freezer) copy(dst, src net.Conn) {
	defer f.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-f.done:
			return
		default:
		}
		if f.frozen.Load() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		_ = src.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			return
		}
	}
}

// TestKeepalive_frozenClientLosesItsWatch: with etcd's
// --grpc-keepalive-interval and --grpc-keepalive-timeout, a client that
// stops answering (its traffic frozen, its connection open) is found by
// the server's ping, its connection closed and its watch ended. The
// flags were accepted and ignored: the watch stayed for gRPC's two
// hours.
func TestKeepalive_frozenClientLosesItsWatch(t *testing.T) {
	srv, _ := startServer(t, func(c *Config) {
		c.KeepaliveInterval, c.KeepaliveTimeout = 200*time.Millisecond, 200*time.Millisecond
	})
	f := newFreezer(t, srv.ClientAddrs()[0].String())
	conn, err := grpc.NewClient(f.ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := ws.Recv(); err != nil || !resp.Created {
		t.Fatalf("watch: %v, %v", resp, err)
	}
	// Created is queued before the watcher is registered (create).
	testutil.EventuallyTrue(t, 5*time.Second, "the watcher registered", func() bool { return watcherCount(srv) == 1 })
	f.frozen.Store(true)
	testutil.EventuallyTrue(t, 10*time.Second, "the frozen client's watch ended by the server", func() bool {
		return watcherCount(srv) == 0
	})
}

// TestMaxConcurrentStreams: with etcd's --max-concurrent-streams 1, a
// connection's second call waits for its first to end.
func TestMaxConcurrentStreams(t *testing.T) {
	srv, _ := startServer(t, func(c *Config) { c.MaxConcurrentStreams = 1 })
	conn, err := grpc.NewClient(srv.ClientAddrs()[0].String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ws, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(conn)
	short, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	if _, err := kv.Range(short, &pb.RangeRequest{Key: []byte("k")}); err == nil {
		t.Fatal("a second call on the connection ran while the watch held its one stream")
	}
	cancel() // the watch ends: its stream is free
	long, stop2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop2()
	if _, err := kv.Range(long, &pb.RangeRequest{Key: []byte("k")}); err != nil {
		t.Fatalf("the call after the watch ended: %v", err)
	}
}
