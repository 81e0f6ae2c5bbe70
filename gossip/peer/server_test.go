package peer

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// callerHealth answers Check when the call carries a member id, and
// refuses it with InvalidArgument otherwise.
type callerHealth struct {
	healthpb.UnimplementedHealthServer
}

func (callerHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if _, ok := CallerMember(ctx); !ok {
		return nil, status.Error(codes.InvalidArgument, "no caller member")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// startServer serves callerHealth on a peer listener of cluster 0xc1 on
// a free port, stopped at cleanup.
func startServer(t *testing.T) *Server {
	t.Helper()
	s, err := NewServer(Config{ListenURLs: []string{"http://127.0.0.1:0"}, ClusterID: 0xc1})
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(s, callerHealth{})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

func TestServer_clusterCheck(t *testing.T) {
	s := startServer(t)
	conn, err := Dial(s.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"same cluster", OutgoingContext(ctx, 0xc1, 7), codes.OK},
		{"another cluster", OutgoingContext(ctx, 0xc2, 7), codes.PermissionDenied},
		{"no identity", ctx, codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Check(tc.ctx, &healthpb.HealthCheckRequest{})
			if got := status.Code(err); got != tc.want {
				t.Fatalf("got %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestCallerMember_roundTrip(t *testing.T) {
	s := startServer(t)
	conn, err := Dial(s.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// callerHealth refuses a call whose member id it cannot read.
	if _, err := healthpb.NewHealthClient(conn).Check(OutgoingContext(ctx, 0xc1, 1<<63+5), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("got %v, want the caller's member id read", err)
	}
	if _, ok := CallerMember(ctx); ok {
		t.Fatal("got a caller member from a context without one")
	}
}

func TestServer_Start_bindFailureBindsNothing(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	s, err := NewServer(Config{ListenURLs: []string{"http://127.0.0.1:0", "http://" + held.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown(context.Background()) }()
	if err := s.Start(); err == nil {
		t.Fatal("got nil, want the bind error")
	}
	if got := s.Addrs(); len(got) != 0 {
		t.Fatalf("got %v bound, want none", got)
	}
}

func TestServer_Shutdown_twiceAndBeforeStart(t *testing.T) {
	s, err := NewServer(Config{ListenURLs: []string{"http://127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	}
}

// watchEnds is callerHealth whose Watch holds the stream open until its
// context ends, then says so on ended.
type watchEnds struct {
	callerHealth
	ended chan struct{}
}

func (w watchEnds) Watch(_ *healthpb.HealthCheckRequest, s healthpb.Health_WatchServer) error {
	if err := s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	<-s.Context().Done()
	close(w.ended)
	return nil
}

// proxy passes one TCP connection to target, showing tap (if not nil)
// what it passes, until stall is closed (never, if nil); then it passes
// nothing either way and closes nothing, as a dead path.
func proxy(t *testing.T, target string, stall <-chan struct{}, tap func(toServer bool, b []byte)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	pass := func(dst, src net.Conn, toServer bool) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-stall:
				<-done // held until the test ends
				return
			default:
			}
			if n > 0 {
				if tap != nil {
					tap(toServer, buf[:n])
				}
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			return
		}
		mu.Lock()
		conns = append(conns, c, u)
		mu.Unlock()
		wg.Go(func() { pass(u, c, true) })
		wg.Go(func() { pass(c, u, false) })
	})
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestServer_keepaliveEndsStreamsOfADeadPath: a stream whose client's
// connection goes silent, open (a dead path, the client itself without
// keepalive), ends at the listener within its keepalive's time and
// timeout: a dispatcher's Consume stream to a member cut off from it
// otherwise held that member's consumer, and the deliveries it was
// given, until gossip called the member failed (about 20 s on
// namespaces, against 5 s).
func TestServer_keepaliveEndsStreamsOfADeadPath(t *testing.T) {
	s, err := NewServer(Config{ListenURLs: []string{"http://127.0.0.1:0"}, ClusterID: 0xc1})
	if err != nil {
		t.Fatal(err)
	}
	w := watchEnds{ended: make(chan struct{})}
	healthpb.RegisterHealthServer(s, w)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown(context.Background()) }()
	stall := make(chan struct{})
	addr := proxy(t, s.Addrs()[0].String(), stall, nil)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithCancel(OutgoingContext(context.Background(), 0xc1, 7))
	defer cancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	close(stall)
	limit := KeepaliveTime*2 + KeepaliveTimeout + 5*time.Second // the keepalive timer ticks every KeepaliveTime
	select {
	case <-w.ended:
	case <-time.After(limit):
		t.Fatalf("the stream of a silent connection still open at the listener after %v", limit)
	}
}
