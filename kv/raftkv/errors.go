package raftkv

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv"
)

// ErrCommandTooLarge: a command over Config.MaxCommandBytes, proposed
// here or forwarded by a peer (answered with InvalidArgument).
var ErrCommandTooLarge = errors.New("raftkv: command too large")

// ErrBadBatch: a forwarded call with no command or more than a call may
// carry (answered with InvalidArgument).
var ErrBadBatch = errors.New("raftkv: bad batch of commands")

// errLeaderGone marks a failure that another try may not have: the
// leader changed, stepped down or could not be reached. Consensus
// retries it (see route) and never returns it.
var errLeaderGone = errors.New("raftkv: leader gone")

// fromRaft maps an error of raft's to the package's: kv's sentinels,
// errLeaderGone for a request refused because the leadership moved,
// kv.ErrLeaderChanged for one the leader took and lost with it.
func fromRaft(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Refused before it was appended: another try is safe.
		return fmt.Errorf("%w: %w", errLeaderGone, err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		// Appended, then the leadership went: it may commit yet.
		return fmt.Errorf("%w: %w", kv.ErrLeaderChanged, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", kv.ErrTimeout, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", kv.ErrStopped, err)
	}
	return err
}

// toStatus maps the error of a call the leader serves to the gRPC error
// the follower gets: etcd's, for the follower to map back (fromStatus).
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errLeaderGone), errors.Is(err, kv.ErrNotLeader):
		return rpctypes.ErrGRPCNotLeader
	case errors.Is(err, kv.ErrLeaderChanged):
		return rpctypes.ErrGRPCLeaderChanged
	case errors.Is(err, kv.ErrNoLeader):
		return rpctypes.ErrGRPCNoLeader
	case errors.Is(err, kv.ErrTimeout):
		return rpctypes.ErrGRPCTimeout
	case errors.Is(err, kv.ErrStopped):
		return rpctypes.ErrGRPCStopped
	case errors.Is(err, kv.ErrLeaseNotFound):
		return rpctypes.ErrGRPCLeaseNotFound
	case errors.Is(err, ErrCommandTooLarge), errors.Is(err, ErrBadBatch):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// fromStatus maps the error of a call to the leader back to kv's
// sentinels, and a call that did not reach a serving leader
// (Unavailable from the connection, etcd's "not leader", "stopped") to
// errLeaderGone; any other status passes through unchanged.
func fromStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrGRPCNoLeader):
		return kv.ErrNoLeader
	case errors.Is(err, rpctypes.ErrGRPCTimeout):
		return kv.ErrTimeout
	case errors.Is(err, rpctypes.ErrGRPCLeaseNotFound):
		return kv.ErrLeaseNotFound
	case errors.Is(err, rpctypes.ErrGRPCLeaderChanged):
		return kv.ErrLeaderChanged
	case errors.Is(err, rpctypes.ErrGRPCNotLeader), errors.Is(err, rpctypes.ErrGRPCStopped):
		return fmt.Errorf("%w: %w", errLeaderGone, err)
	case status.Code(err) == codes.Unavailable:
		return fmt.Errorf("%w: %w", errLeaderGone, err)
	}
	return err
}
