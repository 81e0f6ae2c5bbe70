package auth

import (
	"encoding/binary"
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
	var b []byte
	str := func(v []byte) []byte {
		b = binary.AppendUvarint(b, uint64(len(v)))
		return append(b, v...)
	}
	flag := uint64(0)
	if s.enabled {
		flag = 1
	}
	b = binary.AppendUvarint(b, flag)
	b = binary.AppendUvarint(b, s.rev)
	b = str(s.tokenKey)
	names := make([]string, 0, len(s.users))
	for n := range s.users {
		names = append(names, n)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		u := s.users[n]
		b = str([]byte(u.name))
		np := uint64(0)
		if u.noPassword {
			np = 1
		}
		b = binary.AppendUvarint(b, np)
		b = str(u.hash)
		b = binary.AppendUvarint(b, u.passRev)
		b = binary.AppendUvarint(b, uint64(len(u.roles)))
		for _, r := range u.roles {
			b = str([]byte(r))
		}
	}
	names = names[:0]
	for n := range s.roles {
		names = append(names, n)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		ro := s.roles[n]
		b = str([]byte(ro.name))
		b = binary.AppendUvarint(b, uint64(len(ro.perms)))
		for _, p := range ro.perms {
			b = binary.AppendUvarint(b, uint64(p.PermType))
			b = str(p.Key)
			b = str(p.RangeEnd)
		}
	}
	return b
}

// Restore replaces the state with one Encode wrote, or with the initial
// state when b is empty; on error the state is unchanged.
func (s *Store) Restore(b []byte) error {
	d := decoder{b: b}
	n := NewStore()
	if len(b) == 0 {
		s.mu.Lock()
		s.enabled, s.rev, s.tokenKey, s.users, s.roles = n.enabled, n.rev, n.tokenKey, n.users, n.roles
		s.mu.Unlock()
		return nil
	}
	n.enabled = d.uint() == 1
	n.rev = d.uint()
	n.tokenKey = d.bytes()
	for range d.count() {
		u := &user{name: string(d.bytes())}
		u.noPassword = d.uint() == 1
		u.hash = d.bytes()
		if len(u.hash) == 0 {
			u.hash = nil
		}
		u.passRev = d.uint()
		for range d.count() {
			u.roles = append(u.roles, string(d.bytes()))
		}
		n.users[u.name] = u
	}
	for range d.count() {
		ro := &role{name: string(d.bytes())}
		for range d.count() {
			p := &authpb.Permission{PermType: authpb.Permission_Type(d.uint())}
			p.Key, p.RangeEnd = d.bytes(), d.bytes()
			ro.perms = append(ro.perms, p)
		}
		n.roles[ro.name] = ro
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the end", ErrCorrupt, len(d.b))
	}
	s.mu.Lock()
	s.enabled, s.rev, s.tokenKey, s.users, s.roles = n.enabled, n.rev, n.tokenKey, n.users, n.roles
	s.mu.Unlock()
	return nil
}

// decoder reads what Encode wrote; the first error sticks and later
// reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	d.b = nil
}

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count, bounded by the bytes left.
func (d *decoder) count() int {
	v := d.uint()
	if v > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(v)
}

func (d *decoder) bytes() []byte {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := slices.Clone(d.b[:n])
	d.b = d.b[n:]
	return v
}
