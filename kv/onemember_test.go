package kv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// oneMember is a Consensus of one member for kv's tests: it applies what
// is proposed at once, at the next index. Status shows the leader the
// test sets (0: none, as on a member cut off from the majority) and this
// member leading in statusTerm when it is the leader, while
// ProposeAsLeader takes only raftTerm's commands: the two differ for a
// member whose term ended without its Status showing it yet. It records
// how each leader duty was proposed.
type oneMember struct {
	srv        *Server
	statusTerm atomic.Uint64
	leader     atomic.Uint64

	mu       sync.Mutex // guards the fields below
	raftTerm uint64
	index    uint64
	duties   []string // "<how> <kind>" of each revoke, checkpoint and compaction
}

// newOneMember returns a oneMember leading in term, to be given to srv
// (Server.SetConsensus) before it starts.
func newOneMember(term uint64) *oneMember {
	c := &oneMember{raftTerm: term}
	c.statusTerm.Store(term)
	c.leader.Store(0xabcd) // startServerWith's member id
	return c
}

func (c *oneMember) Propose(_ context.Context, cmd []byte) error {
	return c.apply("propose", cmd)
}

func (c *oneMember) ProposeAsLeader(_ context.Context, term uint64, cmd []byte) error {
	c.mu.Lock()
	refused := term != c.raftTerm
	c.mu.Unlock()
	if refused {
		c.record(fmt.Sprintf("refused in term %d", term), cmd)
		return ErrNotLeader
	}
	return c.apply(fmt.Sprintf("as leader in term %d", term), cmd)
}

func (c *oneMember) apply(how string, cmd []byte) error {
	c.record(how, cmd)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index++
	c.srv.StateMachine().Apply(c.index, 1, cmd)
	return nil
}

func (c *oneMember) record(how string, cmd []byte) {
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

func (c *oneMember) ReadIndex(context.Context) (uint64, error) {
	return c.srv.StateMachine().Applied(), nil
}

func (c *oneMember) RenewLease(_ context.Context, id int64) (int64, error) {
	return c.srv.StateMachine().RenewLease(id)
}

func (c *oneMember) TransferLeader(context.Context, uint64) error { return ErrBadTransferee }

func (c *oneMember) Status() ConsensusStatus {
	l := c.leader.Load()
	return ConsensusStatus{Leader: l, IsLeader: l == c.srv.cfg.MemberID, Term: c.statusTerm.Load()}
}

func (c *oneMember) setRaftTerm(term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raftTerm = term
	c.duties = nil
}

func (c *oneMember) recorded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.duties...)
}
