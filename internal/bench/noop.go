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
// Unimplemented.
type NoopServer struct {
	srv *grpc.Server
}

// NewNoopServer returns a NoopServer with the gRPC options a real server
// uses. It serves nothing until Serve.
func NewNoopServer() *NoopServer {
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(noopMaxRecvMsgSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             time.Second,
			PermitWithoutStream: true,
		}),
	)
	pb.RegisterKVServer(srv, noopKV{})
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
}

var _ pb.KVServer = noopKV{}

func (noopKV) Put(context.Context, *pb.PutRequest) (*pb.PutResponse, error) {
	return &pb.PutResponse{Header: noopHeader()}, nil
}

func (noopKV) Range(context.Context, *pb.RangeRequest) (*pb.RangeResponse, error) {
	return &pb.RangeResponse{Header: noopHeader()}, nil
}

func (noopKV) Txn(context.Context, *pb.TxnRequest) (*pb.TxnResponse, error) {
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
