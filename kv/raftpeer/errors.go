package raftpeer

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors of peer input refused by the server, and of the server's waits.
// A client sees them as the gRPC status toStatus maps them to.
var (
	// ErrMessageTooLarge: an encoded request over Config.MaxMessageBytes.
	ErrMessageTooLarge = errors.New("raftpeer: message too large")
	// ErrTooManyEntries: an AppendEntries over Config.MaxEntries.
	ErrTooManyEntries = errors.New("raftpeer: too many entries")
	// ErrMalformed: a request that does not decode, or a snapshot stream
	// out of order.
	ErrMalformed = errors.New("raftpeer: malformed request")
	// ErrSnapshotTooLarge: a snapshot announced over Config.MaxSnapshotBytes,
	// or a chunk over Config.SnapshotChunkBytes.
	ErrSnapshotTooLarge = errors.New("raftpeer: snapshot or chunk too large")
	// ErrSnapshotSize: a snapshot stream longer or shorter than announced.
	ErrSnapshotSize = errors.New("raftpeer: snapshot size differs from the announced size")
	// ErrStalled: raft did not take a request, or a snapshot chunk did not
	// come, within Config.Timeout.
	ErrStalled = errors.New("raftpeer: stalled")
	// ErrNotAddressee: a request for another raft server than this one
	// (Transport.SetLocalID).
	ErrNotAddressee = errors.New("raftpeer: request for another server")
	// ErrOtherCluster: a request from a server of another raft cluster
	// (Transport.SetRaftCluster).
	ErrOtherCluster = errors.New("raftpeer: request from another raft cluster")
	// ErrRemote wraps the error a peer's raft answered with.
	ErrRemote = errors.New("raftpeer: peer answered")
)

// toStatus maps a server-side error to the gRPC status the caller gets.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrMessageTooLarge), errors.Is(err, ErrTooManyEntries),
		errors.Is(err, ErrSnapshotTooLarge):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrSnapshotSize):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrNotAddressee), errors.Is(err, ErrOtherCluster):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrStalled), errors.Is(err, raft.ErrTransportShutdown):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}
