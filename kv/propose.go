package kv

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"chute/kv/auth"
	"chute/kv/mvcc"
)

// internalWriteTimeout bounds a write of this member's own (a dispatcher
// or consumer record, the leader's revokes, checkpoints and compactions)
// whose caller has no deadline.
const internalWriteTimeout = 5 * time.Second

// applyWaitTimeout bounds the wait for this member to apply a command the
// consensus reported committed, when the caller's context has no deadline.
const applyWaitTimeout = 30 * time.Second

// leaderChangedWait bounds the wait for a command whose leader lost its
// leadership before committing it (ErrLeaderChanged): a new leader that
// has it commits it within an election or two.
const leaderChangedWait = 5 * time.Second

// write runs one write command: proposed through the consensus and
// answered from this member's own apply of it, or, for a member alone
// (no Consensus), applied at once. Writes of a member alone are
// serialised by localMu so that applied indexes follow apply order.
func (s *Server) write(ctx context.Context, req *pb.InternalRaftRequest) mvcc.Result {
	return s.writeBy(ctx, req, func(ctx context.Context, cmd []byte) error {
		return s.consensus.Propose(ctx, cmd)
	})
}

// writeClient is write for a client's put, delete, txn or lease revoke:
// one that kv let through unchecked, auth being off, carries an empty
// header, which the apply refuses (auth.ErrUserEmpty) if auth is on by
// then (StateMachine.checkAuth), as etcd's apply refuses a request with
// no user: an anonymous write made as auth was enabled, or on a member
// that had not applied the enable yet, landed. The member's own writes
// (writeOwn, the leader's duties) carry none and are not checked.
func (s *Server) writeClient(ctx context.Context, req *pb.InternalRaftRequest) mvcc.Result {
	if _, ok := checkedFrom(ctx); !ok {
		req.Header = &pb.RequestHeader{}
	}
	return s.write(ctx, req)
}

// writeAsLeader runs a write of the leader's duties, decided while this
// member led in term: proposed only through its own log and only in that
// term (Consensus.ProposeAsLeader), bounded by internalWriteTimeout.
func (s *Server) writeAsLeader(term uint64, req *pb.InternalRaftRequest) mvcc.Result {
	ctx, cancel := context.WithTimeout(context.Background(), internalWriteTimeout)
	defer cancel()
	return s.writeBy(ctx, req, func(ctx context.Context, cmd []byte) error {
		return s.consensus.ProposeAsLeader(ctx, term, cmd)
	})
}

// writeBy is write with the consensus's propose given.
func (s *Server) writeBy(ctx context.Context, req *pb.InternalRaftRequest, propose func(context.Context, []byte) error) mvcc.Result {
	sm := s.sm
	if c, ok := checkedFrom(ctx); ok {
		// The apply checks again at this revision (StateMachine.checkAuth).
		req.Header = &pb.RequestHeader{Username: c.user, AuthRevision: c.rev}
	}
	if s.consensus == nil {
		s.localMu.Lock()
		defer s.localMu.Unlock()
		return sm.ApplyLocal(req)
	}
	id, ch, cancel := sm.Register()
	defer cancel()
	req.ID = id
	cmd, err := proto.Marshal(req)
	if err != nil {
		return mvcc.Result{Err: err}
	}
	wait, timeoutErr := applyWaitTimeout, ErrTimeout
	if err := propose(ctx, cmd); errors.Is(err, ErrLeaderChanged) {
		// It may commit under the next leader: this member applies it
		// then, and answers from that, as etcd's proposer waits.
		wait, timeoutErr = leaderChangedWait, err
	} else if err != nil {
		return mvcc.Result{Err: err}
	}
	var timeout <-chan time.Time
	if _, ok := ctx.Deadline(); !ok || wait == leaderChangedWait {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case res := <-ch:
		if errors.Is(res.Err, mvcc.ErrResultUnknown) {
			// A snapshot replaced the state: the command may have been
			// applied or not, as after a timeout.
			res.Err = ErrTimeout
		}
		return res
	case <-ctx.Done():
		return mvcc.Result{Err: ctx.Err()}
	case <-timeout:
		return mvcc.Result{Err: timeoutErr}
	case <-s.stop:
		return mvcc.Result{Err: ErrStopped}
	}
}

// linearize returns once this member's state holds every write
// acknowledged before the call (etcd's read index); at once for a member
// alone.
func (s *Server) linearize(ctx context.Context) error {
	if s.consensus == nil {
		return nil
	}
	idx, err := s.consensus.ReadIndex(ctx)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, applyWaitTimeout)
		defer cancel()
	}
	if err := s.sm.WaitApplied(ctx, idx); err != nil {
		if ctx.Err() != nil {
			return ErrTimeout
		}
		return err
	}
	return nil
}

// syncCheckInterval is how often a member that started asks whether it
// caught up with the cluster's key space.
const syncCheckInterval = 100 * time.Millisecond

// Synced reports whether this member's key space caught up with the
// cluster's once since Start: a member restarted on its data dir holds
// only what it applied before it stopped until the leader tells it what
// was committed since. Until then its queue settings and dispatcher
// records may be stale, so puts to queues are refused (putToQueue).
// Once true it stays true. A member alone is synced from the start.
func (s *Server) Synced() bool { return s.synced.Load() }

// runSync asks whether this member caught up, every syncCheckInterval,
// until it has or the server stops.
func (s *Server) runSync() {
	t := time.NewTicker(syncCheckInterval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*syncCheckInterval)
		ok := s.caughtUp(ctx)
		cancel()
		if ok {
			s.synced.Store(true)
			s.log.Info("key space caught up with the cluster", "applied", s.sm.Applied())
			return
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// caughtUp reports whether this member has applied every write the
// cluster committed before the call: it asks the leader for its read
// index, bounded by ctx.
func (s *Server) caughtUp(ctx context.Context) bool {
	if s.consensus.Status().Leader == 0 {
		return false // no leader to ask: do not wait for one
	}
	idx, err := s.consensus.ReadIndex(ctx)
	if err == nil {
		err = s.sm.WaitApplied(ctx, idx)
	}
	if err != nil {
		s.log.Debug("key space not caught up yet", "read_index", idx, "applied", s.sm.Applied(), "err", err)
		return false
	}
	return true
}

// authMoved returns auth.ErrAuthOldRevision when ctx's call was checked
// at an auth revision this member has since passed, as etcd answers a
// read whose check an auth change overtook: the answer may hold what
// the change took away. The client logs in again and retries.
//
// A call let through unchecked, auth being off, is refused with
// auth.ErrUserEmpty if auth is on by now, as etcd checks a read once it
// is linearized: a linearizable read without a user waited for the
// enable and was answered anyway.
func (s *Server) authMoved(ctx context.Context) error {
	c, ok := checkedFrom(ctx)
	switch {
	case ok && c.rev != s.sm.Auth().Revision():
		return auth.ErrAuthOldRevision
	case !ok && s.sm.Auth().Enabled():
		return auth.ErrUserEmpty
	}
	return nil
}
