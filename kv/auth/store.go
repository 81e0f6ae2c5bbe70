package auth

import (
	"slices"
	"sort"
	"sync"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// RootUser and RootRole are etcd's: the user that must exist to enable
// auth, and the role that allows everything.
const (
	RootUser = "root"
	RootRole = "root"
)

// TokenKeyBytes is the size of the key that signs tokens.
const TokenKeyBytes = 32

// Store is the auth state of the key space: changed only by Apply, in log
// order, and read by every call's check.
type Store struct {
	mu       sync.RWMutex
	enabled  bool
	rev      uint64 // raised by every change
	tokenKey []byte // signs tokens; drawn anew by every AuthEnable
	users    map[string]*user
	roles    map[string]*role
}

type user struct {
	name       string
	hash       []byte // bcrypt; nil with noPassword
	noPassword bool
	roles      []string // sorted
	passRev    uint64   // auth revision of the user's creation or last password change
}

type role struct {
	name  string
	perms []*authpb.Permission // sorted by key, then range end
}

// NewStore returns an empty, disabled auth state.
func NewStore() *Store {
	return &Store{users: make(map[string]*user), roles: make(map[string]*role)}
}

// Enabled reports whether auth is enabled.
func (s *Store) Enabled() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.enabled
}

// Revision returns the auth revision.
func (s *Store) Revision() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// IsCommand reports whether r carries an auth command Apply handles.
func IsCommand(r *pb.InternalRaftRequest) bool {
	return r.AuthEnable != nil || r.AuthDisable != nil ||
		r.AuthUserAdd != nil || r.AuthUserDelete != nil ||
		r.AuthUserChangePassword != nil || r.AuthUserGrantRole != nil ||
		r.AuthUserRevokeRole != nil || r.AuthRoleAdd != nil ||
		r.AuthRoleDelete != nil || r.AuthRoleGrantPermission != nil ||
		r.AuthRoleRevokePermission != nil
}

// Apply applies the auth command of r and returns its response, without
// header. It is deterministic: an AuthEnable carries its token key in
// r.Authenticate.SimpleToken (chosen by the proposing member), a UserAdd
// or UserChangePassword its hash in HashedPassword; a password in the
// command is ignored, never stored.
func (s *Store) Apply(r *pb.InternalRaftRequest) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var resp any
	var err error
	switch {
	case r.AuthEnable != nil:
		if s.enabled {
			return &pb.AuthEnableResponse{}, nil
		}
		var key []byte
		if r.Authenticate != nil {
			key = []byte(r.Authenticate.SimpleToken)
		}
		resp, err = &pb.AuthEnableResponse{}, s.enable(key)
	case r.AuthDisable != nil:
		resp = &pb.AuthDisableResponse{}
		if !s.enabled {
			return resp, nil
		}
		s.enabled = false
	case r.AuthUserAdd != nil:
		resp, err = &pb.AuthUserAddResponse{}, s.userAdd(r.AuthUserAdd)
	case r.AuthUserDelete != nil:
		resp, err = &pb.AuthUserDeleteResponse{}, s.userDelete(r.AuthUserDelete.Name)
	case r.AuthUserChangePassword != nil:
		resp, err = &pb.AuthUserChangePasswordResponse{}, s.changePassword(r.AuthUserChangePassword)
	case r.AuthUserGrantRole != nil:
		resp, err = &pb.AuthUserGrantRoleResponse{}, s.grantRole(r.AuthUserGrantRole.User, r.AuthUserGrantRole.Role)
	case r.AuthUserRevokeRole != nil:
		resp, err = &pb.AuthUserRevokeRoleResponse{}, s.revokeRole(r.AuthUserRevokeRole.Name, r.AuthUserRevokeRole.Role)
	case r.AuthRoleAdd != nil:
		resp, err = &pb.AuthRoleAddResponse{}, s.roleAdd(r.AuthRoleAdd.Name)
	case r.AuthRoleDelete != nil:
		resp, err = &pb.AuthRoleDeleteResponse{}, s.roleDelete(r.AuthRoleDelete.Role)
	case r.AuthRoleGrantPermission != nil:
		resp, err = &pb.AuthRoleGrantPermissionResponse{}, s.grantPermission(r.AuthRoleGrantPermission)
	case r.AuthRoleRevokePermission != nil:
		resp, err = &pb.AuthRoleRevokePermissionResponse{}, s.revokePermission(r.AuthRoleRevokePermission)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.rev++
	return resp, nil
}

func (s *Store) enable(key []byte) error {
	u := s.users[RootUser]
	if u == nil {
		return ErrRootUserNotExist
	}
	if !slices.Contains(u.roles, RootRole) {
		return ErrRootRoleNotExist
	}
	if len(key) < TokenKeyBytes {
		return ErrCorrupt
	}
	s.enabled = true
	s.tokenKey = slices.Clone(key)
	return nil
}

func (s *Store) userAdd(r *pb.AuthUserAddRequest) error {
	if r.Name == "" {
		return ErrUserEmpty
	}
	if s.users[r.Name] != nil {
		return ErrUserAlreadyExist
	}
	u := &user{name: r.Name, passRev: s.rev + 1}
	if r.Options != nil && r.Options.NoPassword {
		u.noPassword = true
	} else {
		u.hash = []byte(r.HashedPassword)
	}
	s.users[r.Name] = u
	return nil
}

func (s *Store) userDelete(name string) error {
	if s.enabled && name == RootUser {
		return ErrInvalidAuthMgmt
	}
	if s.users[name] == nil {
		return ErrUserNotFound
	}
	delete(s.users, name)
	return nil
}

func (s *Store) changePassword(r *pb.AuthUserChangePasswordRequest) error {
	u := s.users[r.Name]
	if u == nil {
		return ErrUserNotFound
	}
	u.hash, u.noPassword = []byte(r.HashedPassword), false
	u.passRev = s.rev + 1
	return nil
}

func (s *Store) grantRole(name, roleName string) error {
	u := s.users[name]
	if u == nil {
		return ErrUserNotFound
	}
	// etcd grants the root role even before it was added.
	if roleName != RootRole && s.roles[roleName] == nil {
		return ErrRoleNotFound
	}
	i, found := slices.BinarySearch(u.roles, roleName)
	if !found {
		u.roles = slices.Insert(u.roles, i, roleName)
	}
	return nil
}

func (s *Store) revokeRole(name, roleName string) error {
	if s.enabled && name == RootUser && roleName == RootRole {
		return ErrInvalidAuthMgmt
	}
	u := s.users[name]
	if u == nil {
		return ErrUserNotFound
	}
	i, found := slices.BinarySearch(u.roles, roleName)
	if !found {
		return ErrRoleNotGranted
	}
	u.roles = slices.Delete(u.roles, i, i+1)
	return nil
}

func (s *Store) roleAdd(name string) error {
	if name == "" {
		return ErrRoleEmpty
	}
	if s.roles[name] != nil {
		return ErrRoleAlreadyExist
	}
	s.roles[name] = &role{name: name}
	return nil
}

func (s *Store) roleDelete(name string) error {
	if s.enabled && name == RootRole {
		return ErrInvalidAuthMgmt
	}
	if s.roles[name] == nil {
		return ErrRoleNotFound
	}
	delete(s.roles, name)
	for _, u := range s.users {
		if i, found := slices.BinarySearch(u.roles, name); found {
			u.roles = slices.Delete(u.roles, i, i+1)
		}
	}
	return nil
}

func (s *Store) grantPermission(r *pb.AuthRoleGrantPermissionRequest) error {
	ro := s.roles[r.Name]
	if ro == nil {
		return ErrRoleNotFound
	}
	if r.Perm == nil {
		return ErrPermissionNotGiven
	}
	p := &authpb.Permission{PermType: r.Perm.PermType, Key: slices.Clone(r.Perm.Key), RangeEnd: slices.Clone(r.Perm.RangeEnd)}
	i, found := sort.Find(len(ro.perms), func(i int) int { return comparePerm(p, ro.perms[i]) })
	if found {
		ro.perms[i] = p // the same range: the new type replaces the old, as etcd
	} else {
		ro.perms = slices.Insert(ro.perms, i, p)
	}
	return nil
}

func (s *Store) revokePermission(r *pb.AuthRoleRevokePermissionRequest) error {
	ro := s.roles[r.Role]
	if ro == nil {
		return ErrRoleNotFound
	}
	p := &authpb.Permission{Key: r.Key, RangeEnd: r.RangeEnd}
	i, found := sort.Find(len(ro.perms), func(i int) int { return comparePerm(p, ro.perms[i]) })
	if !found {
		return ErrPermissionNotGranted
	}
	ro.perms = slices.Delete(ro.perms, i, i+1)
	return nil
}

func comparePerm(a, b *authpb.Permission) int {
	if c := compareBytes(a.Key, b.Key); c != 0 {
		return c
	}
	return compareBytes(a.RangeEnd, b.RangeEnd)
}

func compareBytes(a, b []byte) int {
	switch {
	case string(a) < string(b):
		return -1
	case string(a) > string(b):
		return 1
	}
	return 0
}

// User returns the roles of a user (sorted); ErrUserNotFound when there
// is no such user.
func (s *Store) User(name string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u := s.users[name]
	if u == nil {
		return nil, ErrUserNotFound
	}
	return slices.Clone(u.roles), nil
}

// Users returns every user name, sorted.
func (s *Store) Users() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.users))
	for n := range s.users {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Role returns the permissions of a role, sorted by key; ErrRoleNotFound
// when there is no such role.
func (s *Store) Role(name string) ([]*authpb.Permission, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ro := s.roles[name]
	if ro == nil {
		return nil, ErrRoleNotFound
	}
	out := make([]*authpb.Permission, len(ro.perms))
	for i, p := range ro.perms {
		out[i] = &authpb.Permission{PermType: p.PermType, Key: slices.Clone(p.Key), RangeEnd: slices.Clone(p.RangeEnd)}
	}
	return out, nil
}

// Roles returns every role name, sorted.
func (s *Store) Roles() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.roles))
	for n := range s.roles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
