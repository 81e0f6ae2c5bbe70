package peer

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys every peer call carries: the cluster id, checked by the
// receiver, and the sender's member id, for logs.
const (
	mdCluster = "chute-cluster"
	mdMember  = "chute-member"
)

// OutgoingContext returns ctx carrying a member's identity for a call to a
// peer's listener, which refuses calls without its cluster id.
func OutgoingContext(ctx context.Context, clusterID, memberID uint64) context.Context {
	return metadata.AppendToOutgoingContext(ctx,
		mdCluster, strconv.FormatUint(clusterID, 16),
		mdMember, strconv.FormatUint(memberID, 16))
}

// CallerMember returns the member id a peer call came from, as its caller
// sent it (the cluster was checked).
func CallerMember(ctx context.Context) (uint64, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get(mdMember)
	if len(got) != 1 {
		return 0, false
	}
	id, err := strconv.ParseUint(got[0], 16, 64)
	return id, err == nil
}

// clusterCheck refuses peer calls from another cluster.
type clusterCheck struct {
	cluster string // the cluster id as OutgoingContext writes it
}

func newClusterCheck(clusterID uint64) clusterCheck {
	return clusterCheck{cluster: strconv.FormatUint(clusterID, 16)}
}

func (c clusterCheck) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get(mdCluster); len(got) != 1 || got[0] != c.cluster {
		return status.Error(codes.PermissionDenied, "chute: peer call from another cluster")
	}
	return nil
}

func (c clusterCheck) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (c clusterCheck) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := c.check(ss.Context()); err != nil {
		return err
	}
	return handler(srv, ss)
}
