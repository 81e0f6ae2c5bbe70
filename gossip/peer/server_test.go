package peer

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
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
