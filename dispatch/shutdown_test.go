package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer/peerpb"
)

// onePeer is a Cluster of one other member at addr.
type onePeer struct{ addr string }

func (p onePeer) Peers() []gossip.Peer { return []gossip.Peer{{ID: 2, Addr: p.addr}} }

func (p onePeer) Lookup(id uint64) (gossip.Peer, bool) {
	if id != 2 {
		return gossip.Peer{}, false
	}
	return p.Peers()[0], true
}

// TestManager_forwarderFor_afterShutdown: a put that reaches forwarderFor
// while Shutdown runs gets no forwarder. One made after Shutdown closed
// the others would run until the process ends, and Shutdown, waiting for
// it, would never return.
func TestManager_forwarderFor_afterShutdown(t *testing.T) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.cluster = onePeer{addr: "127.0.0.1:1"} // nothing listens: the forwarder only dials lazily
	done := make(chan error, 1)
	go func() { done <- m.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown of an idle manager did not return")
	}
	if _, err := m.forwarderFor(2); status.Code(err) != codes.Unavailable {
		t.Fatalf("forwarderFor after Shutdown: got %v, want Unavailable", err)
	}
	m.mu.Lock()
	n := len(m.forwarders)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d forwarders made after Shutdown", n)
	}
}

// silentQueues is a dispatcher's Queues service that takes forwarded
// frames and never answers them.
type silentQueues struct {
	peerpb.UnimplementedQueuesServer
	frames chan struct{} // a token per frame received
}

func (s *silentQueues) Forward(stream grpc.BidiStreamingServer[peerpb.ForwardFrame, peerpb.ForwardResults]) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		select {
		case s.frames <- struct{}{}:
		default:
		}
	}
}

// TestManager_Shutdown_forwardsInFlight stops a Manager whose puts wait
// on a dispatcher that never answers: Shutdown returns within its
// context, and so does every forward, with Unavailable.
func TestManager_Shutdown_forwardsInFlight(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	silent := &silentQueues{frames: make(chan struct{}, 1)}
	peerpb.RegisterQueuesServer(srv, silent)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.cluster = onePeer{addr: lis.Addr().String()}
	const puts = 20
	errs := make(chan error, puts)
	for i := range puts {
		go func() {
			msgs := []incoming{{id: MsgID{Origin: 1, N: uint64(i + 1)}, tail: "k", value: []byte(`{}`)}}
			errs <- m.forward(context.Background(), 2, "q", msgs, true, forwardTimeout)
		}()
	}
	select {
	case <-silent.frames:
	case <-time.After(10 * time.Second):
		t.Fatal("no frame reached the dispatcher")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := m.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with forwards in flight: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Shutdown took %v", took)
	}
	for range puts {
		select {
		case err := <-errs:
			if status.Code(err) != codes.Unavailable {
				t.Errorf("a forward in flight at shutdown: %v, want Unavailable", err)
			}
		case <-time.After(forwardTimeout):
			t.Fatal("a forward still waits after Shutdown returned")
		}
	}
}

// shutdownPastDeadline starts a goroutine m waits for at shutdown, calls
// Shutdown with a context of 200 ms and returns its error; the goroutine
// ends after it.
func shutdownPastDeadline(m *Manager) error {
	release := make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-release
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := m.Shutdown(ctx)
	close(release)
	return err
}

// TestManager_Shutdown_deadline: a Manager whose goroutines do not end
// (here one it is made to wait for) returns its context's error at the
// deadline rather than waiting forever.
func TestManager_Shutdown_deadline(t *testing.T) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdownPastDeadline(m); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown past its deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	if err := m.Shutdown(context.Background()); err != nil { // the rest ended: a second call waits for it
		t.Fatal(err)
	}
}

// TestManager_Shutdown_deadlineWithQueueLog: with a data dir, what the
// goroutines left at the deadline carry (an insert into a ClickHouse
// that does not answer) is in the queue log until answered, so nothing
// is lost: Shutdown returns no error, and the node exits 0. It returned
// the deadline's error, and the node exited 1 whenever ClickHouse was
// stalled at a SIGTERM.
func TestManager_Shutdown_deadlineWithQueueLog(t *testing.T) {
	logs := &logLines{}
	m, err := New(Config{MemberID: 1, DataDir: t.TempDir(), Logger: slog.New(logs.handler())})
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdownPastDeadline(m); err != nil {
		t.Fatalf("Shutdown past its deadline with a queue log: %v, want nil", err)
	}
	if logs.count("sent again at the next start") != 1 {
		t.Fatal("no warning that what was still waiting stays in the queue log")
	}
}
