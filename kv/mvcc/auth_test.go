package mvcc

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/crypto/bcrypt"

	"chute/kv/auth"
)

// TestStateMachine_Restore_keepsAuth checks that users, roles and the
// enabled flag survive a snapshot, that they never show as keys, and that
// restoring an older snapshot without auth clears them.
func TestStateMachine_Restore_keepsAuth(t *testing.T) {
	a, sa := newTestStateMachine(t, Config{MemberID: 1})
	empty := snapshot(t, a)
	h, err := auth.HashPassword("pw", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, a, &pb.InternalRaftRequest{AuthUserAdd: &pb.AuthUserAddRequest{Name: "root", HashedPassword: h}})
	apply(t, a, &pb.InternalRaftRequest{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}})
	apply(t, a, &pb.InternalRaftRequest{AuthEnable: &pb.AuthEnableRequest{}, Authenticate: &pb.InternalAuthenticateRequest{SimpleToken: auth.NewTokenKey()}})
	put(t, a, "/a", "1")
	if resp, _, err := sa.Range(&pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("keys after auth commands: got %v %v, want only /a", resp, err)
	}
	raw := snapshot(t, a)

	b, _ := newTestStateMachine(t, Config{MemberID: 2})
	if err := b.Restore(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if !b.Auth().Enabled() || b.Auth().Revision() != a.Auth().Revision() {
		t.Fatalf("restored auth: enabled %v revision %d, want true and %d", b.Auth().Enabled(), b.Auth().Revision(), a.Auth().Revision())
	}
	if _, err := b.Auth().Authenticate("root", "pw"); err != nil {
		t.Fatalf("Authenticate after restore: got %v, want nil", err)
	}
	tok, err := a.Auth().Token("root", a.Auth().Revision(), sa.cfg.Now(), 60e9)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := b.Auth().Verify(tok, sa.cfg.Now()); err != nil || u != "root" {
		t.Fatalf("restored member verifies the original's token: got %q %v, want root nil", u, err)
	}
	if err := b.Restore(bytes.NewReader(empty)); err != nil {
		t.Fatal(err)
	}
	if b.Auth().Enabled() || len(b.Auth().Users()) != 0 {
		t.Fatalf("auth after restoring a snapshot without it: enabled %v users %v, want neither", b.Auth().Enabled(), b.Auth().Users())
	}
}
