//go:build e2e

package e2e

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
)

// TestCluster_memberRemove checks etcd's member remove against gossip
// membership: an alive member and this member are refused with
// FailedPrecondition, an unknown id (remove or update) with etcd's "member
// not found", and a killed member is forced out once serf reports it
// failed; MemberAdd is refused with a message pointing at --join.
func TestCluster_memberRemove(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	cli := clusterClient(t, a.ClientAddr)
	ctx, cancel := rpcCtx()
	defer cancel()

	if _, err := cli.MemberRemove(ctx, gossip.MemberID(cc.Name)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("remove an alive member: got %v, want FailedPrecondition", err)
	}
	if _, err := cli.MemberRemove(ctx, 12345); !errors.Is(err, rpctypes.ErrMemberNotFound) {
		t.Fatalf("remove an unknown member: got %v, want %v", err, rpctypes.ErrMemberNotFound)
	}
	if _, err := cli.MemberUpdate(ctx, 12345, []string{"http://127.0.0.1:1"}); !errors.Is(err, rpctypes.ErrMemberNotFound) {
		t.Fatalf("update an unknown member: got %v, want %v", err, rpctypes.ErrMemberNotFound)
	}
	if _, err := cli.MemberAdd(ctx, []string{"http://127.0.0.1:1"}); err == nil || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("member add: got %v, want FailedPrecondition explaining --join", err)
	}

	b.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rctx, rcancel := rpcCtx()
		_, err := cli.MemberRemove(rctx, gossip.MemberID(b.Name))
		rcancel()
		if err == nil {
			break
		}
		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
			t.Fatalf("remove the killed member: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // until serf reports it failed
	}
	waitMembers(t, []*Proc{a, cc}, []*Proc{a, cc})
}
