package kv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"chute/internal/testutil"
)

// termLeader is a Consensus of one member that leads in statusTerm, as
// Status says, while ProposeAsLeader takes only raftTerm's commands: the
// two differ for a member whose term ended without its Status showing it
// yet. It records how each leader duty was proposed.
type termLeader struct {
	srv        *Server
	statusTerm uint64

	mu       sync.Mutex // guards the fields below
	raftTerm uint64
	index    uint64
	duties   []string // "<how> <kind>" of each revoke, checkpoint and compaction
}

func (c *termLeader) Propose(_ context.Context, cmd []byte) error {
	return c.apply("propose", cmd)
}

func (c *termLeader) ProposeAsLeader(_ context.Context, term uint64, cmd []byte) error {
	c.mu.Lock()
	refused := term != c.raftTerm
	c.mu.Unlock()
	if refused {
		c.record(fmt.Sprintf("refused in term %d", term), cmd)
		return ErrNotLeader
	}
	return c.apply(fmt.Sprintf("as leader in term %d", term), cmd)
}

func (c *termLeader) apply(how string, cmd []byte) error {
	c.record(how, cmd)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index++
	c.srv.StateMachine().Apply(c.index, 1, cmd)
	return nil
}

func (c *termLeader) record(how string, cmd []byte) {
	var req pb.InternalRaftRequest
	if err := proto.Unmarshal(cmd, &req); err != nil {
		panic(err)
	}
	kind := ""
	switch {
	case req.LeaseRevoke != nil:
		kind = "revoke"
	case req.LeaseCheckpoint != nil:
		kind = "checkpoint"
	case req.Compaction != nil:
		kind = "compaction"
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.duties = append(c.duties, how+" "+kind)
}

func (c *termLeader) ReadIndex(context.Context) (uint64, error) {
	return c.srv.StateMachine().Applied(), nil
}

func (c *termLeader) RenewLease(_ context.Context, id int64) (int64, error) {
	return c.srv.StateMachine().RenewLease(id)
}

func (c *termLeader) TransferLeader(context.Context, uint64) error { return ErrBadTransferee }

func (c *termLeader) Status() ConsensusStatus {
	return ConsensusStatus{Leader: 0xabcd, IsLeader: true, Term: c.statusTerm}
}

func (c *termLeader) setRaftTerm(term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raftTerm = term
	c.duties = nil
}

func (c *termLeader) recorded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.duties...)
}

// TestLeaderDuties_inTheirTerm: the leader records renewals and revokes
// expired leases only through ProposeAsLeader, in the term its Status
// showed; a member whose term ended meanwhile revokes nothing.
func TestLeaderDuties_inTheirTerm(t *testing.T) {
	c := &termLeader{statusTerm: 5, raftTerm: 5}
	srv, cli := startServerWith(t, func(cfg *Config) { cfg.LeaseCheckInterval = 20 * time.Millisecond },
		func(s *Server) { c.srv = s; s.SetConsensus(c) })
	ctx := testCtx(t, 10*time.Second)

	grant, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ka, err := cli.KeepAliveOnce(ctx, grant.ID); err != nil || ka.TTL != 1 {
		t.Fatalf("keep-alive: %+v, %v; want TTL 1", ka, err)
	}
	testutil.Eventually(t, 5*time.Second, "the lease revoked", func() error {
		if _, err := srv.store.TimeToLive(int64(grant.ID), false); err == nil {
			return fmt.Errorf("lease %x still there", grant.ID)
		}
		return nil
	})
	got := c.recorded()
	want := []string{"as leader in term 5 checkpoint", "as leader in term 5 revoke"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("duties proposed as %q, want %q", got, want)
	}

	// The term ends without Status showing it: the expiry is refused
	// each time it is tried, and the lease stays.
	c.setRaftTerm(6)
	stale, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the expiry tried", func() error {
		if len(c.recorded()) < 2 {
			return fmt.Errorf("duties so far: %q", c.recorded())
		}
		return nil
	})
	if _, err := srv.store.TimeToLive(int64(stale.ID), false); err != nil {
		t.Errorf("lease of a member whose term ended: %v, want it kept", err)
	}
	for _, d := range c.recorded() {
		if d != "refused in term 5 revoke" {
			t.Errorf("after the term ended, a duty was proposed as %q", d)
		}
	}
}
