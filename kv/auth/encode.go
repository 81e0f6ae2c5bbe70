package auth

import (
	"bytes"
	"chute/kv/internal/snapcodec"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/authpb"
)

// The auth state in a snapshot, all integers uvarints, all strings
// length-prefixed:
//
//	enabled (0 or 1), revision, token key
//	user count, then per user (by name): name, 0 or 1 (no password),
//	    hash, password revision, role count, roles
//	role count, then per role (by name): name, permission count, then
//	    per permission: type, key, range end

// Empty reports whether the state is the initial one, so that a snapshot
// may leave it out.
func (s *Store) Empty() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return !s.enabled && s.rev == 0 && len(s.users) == 0 && len(s.roles) == 0
}

// Encode returns the state for a snapshot.
func (s *Store) Encode() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var buf bytes.Buffer
	e := snapcodec.NewEncoder(&buf)
	flag := uint64(0)
	if s.enabled {
		flag = 1
	}
	e.Uint(flag)
	e.Uint(s.rev)
	e.Bytes(s.tokenKey)
	names := make([]string, 0, len(s.users))
	for n := range s.users {
		names = append(names, n)
	}
	slices.Sort(names)
	e.Uint(uint64(len(names)))
	for _, n := range names {
		u := s.users[n]
		e.Bytes([]byte(u.name))
		np := uint64(0)
		if u.noPassword {
			np = 1
		}
		e.Uint(np)
		e.Bytes(u.hash)
		e.Uint(u.passRev)
		e.Uint(uint64(len(u.roles)))
		for _, r := range u.roles {
			e.Bytes([]byte(r))
		}
	}
	names = names[:0]
	for n := range s.roles {
		names = append(names, n)
	}
	slices.Sort(names)
	e.Uint(uint64(len(names)))
	for _, n := range names {
		ro := s.roles[n]
		e.Bytes([]byte(ro.name))
		e.Uint(uint64(len(ro.perms)))
		for _, p := range ro.perms {
			e.Uint(uint64(p.PermType))
			e.Bytes(p.Key)
			e.Bytes(p.RangeEnd)
		}
	}
	return buf.Bytes()
}

// Restore replaces the state with one Encode wrote, or with the initial
// state when b is empty; on error the state is unchanged.
func (s *Store) Restore(b []byte) error {
	d := snapcodec.NewDecoder(b, ErrCorrupt)
	n := NewStore()
	if len(b) == 0 {
		s.mu.Lock()
		s.enabled, s.rev, s.tokenKey, s.users, s.roles = n.enabled, n.rev, n.tokenKey, n.users, n.roles
		s.mu.Unlock()
		return nil
	}
	n.enabled = d.Uint() == 1
	n.rev = d.Uint()
	n.tokenKey = d.Bytes()
	for range d.Count() {
		u := &user{name: string(d.Bytes())}
		u.noPassword = d.Uint() == 1
		u.hash = d.Bytes()
		if len(u.hash) == 0 {
			u.hash = nil
		}
		u.passRev = d.Uint()
		for range d.Count() {
			u.roles = append(u.roles, string(d.Bytes()))
		}
		n.users[u.name] = u
	}
	for range d.Count() {
		ro := &role{name: string(d.Bytes())}
		for range d.Count() {
			p := &authpb.Permission{PermType: authpb.Permission_Type(d.Uint())}
			p.Key, p.RangeEnd = d.Bytes(), d.Bytes()
			ro.perms = append(ro.perms, p)
		}
		n.roles[ro.name] = ro
	}
	if err := d.Err(); err != nil {
		return err
	}
	if d.Len() != 0 {
		return fmt.Errorf("%w: %d bytes after the end", ErrCorrupt, d.Len())
	}
	s.mu.Lock()
	s.enabled, s.rev, s.tokenKey, s.users, s.roles = n.enabled, n.rev, n.tokenKey, n.users, n.roles
	s.mu.Unlock()
	return nil
}
