package auth

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/crypto/bcrypt"
)

// apply applies one command and fails the test on an unexpected error.
func apply(t *testing.T, s *Store, r *pb.InternalRaftRequest, want error) {
	t.Helper()
	if _, err := s.Apply(r); !errors.Is(err, want) {
		t.Fatalf("Apply(%v): got %v, want %v", r, err, want)
	}
}

func addUser(t *testing.T, s *Store, name, password string) {
	t.Helper()
	h, err := HashPassword(password, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, &pb.InternalRaftRequest{AuthUserAdd: &pb.AuthUserAddRequest{Name: name, HashedPassword: h}}, nil)
}

func enable(t *testing.T, s *Store, want error) {
	t.Helper()
	apply(t, s, &pb.InternalRaftRequest{AuthEnable: &pb.AuthEnableRequest{}, Authenticate: &pb.InternalAuthenticateRequest{SimpleToken: NewTokenKey()}}, want)
}

func TestStore_Apply_enableNeedsRootWithRootRole(t *testing.T) {
	s := NewStore()
	enable(t, s, ErrRootUserNotExist)
	addUser(t, s, RootUser, "pw")
	enable(t, s, ErrRootRoleNotExist)
	apply(t, s, &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: RootUser, Role: RootRole}}, nil)
	// A token key shorter than TokenKeyBytes (a command not of this
	// version) is refused, and auth stays off.
	apply(t, s, &pb.InternalRaftRequest{AuthEnable: &pb.AuthEnableRequest{}, Authenticate: &pb.InternalAuthenticateRequest{SimpleToken: NewTokenKey()[:TokenKeyBytes/2]}}, ErrCorrupt)
	if s.Enabled() {
		t.Fatalf("Enabled after an enable with a short token key: got true, want false")
	}
	enable(t, s, nil)
	if !s.Enabled() {
		t.Fatalf("Enabled: got false, want true")
	}
	apply(t, s, &pb.InternalRaftRequest{AuthUserDelete: &pb.AuthUserDeleteRequest{Name: RootUser}}, ErrInvalidAuthMgmt)
	apply(t, s, &pb.InternalRaftRequest{AuthUserRevokeRole: &pb.AuthUserRevokeRoleRequest{Name: RootUser, Role: RootRole}}, ErrInvalidAuthMgmt)
	apply(t, s, &pb.InternalRaftRequest{AuthRoleDelete: &pb.AuthRoleDeleteRequest{Role: RootRole}}, ErrInvalidAuthMgmt)
	if !s.IsRoot(RootUser) {
		t.Fatalf("root lost the root role to a refused delete")
	}
	apply(t, s, &pb.InternalRaftRequest{AuthUserAdd: &pb.AuthUserAddRequest{Name: RootUser}}, ErrUserAlreadyExist)
	apply(t, s, &pb.InternalRaftRequest{AuthUserAdd: &pb.AuthUserAddRequest{}}, ErrUserEmpty)
	apply(t, s, &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: RootUser, Role: "nope"}}, ErrRoleNotFound)
	apply(t, s, &pb.InternalRaftRequest{AuthRoleRevokePermission: &pb.AuthRoleRevokePermissionRequest{Role: "nope"}}, ErrRoleNotFound)
}

func TestStore_Check_ranges(t *testing.T) {
	s := NewStore()
	addUser(t, s, "u", "pw")
	apply(t, s, &pb.InternalRaftRequest{AuthRoleAdd: &pb.AuthRoleAddRequest{Name: "r"}}, nil)
	grant := func(typ authpb.Permission_Type, key, end string) {
		apply(t, s, &pb.InternalRaftRequest{AuthRoleGrantPermission: &pb.AuthRoleGrantPermissionRequest{Name: "r", Perm: &authpb.Permission{PermType: typ, Key: []byte(key), RangeEnd: []byte(end)}}}, nil)
	}
	grant(authpb.WRITE, "/q/ch:events/p/", "/q/ch:events/p0")
	grant(authpb.READ, "a", "c")
	grant(authpb.READ, "c", "e")
	grant(authpb.READWRITE, "k", "")
	grant(authpb.READ, "z", "\x00")
	apply(t, s, &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: "u", Role: "r"}}, nil)
	for _, tc := range []struct {
		key, end string
		a        Access
		want     error
	}{
		{"/q/ch:events/p/1", "", Write, nil},
		{"/q/ch:events/p/1", "", Read, ErrPermissionDenied},
		{"/q/ch:other/p/1", "", Write, ErrPermissionDenied},
		{"/config/", "/config0", Read, ErrPermissionDenied},
		{"b", "d", Read, nil}, // inside the merge of [a,c) and [c,e)
		{"b", "f", Read, ErrPermissionDenied},
		{"k", "", Write, nil},
		{"k", "", Read, nil},
		{"k0", "", Read, ErrPermissionDenied},
		{"zz", "\x00", Read, nil},
		{"y", "\x00", Read, ErrPermissionDenied},
		{"b", "\x00", Read, ErrPermissionDenied}, // from b onwards: past [a,e)
	} {
		if got := s.Check("u", []byte(tc.key), []byte(tc.end), tc.a); !errors.Is(got, tc.want) {
			t.Errorf("Check(%q, %q, %v): got %v, want %v", tc.key, tc.end, tc.a, got, tc.want)
		}
	}
	if got := s.Check("nobody", []byte("k"), nil, Read); !errors.Is(got, ErrPermissionDenied) {
		t.Errorf("Check of a missing user: got %v, want %v", got, ErrPermissionDenied)
	}
}

func TestStore_Verify_tokens(t *testing.T) {
	s := NewStore()
	addUser(t, s, RootUser, "pw")
	addUser(t, s, "a.b", "pw")
	apply(t, s, &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: RootUser, Role: RootRole}}, nil)
	if _, err := s.Token("a.b", s.Revision(), time.Unix(0, 0), time.Minute); !errors.Is(err, ErrAuthNotEnabled) {
		t.Fatalf("Token while disabled: got %v, want %v", err, ErrAuthNotEnabled)
	}
	enable(t, s, nil)
	if _, err := s.Authenticate("a.b", "wrong"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Authenticate with a wrong password: got %v, want %v", err, ErrAuthFailed)
	}
	rev, err := s.Authenticate("a.b", "pw")
	if err != nil {
		t.Fatalf("Authenticate: got %v, want nil", err)
	}
	now := time.Unix(1000, 0)
	tok, err := s.Token("a.b", rev, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := s.Verify(tok, now.Add(time.Second)); err != nil || u != "a.b" {
		t.Fatalf("Verify: got %q, %v, want a.b, nil", u, err)
	}
	if _, err := s.Verify(tok, now.Add(time.Minute)); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify after the TTL: got %v, want %v", err, ErrInvalidToken)
	}
	if _, err := s.Verify(tok[:len(tok)-1]+"x", now); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify of a forged token: got %v, want %v", err, ErrInvalidToken)
	}
	// A grant keeps the token; a password change ends it.
	apply(t, s, &pb.InternalRaftRequest{AuthRoleAdd: &pb.AuthRoleAddRequest{Name: "r"}}, nil)
	if _, err := s.Verify(tok, now); err != nil {
		t.Fatalf("Verify after a role add: got %v, want nil", err)
	}
	apply(t, s, &pb.InternalRaftRequest{AuthUserChangePassword: &pb.AuthUserChangePasswordRequest{Name: "a.b", HashedPassword: "x"}}, nil)
	if _, err := s.Verify(tok, now); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify after a password change: got %v, want %v", err, ErrInvalidToken)
	}
}

func TestStore_Restore_roundTrip(t *testing.T) {
	s := NewStore()
	addUser(t, s, RootUser, "pw")
	apply(t, s, &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: RootUser, Role: RootRole}}, nil)
	apply(t, s, &pb.InternalRaftRequest{AuthRoleAdd: &pb.AuthRoleAddRequest{Name: "r"}}, nil)
	apply(t, s, &pb.InternalRaftRequest{AuthRoleGrantPermission: &pb.AuthRoleGrantPermissionRequest{Name: "r", Perm: &authpb.Permission{PermType: authpb.READ, Key: []byte("a"), RangeEnd: []byte("b")}}}, nil)
	enable(t, s, nil)
	r := NewStore()
	if err := r.Restore(s.Encode()); err != nil {
		t.Fatal(err)
	}
	if string(r.Encode()) != string(s.Encode()) {
		t.Fatalf("Encode after Restore differs")
	}
	if _, err := r.Authenticate(RootUser, "pw"); err != nil {
		t.Fatalf("Authenticate after Restore: got %v, want nil", err)
	}
	if err := r.Restore(s.Encode()[:5]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Restore of a truncated state: got %v, want %v", err, ErrCorrupt)
	}
}

// TestStore_tokenOfACheckOvertaken: a token carries the auth revision
// Authenticate checked the password at, so a password change or a
// delete and re-add applied while bcrypt compared (the check holds no
// lock) ends the token issued after it, simple or JWT; a token of an
// unchanged user stays valid.
func TestStore_tokenOfACheckOvertaken(t *testing.T) {
	pub, priv := pemKeys(t, "rsa")
	j, err := NewJWT("RS256", pub, priv, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	tokens := func(s *Store, rev uint64) (simple, jwt string) {
		t.Helper()
		simple, err := s.Token("u", rev, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		jwt, err = s.TokenJWT(j, "u", rev, now)
		if err != nil {
			t.Fatal(err)
		}
		return simple, jwt
	}
	for _, tc := range []struct {
		name   string
		change func(*Store)
		want   error
	}{
		{"nothing changed", func(*Store) {}, nil},
		{"password changed", func(s *Store) {
			apply(t, s, &pb.InternalRaftRequest{AuthUserChangePassword: &pb.AuthUserChangePasswordRequest{Name: "u", HashedPassword: "x"}}, nil)
		}, ErrInvalidToken},
		{"deleted and added again", func(s *Store) {
			apply(t, s, &pb.InternalRaftRequest{AuthUserDelete: &pb.AuthUserDeleteRequest{Name: "u"}}, nil)
			addUser(t, s, "u", "other")
		}, ErrInvalidToken},
	} {
		s := jwtStore(t)
		rev, err := s.Authenticate("u", "pw")
		if err != nil {
			t.Fatal(err)
		}
		tc.change(s) // applied while the check ran
		simple, jwt := tokens(s, rev)
		if _, err := s.Verify(simple, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: simple token: got %v, want %v", tc.name, err, tc.want)
		}
		if _, err := s.VerifyJWT(j, jwt, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: JWT: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
