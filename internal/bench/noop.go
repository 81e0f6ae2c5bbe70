package bench

import (
	"context"
	"errors"
	"net"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// noopMaxRecvMsgSize is the request limit of a real etcd-API server: 2 MiB of
// request plus 512 KiB of gRPC overhead.
const noopMaxRecvMsgSize = 2*1024*1024 + 512*1024

// NoopServer is an etcd-API gRPC server that answers without doing anything:
// its rate is the ceiling a real server could reach on this machine through
// the same client, gRPC stack and connections. Put, Range, Txn and
// Maintenance.Status answer with a fixed header; the other methods answer
// Unimplemented. Delays hold each put and txn before its answer, as a
// server that waits for its disk would: with the bench's closed loop of
// clients, a later answer means fewer calls per second, each costing the
// gRPC stack more (fewer calls share a read or a write).
type NoopServer struct {
	srv *grpc.Server
}

// NoopDelays are how long a NoopServer holds a put and a txn before it
// answers; zero for at once.
type NoopDelays struct {
	Put, Txn time.Duration
}

// NewNoopServer returns a NoopServer with the gRPC options a real server
// uses. It serves nothing until Serve.
func NewNoopServer(d NoopDelays) *NoopServer {
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(noopMaxRecvMsgSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             time.Second,
			PermitWithoutStream: true,
		}),
	)
	pb.RegisterKVServer(srv, noopKV{delays: d})
	pb.RegisterMaintenanceServer(srv, noopMaintenance{})
	return &NoopServer{srv: srv}
}

// Serve accepts connections on l until Stop; it returns nil after Stop, and
// the accept error otherwise. It takes ownership of l.
func (s *NoopServer) Serve(l net.Listener) error {
	err := s.srv.Serve(l)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop closes the listeners and every connection, failing pending calls. It
// is idempotent and safe to call concurrently with Serve.
func (s *NoopServer) Stop() {
	s.srv.Stop()
}

// noopHeader is the header of every no-op answer. A fresh one per call, as a
// real server allocates.
func noopHeader() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: 1, MemberId: 1, Revision: 1, RaftTerm: 1}
}

// noopKV answers the KV service without storing or reading anything.
type noopKV struct {
	pb.UnimplementedKVServer
	delays NoopDelays
}

// hold holds a call for d, or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

var _ pb.KVServer = noopKV{}

func (k noopKV) Put(ctx context.Context, _ *pb.PutRequest) (*pb.PutResponse, error) {
	hold(ctx, k.delays.Put)
	return &pb.PutResponse{Header: noopHeader()}, nil
}

func (noopKV) Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{Header: noopHeader()}, nil
}

func (k noopKV) Txn(ctx context.Context, _ *pb.TxnRequest) (*pb.TxnResponse, error) {
	hold(ctx, k.delays.Txn)
	return &pb.TxnResponse{Header: noopHeader(), Succeeded: true}, nil
}

// noopMaintenance answers Status, which some clients call on connect.
type noopMaintenance struct {
	pb.UnimplementedMaintenanceServer
}

var _ pb.MaintenanceServer = noopMaintenance{}

func (noopMaintenance) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return &pb.StatusResponse{Header: noopHeader()}, nil
}
