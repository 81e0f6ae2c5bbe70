package kv

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/kv/mvcc"
)

// With a Consensus, lease deadlines are kept by the leader, as in etcd:
// keep-alives reach it (RenewLease) and it proposes the revoke of a lease
// whose deadline passed. Unlike etcd, which gives every lease its whole
// TTL again when a new leader takes over, a renewal is acknowledged only
// once a checkpoint of it (the lease's remaining TTL) is committed:
// renewals arriving together share one checkpoint (group commit, as
// fsync is batched). So every member knows every acknowledged deadline,
// and a lease whose holder stopped expires about its TTL after the last
// renewal even when the leader died meanwhile, never before. The leader
// also proposes the automatic compaction, so that every member compacts
// at the same revision whatever its own configuration. Each of these
// duties is proposed in the term it was decided in, through this
// member's log only (Consensus.ProposeAsLeader): its view of the
// deadlines is its term's, and a member that lost the term must not
// act on it through the next leader.

// checkpointGather is how long a checkpoint waits for more renewals to
// share it once the first one arrived.
const checkpointGather = 5 * time.Millisecond

// leaderLeaseGrace is the least time a member that becomes leader gives
// each lease: a holder keeping it alive needs a moment to reach the new
// leader after an election (etcd extends by its election timeout).
const leaderLeaseGrace = time.Second

// maxRevokesPerTick bounds the revokes the leader proposes per lease
// check; the rest wait for the next.
const maxRevokesPerTick = 64

// maxCheckpointsPerCommand bounds the leases of one checkpoint command.
const maxCheckpointsPerCommand = 1000

// runLeader runs the leader's duties on every lease check while this
// member leads, until the server stops.
func (s *Server) runLeader() {
	t := time.NewTicker(s.cfg.LeaseCheckInterval)
	defer t.Stop()
	// ledTerm is the term whose leases were last given their grace: a
	// term, not a flag, so that leading again in a later term gives it
	// again, though no check saw this member follow in between (a check
	// can wait seconds for a commit while leadership goes and comes).
	var ledTerm uint64
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		st := s.consensus.Status()
		if !st.IsLeader {
			ledTerm = 0
			continue
		}
		now := s.now()
		if st.Term != ledTerm {
			ledTerm = st.Term
			s.store.ExtendLeases(now.Add(leaderLeaseGrace))
			s.log.Info("leading the key space: lease deadlines and compaction are this member's")
		}
		s.revokeExpired(st.Term, now)
		s.maybeCompact(st.Term)
	}
}

// revokeExpired proposes, in term, the revoke of every lease whose
// deadline passed. Each is checked again and marked just before its
// revoke is proposed (MarkRevoking): the revokes of one check commit one
// after the other, and a keep-alive of a lease later in the list would
// otherwise be acknowledged and then revoked.
func (s *Server) revokeExpired(term uint64, now time.Time) {
	for _, id := range s.store.ExpiredLeases(now, maxRevokesPerTick) {
		if !s.store.MarkRevoking(id, s.now()) {
			continue // renewed since the list was made
		}
		res := s.writeAsLeader(term, &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: id}})
		if res.Err != nil && !errors.Is(res.Err, mvcc.ErrLeaseNotFound) {
			s.store.UnmarkRevoking(id)
			s.log.Warn("lease not revoked; retrying at the next check", "lease", id, "err", res.Err)
			return
		}
		s.log.Debug("lease expired", "lease", id)
	}
}

// checkpoints gathers renewals into shared checkpoint commands.
type checkpoints struct {
	mu    sync.Mutex // guards batch
	batch *checkpointBatch
}

// checkpointBatch is the renewals one checkpoint command records, all
// made while this member led in term.
type checkpointBatch struct {
	term uint64
	ids  map[int64]struct{}
	done chan struct{} // closed once err is set
	err  error
}

// recordRenewal returns once a checkpoint holding the lease's deadline
// is committed in the term the renewal was made in, and the lease is
// still there, or fails: the renewal is then not acknowledged, and the
// client's keep-alive tries again. A leader that lost its term between
// the renewal and the checkpoint renewed a deadline nobody else knows,
// and may have missed the lease's revoke.
func (s *Server) recordRenewal(id int64) error {
	st := s.consensus.Status()
	if !st.IsLeader {
		return ErrNotLeader
	}
	c := &s.checkpoints
	c.mu.Lock()
	b := c.batch
	if b != nil && b.term != st.Term {
		c.mu.Unlock()
		return ErrLeaderChanged // the pending batch's term is over: it fails too
	}
	first := b == nil
	if first {
		b = &checkpointBatch{term: st.Term, ids: make(map[int64]struct{}), done: make(chan struct{})}
		c.batch = b
	}
	b.ids[id] = struct{}{}
	c.mu.Unlock()
	if first {
		s.commitCheckpoint(b) // the first renewal commits for all that join it
	}
	<-b.done
	if b.err != nil {
		return b.err
	}
	_, err := s.store.TimeToLive(id, false) // ErrLeaseNotFound once revoked
	return err
}

// commitCheckpoint proposes the deadlines of b's leases, after a moment
// in which more renewals may join b, and closes b.done.
func (s *Server) commitCheckpoint(b *checkpointBatch) {
	t := time.NewTimer(checkpointGather)
	select {
	case <-t.C:
	case <-s.stop:
		t.Stop()
	}
	c := &s.checkpoints
	c.mu.Lock()
	c.batch = nil
	ids := make([]int64, 0, len(b.ids))
	for id := range b.ids {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	cps := s.store.RemainingTTLs(ids)
	for len(cps) > 0 && b.err == nil {
		n := min(len(cps), maxCheckpointsPerCommand)
		res := s.writeAsLeader(b.term, &pb.InternalRaftRequest{LeaseCheckpoint: &pb.LeaseCheckpointRequest{Checkpoints: cps[:n]}})
		b.err = res.Err
		cps = cps[n:]
	}
	close(b.done)
}

// maybeCompact proposes, in term, a compaction down to HistoryRevisions
// once twice as many have accumulated.
func (s *Server) maybeCompact(term uint64) {
	rev, due := s.store.CompactionDue()
	if !due {
		return
	}
	res := s.writeAsLeader(term, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: rev}})
	if res.Err != nil && !errors.Is(res.Err, mvcc.ErrCompacted) {
		s.log.Warn("automatic compaction not written", "revision", rev, "err", res.Err)
	}
}

// renewLease restarts a lease's TTL where deadlines are kept: at the
// leader, or here for a member alone.
func (s *Server) renewLease(ctx context.Context, id int64) (int64, error) {
	if s.consensus == nil {
		return s.sm.RenewLease(id)
	}
	return s.consensus.RenewLease(ctx, id)
}
