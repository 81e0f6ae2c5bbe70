package kv

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// changingLeader is a Consensus of one member whose every proposal
// reaches a leader that loses its leadership before answering: the
// command commits anyway (apply) or is lost (!apply), and Propose
// answers ErrLeaderChanged either way. The rest is oneMember's.
type changingLeader struct {
	*oneMember
	apply bool
}

func newChangingLeader(apply bool) *changingLeader {
	return &changingLeader{oneMember: newOneMember(1), apply: apply}
}

func (c *changingLeader) Propose(_ context.Context, cmd []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apply {
		c.index++
		c.srv.StateMachine().Apply(c.index, 1, cmd)
	}
	return ErrLeaderChanged
}

func (c *changingLeader) ProposeAsLeader(ctx context.Context, _ uint64, cmd []byte) error {
	return c.Propose(ctx, cmd)
}

// TestWrite_leaderChanged: a put whose leader lost its leadership after
// taking it answers from this member's apply of it when it commits
// anyway, and "leader changed" when it never does; it is proposed once.
func TestWrite_leaderChanged(t *testing.T) {
	t.Run("committed anyway", func(t *testing.T) {
		c := newChangingLeader(true)
		srv, cli := startServerWith(t, nil, func(s *Server) { c.srv = s; s.SetConsensus(c) })
		resp, err := cli.Put(testCtx(t, 10*time.Second), "k", "v")
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		if resp.Header.Revision != 2 {
			t.Errorf("put at revision %d, want 2", resp.Header.Revision)
		}
		if got := srv.StateMachine().Applied(); got != 1 {
			t.Errorf("%d commands applied, want 1", got)
		}
	})
	t.Run("lost", func(t *testing.T) {
		c := newChangingLeader(false)
		startServerWith(t, nil, func(s *Server) { c.srv = s; s.SetConsensus(c) })
		srv := c.srv
		start := time.Now()
		res := srv.write(testCtx(t, 10*time.Second), &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}})
		if !errors.Is(res.Err, ErrLeaderChanged) {
			t.Fatalf("write: %v, want %v", res.Err, ErrLeaderChanged)
		}
		if took := time.Since(start); took < leaderChangedWait {
			t.Errorf("gave up after %v, want to wait %v for the command", took, leaderChangedWait)
		}
		if !errors.Is(toGRPC(res.Err), rpctypes.ErrGRPCLeaderChanged) {
			t.Errorf("the client gets %v, want %v", toGRPC(res.Err), rpctypes.ErrGRPCLeaderChanged)
		}
	})
}
