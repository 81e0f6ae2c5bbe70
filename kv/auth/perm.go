package auth

import (
	"bytes"
	"slices"

	"go.etcd.io/etcd/api/v3/authpb"
)

// Access is what a request does to a range of keys.
type Access int

const (
	Read Access = iota
	Write
)

// IsRoot reports whether user exists and holds the root role.
func (s *Store) IsRoot(user string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u := s.users[user]
	return u != nil && slices.Contains(u.roles, RootRole)
}

// Check reports whether user may do a to the keys [key, end): nil, or
// ErrPermissionDenied (also for a user that does not exist). An empty end
// is the single key, end "\x00" every key from key on. It checks
// permissions whether or not auth is enabled; the caller asks only when
// it is.
func (s *Store) Check(user string, key, end []byte, a Access) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u := s.users[user]
	if u == nil {
		return ErrPermissionDenied
	}
	if slices.Contains(u.roles, RootRole) {
		return nil
	}
	want := toInterval(key, end)
	var have []interval
	for _, rn := range u.roles {
		ro := s.roles[rn]
		if ro == nil {
			continue
		}
		for _, p := range ro.perms {
			if !permits(p.PermType, a) {
				continue
			}
			iv := toInterval(p.Key, p.RangeEnd)
			if iv.contains(want) {
				return nil // the common case: one grant covers it
			}
			have = append(have, iv)
		}
	}
	for _, iv := range merge(have) {
		if iv.contains(want) {
			return nil
		}
	}
	return ErrPermissionDenied
}

func permits(t authpb.Permission_Type, a Access) bool {
	switch t {
	case authpb.READWRITE:
		return true
	case authpb.READ:
		return a == Read
	case authpb.WRITE:
		return a == Write
	}
	return false
}

// interval is the keys [start, end), or [start, ∞) with open set.
type interval struct {
	start, end []byte
	open       bool
}

// toInterval turns etcd's key and range end into an interval: one key is
// [key, key+"\x00"), range end "\x00" is every key from key on.
func toInterval(key, end []byte) interval {
	switch {
	case len(end) == 0:
		return interval{start: key, end: append(slices.Clone(key), 0)}
	case len(end) == 1 && end[0] == 0:
		return interval{start: key, open: true}
	}
	return interval{start: key, end: end}
}

// contains reports whether o lies inside iv. An empty o ([k, e) with
// e <= k) lies inside any interval holding its start.
func (iv interval) contains(o interval) bool {
	if bytes.Compare(o.start, iv.start) < 0 {
		return false
	}
	if iv.open {
		return true
	}
	if o.open {
		return false
	}
	if bytes.Compare(o.end, o.start) <= 0 {
		return bytes.Compare(o.start, iv.end) < 0
	}
	return bytes.Compare(o.end, iv.end) <= 0
}

// merge returns the union of ivs as disjoint intervals, sorted: touching
// or overlapping ones become one.
func merge(ivs []interval) []interval {
	if len(ivs) < 2 {
		return ivs
	}
	slices.SortFunc(ivs, func(a, b interval) int { return bytes.Compare(a.start, b.start) })
	out := []interval{ivs[0]}
	for _, iv := range ivs[1:] {
		last := &out[len(out)-1]
		if !last.open && bytes.Compare(iv.start, last.end) > 0 {
			out = append(out, iv)
			continue
		}
		switch {
		case last.open:
		case iv.open:
			last.open, last.end = true, nil
		case bytes.Compare(iv.end, last.end) > 0:
			last.end = iv.end
		}
	}
	return out
}
