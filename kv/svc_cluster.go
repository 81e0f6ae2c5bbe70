package kv

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv/mvcc"
)

// clusterService is etcd's Cluster service. Membership comes from gossip,
// not from raft configuration changes, so only MemberList does anything.
type clusterService struct {
	pb.UnimplementedClusterServer
	store   *mvcc.Store
	members func() []*pb.Member
	remover Members // may implement MemberRemover
}

// MemberRemover is implemented by a Members that can force a failed member
// out. RemoveMember returns gRPC status errors (etcd's rpctypes where one
// fits).
type MemberRemover interface {
	RemoveMember(id uint64) error
}

var _ pb.ClusterServer = (*clusterService)(nil)

// errMembershipByGossip answers the calls that change membership.
var errMembershipByGossip = status.Error(codes.FailedPrecondition,
	"chute: membership is managed by gossip: start the new node with --join <host:port of any member>; a member that stops leaves by itself")

func (c *clusterService) MemberList(_ context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	// etcd's cluster responses carry no revision: membership is not in the
	// key space.
	return &pb.MemberListResponse{Header: c.store.Header(0), Members: c.members()}, nil
}

func (c *clusterService) MemberAdd(context.Context, *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	return nil, errMembershipByGossip
}

// MemberRemove forces a failed member out when the membership can (see
// MemberRemover); an alive member cannot be removed: it leaves by itself
// when stopped.
func (c *clusterService) MemberRemove(_ context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	rm, ok := c.remover.(MemberRemover)
	if !ok {
		return nil, errMembershipByGossip
	}
	if err := rm.RemoveMember(r.ID); err != nil {
		return nil, err
	}
	return &pb.MemberRemoveResponse{Header: c.store.Header(0), Members: c.members()}, nil
}

// MemberUpdate answers etcd's NotFound for a member that does not exist;
// a member's URLs are its own flags, gossiped, so an existing one is
// refused.
func (c *clusterService) MemberUpdate(_ context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if !c.isMember(r.ID) {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	return nil, errMembershipByGossip
}

// MemberPromote answers as MemberUpdate: the leader promotes non-voters
// by itself, as voters fail.
func (c *clusterService) MemberPromote(_ context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if !c.isMember(r.ID) {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	return nil, errMembershipByGossip
}

func (c *clusterService) isMember(id uint64) bool {
	for _, m := range c.members() {
		if m.ID == id {
			return true
		}
	}
	return false
}
