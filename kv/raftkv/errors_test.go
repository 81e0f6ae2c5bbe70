package raftkv

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv"
)

// TestErrors_overTheWire maps an error the leader serves a call with to
// etcd's gRPC error, and back to what the follower returns.
func TestErrors_overTheWire(t *testing.T) {
	other := status.Error(codes.PermissionDenied, "chute: peer call from another cluster")
	tests := []struct {
		name       string
		leader     error
		wantStatus error
		want       error // errors.Is on the follower's side
	}{
		{"not leader", fromRaft(raft.ErrNotLeader), rpctypes.ErrGRPCNotLeader, errLeaderGone},
		{"leadership lost", fromRaft(raft.ErrLeadershipLost), rpctypes.ErrGRPCLeaderChanged, kv.ErrLeaderChanged},
		{"transfer in progress", fromRaft(raft.ErrLeadershipTransferInProgress), rpctypes.ErrGRPCNotLeader, errLeaderGone},
		{"enqueue timeout", fromRaft(raft.ErrEnqueueTimeout), rpctypes.ErrGRPCTimeout, kv.ErrTimeout},
		{"timeout", kv.ErrTimeout, rpctypes.ErrGRPCTimeout, kv.ErrTimeout},
		{"no leader", kv.ErrNoLeader, rpctypes.ErrGRPCNoLeader, kv.ErrNoLeader},
		{"lease not found", fmt.Errorf("renew: %w", kv.ErrLeaseNotFound), rpctypes.ErrGRPCLeaseNotFound, kv.ErrLeaseNotFound},
		{"stopped", fromRaft(raft.ErrRaftShutdown), rpctypes.ErrGRPCStopped, errLeaderGone},
		{"other status", other, other, other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toStatus(tt.leader)
			if !errors.Is(got, tt.wantStatus) {
				t.Fatalf("toStatus = %v, want %v", got, tt.wantStatus)
			}
			if back := fromStatus(got); !errors.Is(back, tt.want) {
				t.Fatalf("fromStatus = %v, want %v", back, tt.want)
			}
		})
	}
}

// TestErrors_toStatus_misc covers the rest of the leader's mapping.
func TestErrors_toStatus_misc(t *testing.T) {
	tests := []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("%w: 3 bytes", ErrCommandTooLarge), codes.InvalidArgument},
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{errors.New("disk on fire"), codes.Internal},
	}
	for _, tt := range tests {
		if got := status.Code(toStatus(tt.err)); got != tt.want {
			t.Errorf("toStatus(%v) has code %v, want %v", tt.err, got, tt.want)
		}
	}
	if toStatus(nil) != nil || fromStatus(nil) != nil {
		t.Error("nil maps to an error")
	}
	// The connection to a leader that went away.
	if err := fromStatus(status.Error(codes.Unavailable, "connection refused")); !errors.Is(err, errLeaderGone) {
		t.Errorf("Unavailable maps to %v, want %v", err, errLeaderGone)
	}
}

// TestErrors_leaderChangedNotLeaderGone: a command raft appended and then
// lost with the leadership may still commit, so it is never marked for
// another try; one refused before it was appended is.
func TestErrors_leaderChangedNotLeaderGone(t *testing.T) {
	for _, err := range []error{raft.ErrLeadershipLost, raft.ErrAbortedByRestore} {
		if got := fromRaft(err); errors.Is(got, errLeaderGone) || !errors.Is(got, kv.ErrLeaderChanged) {
			t.Errorf("fromRaft(%v) = %v, want %v and no retry", err, got, kv.ErrLeaderChanged)
		}
	}
	if got := fromStatus(rpctypes.ErrGRPCLeaderChanged); errors.Is(got, errLeaderGone) {
		t.Errorf("a leader's %v maps to %v, which is tried again", rpctypes.ErrGRPCLeaderChanged, got)
	}
}
