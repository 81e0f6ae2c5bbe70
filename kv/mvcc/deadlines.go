package mvcc

import (
	"sort"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// With a consensus, lease deadlines are kept by the leader: it renews
// leases (StateMachine.RenewLease), records their deadlines in checkpoint
// commands that every member applies, and proposes the revoke of leases
// whose deadline passed. These are the store's side of it; kv runs the
// leader's loop.

// ExtendLeases moves every lease deadline before until to until: a member
// that becomes leader gives the holders a moment to reach it.
func (s *Store) ExtendLeases(until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		if l.expires.Before(until) {
			l.expires = until
		}
	}
}

// ExpiredLeases returns up to limit ids of leases whose deadline passed
// at now, ascending.
func (s *Store) ExpiredLeases(now time.Time, limit int) []int64 {
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

// RemainingTTLs returns the checkpoints of the leases ids that still
// exist: their remaining TTL in whole seconds, rounded up, so that a
// deadline a checkpoint sets is never before the leader's.
func (s *Store) RemainingTTLs(ids []int64) []*pb.LeaseCheckpoint {
	now := s.cfg.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	cps := make([]*pb.LeaseCheckpoint, 0, len(ids))
	for _, id := range ids {
		l, ok := s.leases[id]
		if !ok {
			continue
		}
		rem := int64((l.expires.Sub(now) + time.Second - 1) / time.Second)
		if rem < 1 {
			rem = 1
		}
		cps = append(cps, &pb.LeaseCheckpoint{ID: id, Remaining_TTL: rem})
	}
	return cps
}

// checkpoint sets the deadlines of leases to what the leader reported, on
// every member, the leader included: a member that becomes leader starts
// from them. Remaining TTLs are whole seconds, as in etcd's
// LeaseCheckpoint, rounded up.
func (s *Store) checkpoint(cps []*pb.LeaseCheckpoint) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cp := range cps {
		if l, ok := s.leases[cp.ID]; ok && cp.Remaining_TTL > 0 {
			l.expires = now.Add(time.Duration(cp.Remaining_TTL) * time.Second)
		}
	}
}
