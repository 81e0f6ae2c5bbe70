package mvcc

import (
	"sort"
	"time"
)

// MaxLeaseTTL is etcd's limit on a granted TTL, in seconds.
const MaxLeaseTTL = 9_000_000_000

// lease is a TTL that keys can be attached to; when it expires or is revoked
// its keys are deleted in one revision. Fields are guarded by Store.mu.
type lease struct {
	id      int64
	ttl     int64 // granted TTL, seconds
	expires time.Time
	keys    map[string]struct{}
	// revoking: the leader found it expired and proposes its revoke
	// (MarkRevoking); it is renewed no more, as in etcd, where a
	// renewal of an expired lease waits for the revoke.
	revoking bool
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
func (s *Store) grant(id, ttl int64) (*lease, error) {
	if ttl > MaxLeaseTTL {
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
		expires: s.cfg.Now().Add(time.Duration(ttl) * time.Second),
		keys:    make(map[string]struct{}),
	}
	s.leases[id] = l
	return l, nil
}

// ChooseLeaseID returns an id for a grant that lets the server choose:
// unused here now; whether it is still free is decided when the grant is
// applied.
func (s *Store) ChooseLeaseID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newLeaseID()
}

// newLeaseID returns an unused positive id whose high bits come from the
// member id, so ids chosen by different members of a cluster seldom meet
// (the grant's apply refuses one that does), and whose low bits count
// from the store's start time, so a member that restarts does not choose
// the ids of its leases from before. The caller holds mu.
func (s *Store) newLeaseID() int64 {
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
func (s *Store) revoke(id int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok {
		return 0, ErrLeaseNotFound
	}
	s.revokeLocked(l)
	return s.rev, nil
}

func (s *Store) revokeLocked(l *lease) {
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
		w.deleteRange(KeyRange{Key: []byte(k)})
	}
	w.commit()
}

// renew restarts the lease's TTL and returns it; ErrLeaseNotFound when the
// lease is gone.
func (s *Store) renew(id int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok || l.revoking {
		return 0, ErrLeaseNotFound
	}
	l.expires = s.cfg.Now().Add(time.Duration(l.ttl) * time.Second)
	return l.ttl, nil
}

// MarkRevoking marks lease id as being revoked, and reports true, when
// its deadline is at or before now; false when it is gone or was renewed
// meanwhile. From then on renew refuses it: a keep-alive acknowledged
// while the leader proposes the revoke would be followed by the revoke.
// The check and the mark are one step under the store's lock, as renew
// is.
func (s *Store) MarkRevoking(id int64, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok || now.Before(l.expires) {
		return false
	}
	l.revoking = true
	return true
}

// UnmarkRevoking lets lease id be renewed again: its revoke was not
// committed (this member stopped leading).
func (s *Store) UnmarkRevoking(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[id]; ok {
		l.revoking = false
	}
}

// LeaseInfo is a lease as TimeToLive reports it.
type LeaseInfo struct {
	// ID is the lease's id.
	ID int64
	// TTL is the whole seconds left before it expires.
	TTL int64
	// GrantedTTL is the TTL it was granted, in seconds.
	GrantedTTL int64
	// Keys are the keys attached to it, sorted; nil unless asked for.
	Keys [][]byte
}

// TimeToLive reports lease id, with its keys when withKeys is set;
// ErrLeaseNotFound when it is gone.
func (s *Store) TimeToLive(id int64, withKeys bool) (LeaseInfo, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.leases[id]
	if !ok {
		return LeaseInfo{}, ErrLeaseNotFound
	}
	info := LeaseInfo{ID: id, TTL: l.remaining(s.cfg.Now()), GrantedTTL: l.ttl}
	if withKeys {
		for k := range l.keys {
			info.Keys = append(info.Keys, []byte(k))
		}
		sort.Slice(info.Keys, func(i, j int) bool { return string(info.Keys[i]) < string(info.Keys[j]) })
	}
	return info, nil
}

// LeaseIDs returns the ids of all leases, ascending.
func (s *Store) LeaseIDs() []int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]int64, 0, len(s.leases))
	for id := range s.leases {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// ExpireLeases revokes every lease whose TTL has run out and returns how
// many. Only a member alone calls it: with a consensus the leader
// proposes the revokes (ExpiredLeases).
func (s *Store) ExpireLeases() int {
	now := s.cfg.Now()
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
func (s *Store) attachLease(id int64, key string) {
	if l, ok := s.leases[id]; ok {
		l.keys[key] = struct{}{}
	}
}

func (s *Store) detachLease(id int64, key string) {
	if l, ok := s.leases[id]; ok {
		delete(l.keys, key)
	}
}
