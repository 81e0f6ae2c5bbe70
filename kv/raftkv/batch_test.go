package raftkv

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Only a call that provably did not reach raft may be forwarded again:
// another try of one that broke on the way could apply its commands
// twice.
func TestRefusedUnsent(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"not leader", rpctypes.ErrGRPCNotLeader, true},
		{"dial refused", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`), true},
		{"no address", status.Error(codes.Unavailable, "there is no address available"), true},
		{"transport closing", status.Error(codes.Unavailable, "transport is closing"), false},
		{"read broke", status.Error(codes.Unavailable, "error reading from server: EOF"), false},
		{"leader stopped", rpctypes.ErrGRPCStopped, false},
		{"timeout", rpctypes.ErrGRPCTimeout, false},
		{"plain error", errors.New("connect: connection refused"), false},
		{"wrapped not leader", fmt.Errorf("call: %w", rpctypes.ErrGRPCNotLeader), true},
	} {
		if got := refusedUnsent(tc.err); got != tc.want {
			t.Errorf("refusedUnsent(%s: %v): got %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
