package raftkv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/kv"
	"chute/kv/raftnode"
)

// Consensus is kv.Consensus over hashicorp/raft: the leader applies and
// reads through its raft, a follower forwards to the leader's KV peer
// service. It is safe for concurrent use.
type Consensus struct {
	cfg  Config
	raft *raft.Raft
	sm   StateMachine
	log  *slog.Logger

	obs     *raft.Observer
	obsCh   chan raft.Observation // raft's state changes: wake the loop
	readReq chan struct{}         // holds one: a read batch waits for the loop
	stop    chan struct{}         // closed by Close
	life    context.Context       // ended by Close, with kv.ErrStopped
	endLife context.CancelCauseFunc
	wg      sync.WaitGroup // the loop, senders and every goroutine awaiting raft

	// readyTerm is the term read before the last barrier that
	// succeeded: IsLeader needs it to be the current term.
	readyTerm atomic.Uint64
	// readyIndex is that barrier's index: every entry up to it is in the
	// StateMachine once the barrier answered, and every later entry
	// of readyTerm but the nudges reaches it (commands and
	// configurations: the only other kind this member appends in its
	// term after that barrier is the nudge, nudge.go).
	readyIndex atomic.Uint64
	barriers   atomic.Uint64 // barriers issued; tests count them
	nudges     atomic.Uint64 // nudges issued (nudge.go); tests count them
	verifies   atomic.Uint64 // leadership checks issued for reads; tests count them
	forwards   atomic.Uint64 // Propose calls sent to a leader; tests count them

	readMu  sync.Mutex // guards pending
	pending *readBatch // callers for the next barrier; nil: none

	conns *peer.Conns // to the leaders: the few voters

	mu     sync.Mutex // guards closed and queues
	closed bool
	queues map[raft.ServerAddress]*proposeQueue // commands to forward, by leader

	applies applyQueue // commands to apply through this member's raft

	nudgeMu      sync.Mutex // guards the four below
	nudgeRunning bool       // runNudges is on its way
	nudgeAgain   bool       // nudgeIfQuiet was called since its last look
	nudging      *nudge     // the nudge appended and not answered, nil when none
	nudged       *nudge     // the last nudge that answered
	nudgeNext    time.Time  // the earliest the next nudge may go; runNudges' own
}

var _ kv.Consensus = (*Consensus)(nil)

// readyRetry is how often the loop looks again at whether this member
// leads without having committed a barrier in its term: a fallback for
// a dropped observation or a barrier that failed.
const readyRetry = 200 * time.Millisecond

// New builds a Consensus on cfg.Raft and starts its loop. Register its
// service on the peer listener before the listener serves, and Close it
// before raft shuts down.
func New(cfg Config) (*Consensus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Consensus{
		cfg:     cfg,
		raft:    cfg.Raft,
		sm:      cfg.SM,
		log:     cfg.Logger,
		obsCh:   make(chan raft.Observation, 16),
		readReq: make(chan struct{}, 1),
		stop:    make(chan struct{}),
		conns:   peer.NewConns(cfg.DialOptions...),
		queues:  make(map[raft.ServerAddress]*proposeQueue),
	}
	c.applies.c = c
	c.life, c.endLife = context.WithCancelCause(context.Background())
	c.obs = raft.NewObserver(c.obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.RaftState)
		return ok
	})
	c.raft.RegisterObserver(c.obs)
	c.readReq <- struct{}{} // the loop looks at raft's state at once
	c.wg.Add(1)
	go c.loop()
	return c, nil
}

// Register adds the KV peer service, which followers call on the
// leader, to a gRPC server: the peer listener, before it serves.
func (c *Consensus) Register(s grpc.ServiceRegistrar) {
	peerpb.RegisterKVServer(s, &service{c: c})
}

// Close stops the loop, ends every call in flight with kv.ErrStopped
// and closes the connections to leaders. It waits for raft to answer
// the futures it was waiting for, which raft does within its own
// timeouts (see the package doc). It is safe to call more than once;
// it always returns nil.
func (c *Consensus) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	c.endLife(kv.ErrStopped)
	c.mu.Unlock()
	c.raft.DeregisterObserver(c.obs)
	c.conns.Close()
	c.wg.Wait()
	return nil
}

// Propose replicates cmd through the leader: this member's raft when it
// leads, else the leader's KV.Propose, in one call with the commands
// proposed here meanwhile (batch.go). It returns once the leader applied
// cmd.
func (c *Consensus) Propose(ctx context.Context, cmd []byte) error {
	if err := c.checkSize(cmd); err != nil {
		return err
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	return c.route(ctx, false,
		func(ctx context.Context) error {
			_, err := c.applyLocal(ctx, 0, cmd)
			return err
		},
		func(ctx context.Context, leader raft.ServerAddress) error {
			return c.proposeRemote(ctx, leader, cmd)
		})
}

// ProposeAsLeader applies cmd through this member's raft, never
// forwarded, only while it leads in term (see kv.Consensus).
// The apply queue checks the term, right before raft.Apply (pack.go).
func (c *Consensus) ProposeAsLeader(ctx context.Context, term uint64, cmd []byte) error {
	if err := c.checkSize(cmd); err != nil {
		return err
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.applyLocal(ctx, term, cmd)
	if errors.Is(err, errLeaderGone) {
		return fmt.Errorf("%w: %w", kv.ErrNotLeader, err)
	}
	return err
}

// checkSize refuses a command over MaxCommandBytes.
func (c *Consensus) checkSize(cmd []byte) error {
	if len(cmd) > c.cfg.MaxCommandBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrCommandTooLarge, len(cmd), c.cfg.MaxCommandBytes)
	}
	return nil
}

// leadsIn reports whether this member leads in term. raft changes the
// term and the state one after the other: read the state first, as
// Status does, so that a leader of term read is of that term.
func (c *Consensus) leadsIn(term uint64) bool {
	return c.raft.State() == raft.Leader && c.raft.CurrentTerm() == term
}

// ReadIndex returns the leader's StateMachine.Applied after a barrier
// issued after the call began (see the package doc); a follower asks the
// leader's KV.ReadIndex.
func (c *Consensus) ReadIndex(ctx context.Context) (uint64, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	var index uint64
	err := c.route(ctx, true,
		func(ctx context.Context) (err error) {
			index, err = c.leaderRead(ctx)
			return err
		},
		c.remoteCall(func(ctx context.Context, leader peerpb.KVClient) error {
			out, err := leader.ReadIndex(ctx, &peerpb.ReadIndexRequest{})
			if err == nil {
				index = out.Index
			}
			return err
		}))
	return index, err
}

// RenewLease restarts a lease's TTL on the leader's StateMachine; a
// follower asks the leader's KV.LeaseRenew.
func (c *Consensus) RenewLease(ctx context.Context, id int64) (int64, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	var ttl int64
	err := c.route(ctx, true,
		func(ctx context.Context) (err error) {
			ttl, err = c.renewLocal(ctx, id)
			return err
		},
		c.remoteCall(func(ctx context.Context, leader peerpb.KVClient) error {
			out, err := leader.LeaseRenew(ctx, &peerpb.LeaseRenewRequest{Id: id})
			if err == nil {
				ttl = out.Ttl
			}
			return err
		}))
	return ttl, err
}

// TransferLeader moves the leadership to member, one of the voters of
// raft's configuration, and returns once it moved. Only the leader
// serves it; naming the leader itself is done at once, as in etcd.
func (c *Consensus) TransferLeader(ctx context.Context, member uint64) error {
	if c.raft.State() != raft.Leader {
		return kv.ErrNotLeader
	}
	if member == c.cfg.MemberID {
		return nil
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	f := c.raft.GetConfiguration()
	if err := c.awaitFuture(ctx, f); err != nil {
		return err
	}
	id, addr, ok := voterOf(f.Configuration(), member)
	if !ok {
		return fmt.Errorf("%w: member %016x is not a voter", kv.ErrBadTransferee, member)
	}
	err := c.awaitFuture(ctx, c.raft.LeadershipTransferToServer(id, addr))
	if errors.Is(err, errLeaderGone) || errors.Is(err, kv.ErrLeaderChanged) {
		return fmt.Errorf("%w: %w", kv.ErrNotLeader, err)
	}
	return err
}

// voterOf returns the voter of cfg that member runs: its server id is
// the member id, in 16 hex digits, and a dash (see kv/raftnode).
func voterOf(cfg raft.Configuration, member uint64) (raft.ServerID, raft.ServerAddress, bool) {
	prefix := fmt.Sprintf("%016x-", member)
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter && len(s.ID) > len(prefix) && string(s.ID[:len(prefix)]) == prefix {
			return s.ID, s.Address, true
		}
	}
	return "", "", false
}

// Status reads raft's state from its atomics and one read lock.
// IsLeader holds once this member, leading, committed a barrier in the
// current term: its StateMachine then holds every entry of earlier terms.
func (c *Consensus) Status() kv.ConsensusStatus {
	_, id := c.raft.LeaderWithID()
	term := c.raft.CurrentTerm()
	// raft sets a new term before it becomes leader in it: with the term
	// the same after the state, the state is of that term.
	leads := c.raft.State() == raft.Leader && c.raft.CurrentTerm() == term
	return kv.ConsensusStatus{
		Leader:      leaderMember(id),
		IsLeader:    leads && c.readyTerm.Load() == term,
		Term:        term,
		CommitIndex: c.raft.CommitIndex(),
		LastIndex:   c.raft.LastIndex(),
	}
}

// leaderMember returns the member id of a leader's server id, 0 when it
// has none.
func leaderMember(id raft.ServerID) uint64 {
	m, _ := raftnode.MemberOf(id)
	return m
}

// callContext bounds one call by ApplyTimeout; its expiry is the cause
// kv.ErrTimeout, which context.Cause tells from the caller's own end.
func (c *Consensus) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.cfg.ApplyTimeout, kv.ErrTimeout)
}

// applyLocal applies cmd through this member's raft, in the next entry
// of its apply queue (pack.go), and returns the entry's index once
// applied; a term other than 0 binds it to that term (applyQueue.apply).
func (c *Consensus) applyLocal(ctx context.Context, term uint64, cmd []byte) (uint64, error) {
	out, err := c.applies.apply(ctx, term, [][]byte{cmd})
	if err != nil {
		return 0, err
	}
	select {
	case o := <-out[0]:
		return o.index, o.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-c.stop:
		return 0, kv.ErrStopped
	}
}

// renewLocal renews a lease on the leader's StateMachine, once it holds
// every earlier term's entries (the leases those granted): a new leader
// first commits a barrier.
func (c *Consensus) renewLocal(ctx context.Context, id int64) (int64, error) {
	if c.raft.State() != raft.Leader {
		return 0, fmt.Errorf("%w: %w", errLeaderGone, raft.ErrNotLeader)
	}
	if c.readyTerm.Load() != c.raft.CurrentTerm() {
		if _, err := c.leaderRead(ctx); err != nil {
			return 0, err
		}
	}
	ttl, err := c.sm.RenewLease(id)
	if errors.Is(err, kv.ErrNotLeader) {
		// The term ended before its checkpoint: whoever leads next may
		// renew it.
		err = fmt.Errorf("%w: %w", errLeaderGone, err)
	}
	return ttl, err
}

// awaitFuture waits for raft's answer to f, or for ctx or Close. raft's
// futures have no channel, so a goroutine of the Consensus waits for it
// and ends when raft answers, even after the caller left.
func (c *Consensus) awaitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	if !c.goAttach(func() { done <- f.Error() }) {
		return kv.ErrStopped
	}
	select {
	case err := <-done:
		return fromRaft(err)
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.stop:
		return kv.ErrStopped
	}
}

// goAttach runs fn on a goroutine Close waits for, unless closed.
func (c *Consensus) goAttach(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// stopped reports whether Close was called.
func (c *Consensus) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}
