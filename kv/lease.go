package kv

import (
	"sort"
	"time"
)

// maxLeaseTTL is etcd's limit on a granted TTL, in seconds.
const maxLeaseTTL = 9_000_000_000

// lease is a TTL that keys can be attached to; when it expires or is revoked
// its keys are deleted in one revision. Fields are guarded by store.mu.
type lease struct {
	id      int64
	ttl     int64 // granted TTL, seconds
	expires time.Time
	keys    map[string]struct{}
}

// remaining returns the whole seconds left before expiry, as etcd reports it.
func (l *lease) remaining(now time.Time) int64 {
	d := l.expires.Sub(now)
	if d < 0 {
		return 0
	}
	return int64(d.Seconds())
}

// grant creates a lease with the id and TTL of an applied command: the
// proposing member chose the id and raised the TTL to its minimum.
func (s *store) grant(id, ttl int64) (*lease, error) {
	if ttl > maxLeaseTTL {
		return nil, ErrLeaseTTLTooBig
	}
	if id <= 0 {
		return nil, ErrLeaseNotFound // no member proposes it; kept out of the table
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[id]; ok {
		return nil, ErrLeaseExists
	}
	l := &lease{
		id:      id,
		ttl:     ttl,
		expires: s.cfg.now().Add(time.Duration(ttl) * time.Second),
		keys:    make(map[string]struct{}),
	}
	s.leases[id] = l
	return l, nil
}

// chooseLeaseID returns an id for a grant that lets the server choose.
func (s *store) chooseLeaseID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newLeaseID()
}

// newLeaseID returns an unused positive id whose high bits come from the
// member id, so ids chosen by different members of a cluster seldom meet
// (the grant's apply refuses one that does), and whose low bits count
// from the store's start time, so a member that restarts does not choose
// the ids of its leases from before. The caller holds mu.
func (s *store) newLeaseID() int64 {
	for {
		s.nextLease++
		id := (s.memberSalt<<40 | s.nextLease&(1<<40-1)) & (1<<63 - 1)
		if id == 0 {
			continue
		}
		if _, used := s.leases[id]; !used {
			return id
		}
	}
}

// revoke deletes the lease and its keys. It returns the revision of the
// deletion (the current one when the lease held no keys).
func (s *store) revoke(id int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok {
		return 0, ErrLeaseNotFound
	}
	s.revokeLocked(l)
	return s.rev, nil
}

func (s *store) revokeLocked(l *lease) {
	delete(s.leases, l.id)
	if len(l.keys) == 0 {
		return
	}
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := s.beginWrite()
	for _, k := range keys {
		w.deleteRange(keyRange{key: []byte(k)})
	}
	w.commit()
}

// renew restarts the lease's TTL and returns it; ErrLeaseNotFound when the
// lease is gone.
func (s *store) renew(id int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok {
		return 0, ErrLeaseNotFound
	}
	l.expires = s.cfg.now().Add(time.Duration(l.ttl) * time.Second)
	return l.ttl, nil
}

// leaseInfo is a lease as TimeToLive reports it.
type leaseInfo struct {
	id, ttl, granted int64
	keys             [][]byte
}

func (s *store) timeToLive(id int64, withKeys bool) (leaseInfo, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.leases[id]
	if !ok {
		return leaseInfo{}, ErrLeaseNotFound
	}
	info := leaseInfo{id: id, ttl: l.remaining(s.cfg.now()), granted: l.ttl}
	if withKeys {
		for k := range l.keys {
			info.keys = append(info.keys, []byte(k))
		}
		sort.Slice(info.keys, func(i, j int) bool { return string(info.keys[i]) < string(info.keys[j]) })
	}
	return info, nil
}

// leaseIDs returns the ids of all leases, ascending.
func (s *store) leaseIDs() []int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]int64, 0, len(s.leases))
	for id := range s.leases {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// expireLeases revokes every lease whose TTL has run out, for a member
// alone, and returns how many.
func (s *store) expireLeases() int {
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.leases {
		if !now.Before(l.expires) {
			s.revokeLocked(l)
			n++
		}
	}
	return n
}

// attachLease and detachLease keep a lease's key set in step with the keys
// that name it. The caller holds mu.
func (s *store) attachLease(id int64, key string) {
	if l, ok := s.leases[id]; ok {
		l.keys[key] = struct{}{}
	}
}

func (s *store) detachLease(id int64, key string) {
	if l, ok := s.leases[id]; ok {
		delete(l.keys, key)
	}
}
