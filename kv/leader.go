package kv

import (
	"context"
	"errors"
	"sort"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// With a Consensus, lease deadlines are kept by the leader, as in etcd:
// keep-alives reach it (RenewLease), it proposes the revoke of a lease
// whose deadline passed, and it tells the others its deadlines of the
// leases renewed since the last time, every leaseCheckpointInterval, so
// that a member that becomes leader starts from them. The leader also
// proposes the automatic compaction, so that every member compacts at
// the same revision whatever its own configuration.

// leaseCheckpointInterval is how often the leader proposes the deadlines
// of the leases renewed since its last checkpoint.
const leaseCheckpointInterval = time.Second

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
	leading := false
	var lastCheckpoint time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if !s.consensus.Status().IsLeader {
			leading = false
			continue
		}
		now := s.store.cfg.now()
		if !leading {
			leading = true
			s.store.extendLeases(now.Add(leaderLeaseGrace))
			s.sm.takeRenewed() // renewed under an earlier leadership: the checkpoints had them
			lastCheckpoint = now
			s.log.Info("leading the key space: lease deadlines and compaction are this member's")
		}
		s.revokeExpired(now)
		if now.Sub(lastCheckpoint) >= leaseCheckpointInterval {
			s.checkpointLeases()
			lastCheckpoint = now
		}
		s.maybeCompact()
	}
}

// revokeExpired proposes the revoke of every lease whose deadline passed.
func (s *Server) revokeExpired(now time.Time) {
	for _, id := range s.store.expiredLeases(now, maxRevokesPerTick) {
		res := s.writeInternal(&pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: id}})
		if res.err != nil && !errors.Is(res.err, ErrLeaseNotFound) {
			s.log.Warn("lease not revoked; retrying at the next check", "lease", id, "err", res.err)
			return
		}
		s.log.Debug("lease expired", "lease", id)
	}
}

// checkpointLeases proposes the deadlines of the leases renewed since the
// last checkpoint.
func (s *Server) checkpointLeases() {
	cps := s.store.remainingTTLs(s.sm.takeRenewed())
	for len(cps) > 0 {
		n := min(len(cps), maxCheckpointsPerCommand)
		res := s.writeInternal(&pb.InternalRaftRequest{LeaseCheckpoint: &pb.LeaseCheckpointRequest{Checkpoints: cps[:n]}})
		if res.err != nil {
			s.log.Warn("lease checkpoint not written", "leases", len(cps), "err", res.err)
			return
		}
		cps = cps[n:]
	}
}

// maybeCompact proposes a compaction down to HistoryRevisions once twice
// as many have accumulated.
func (s *Server) maybeCompact() {
	keep := s.store.cfg.historyRevisions
	if keep <= 0 {
		return
	}
	s.store.mu.RLock()
	rev, compactRev := s.store.rev, s.store.compactRev
	s.store.mu.RUnlock()
	if rev-compactRev < 2*keep {
		return
	}
	res := s.writeInternal(&pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: rev - keep}})
	if res.err != nil && !errors.Is(res.err, ErrCompacted) {
		s.log.Warn("automatic compaction not written", "revision", rev-keep, "err", res.err)
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

// extendLeases moves every lease deadline before until to until.
func (s *store) extendLeases(until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		if l.expires.Before(until) {
			l.expires = until
		}
	}
}

// expiredLeases returns up to limit ids of leases whose deadline passed,
// ascending.
func (s *store) expiredLeases(now time.Time, limit int) []int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []int64
	for id, l := range s.leases {
		if !now.Before(l.expires) {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return ids
}

// remainingTTLs returns the checkpoints of the leases ids that still
// exist: their remaining TTL in whole seconds, rounded to the nearest.
func (s *store) remainingTTLs(ids []int64) []*pb.LeaseCheckpoint {
	now := s.cfg.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	cps := make([]*pb.LeaseCheckpoint, 0, len(ids))
	for _, id := range ids {
		l, ok := s.leases[id]
		if !ok {
			continue
		}
		rem := int64((l.expires.Sub(now) + time.Second/2) / time.Second)
		if rem < 1 {
			rem = 1
		}
		cps = append(cps, &pb.LeaseCheckpoint{ID: id, Remaining_TTL: rem})
	}
	return cps
}
