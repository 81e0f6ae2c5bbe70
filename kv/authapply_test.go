package kv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"chute/kv/auth"
)

// interposer is oneMember that commits other commands first, once,
// when a command matching match is proposed or, with onRead, when a
// linearizable read asks for its index: what another member's client
// commits while this member's call is past its checks and not yet
// applied or read.
type interposer struct {
	*oneMember
	mu     sync.Mutex // guards the fields below, armed by the test
	match  func(*pb.InternalRaftRequest) bool
	onRead bool
	first  []*pb.InternalRaftRequest
}

// arm makes the next matching proposal (or read, when match is nil)
// commit first before it.
func (c *interposer) arm(match func(*pb.InternalRaftRequest) bool, first ...*pb.InternalRaftRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.match, c.onRead, c.first = match, match == nil, first
}

// take returns what to commit first if armed for this call, disarming.
func (c *interposer) take(req *pb.InternalRaftRequest) []*pb.InternalRaftRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if (req == nil && !c.onRead) || (req != nil && (c.match == nil || !c.match(req))) {
		return nil
	}
	first := c.first
	c.match, c.onRead, c.first = nil, false, nil
	return first
}

func (c *interposer) commit(first []*pb.InternalRaftRequest) {
	for _, r := range first {
		b, err := proto.Marshal(r)
		if err != nil {
			panic(err)
		}
		_ = c.oneMember.Propose(context.Background(), b)
	}
}

func (c *interposer) Propose(ctx context.Context, cmd []byte) error {
	var req pb.InternalRaftRequest
	if err := proto.Unmarshal(cmd, &req); err == nil {
		c.commit(c.take(&req))
	}
	return c.oneMember.Propose(ctx, cmd)
}

func (c *interposer) ReadIndex(ctx context.Context) (uint64, error) {
	c.commit(c.take(nil))
	return c.oneMember.ReadIndex(ctx)
}

// startInterposed starts a server on an interposer with auth enabled,
// a user "writer" with readwrite on /a/, and returns the interposer,
// root's client and writer's.
func startInterposed(t *testing.T) (c *interposer, root, writer *clientv3.Client) {
	c = &interposer{oneMember: newOneMember(5)}
	srv, cli := startServerWith(t, authConfig, func(s *Server) { c.srv = s; s.SetConsensus(c) })
	enableAuth(t, cli)
	root = rootClient(t, srv)
	writer = newUser(t, srv, root, "writer", prefixPerm(clientv3.PermReadWrite, "/a/"))
	return c, root, writer
}

// revokeA is the revoke of writer's grant on /a/ that another client
// commits meanwhile.
func revokeA() *pb.InternalRaftRequest {
	return &pb.InternalRaftRequest{AuthRoleRevokePermission: &pb.AuthRoleRevokePermissionRequest{
		Role: "writer", Key: []byte("/a/"), RangeEnd: []byte(clientv3.GetPrefixRangeEnd("/a/"))}}
}

// TestAuth_writeCheckedAgainAtApply: a put checked before its grant was
// revoked, and applied after, is refused at apply (auth revision old);
// clientv3 logs in again and retries, and the retry is denied: the key
// is not written. It used to be written, the check before the proposal
// being the only one.
func TestAuth_writeCheckedAgainAtApply(t *testing.T) {
	c, root, writer := startInterposed(t)
	ctx := testCtx(t, 20*time.Second)
	c.arm(func(r *pb.InternalRaftRequest) bool { return r.Put != nil && string(r.Put.Key) == "/a/1" }, revokeA())
	_, err := writer.Put(ctx, "/a/1", "v")
	wantErr(t, "a put whose grant was revoked before it applied", err, rpctypes.ErrPermissionDenied)
	if g, err := root.Get(ctx, "/a/1"); err != nil || len(g.Kvs) != 0 {
		t.Fatalf("/a/1 after the refused put: %v, %v; want it absent", g, err)
	}
}

// TestAuth_readCheckedAgainAfter: a linearizable read checked before its
// grant was revoked, and read after, is refused (auth revision old),
// and clientv3's retry denied, as etcd answers such a read.
func TestAuth_readCheckedAgainAfter(t *testing.T) {
	c, root, writer := startInterposed(t)
	ctx := testCtx(t, 20*time.Second)
	if _, err := root.Put(ctx, "/a/1", "secret"); err != nil {
		t.Fatal(err)
	}
	c.arm(nil, revokeA())
	g, err := writer.Get(ctx, "/a/1")
	if err == nil {
		t.Fatalf("a read whose grant was revoked before it read: %v, want it refused", g.Kvs)
	}
	wantErr(t, "a read whose grant was revoked before it read", err, rpctypes.ErrPermissionDenied)
}

// TestAuth_leaseRevokeCheckedAtApply: a lease revoke checked when the
// lease held only the caller's keys is refused at apply when a key it
// may not write was attached in between, as etcd checks a revoke's keys
// at apply; that key stays. It used to be deleted with the lease.
func TestAuth_leaseRevokeCheckedAtApply(t *testing.T) {
	c, root, writer := startInterposed(t)
	ctx := testCtx(t, 20*time.Second)
	l, err := writer.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Put(ctx, "/a/1", "v", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	c.arm(func(r *pb.InternalRaftRequest) bool { return r.LeaseRevoke != nil },
		&pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("/b/1"), Value: []byte("root's"), Lease: int64(l.ID)}})
	_, err = writer.Revoke(ctx, l.ID)
	wantErr(t, "revoking a lease that got another's key after the check", err, rpctypes.ErrPermissionDenied)
	if g, err := root.Get(ctx, "/b/1"); err != nil || len(g.Kvs) != 1 {
		t.Fatalf("/b/1 after the refused revoke: %v, %v; want it kept", g, err)
	}
}

// TestAuth_ownWriteNotTheCallers: a write of the node's own made under
// a client call's context (dispatch claims a queue's record during a
// put) is not checked as the client's at apply: an auth change since the
// client's check does not fail it.
func TestAuth_ownWriteNotTheCallers(t *testing.T) {
	srv, cli := startServer(t, authConfig)
	enableAuth(t, cli)
	ctx := context.WithValue(testCtx(t, 10*time.Second), checkedByKey{}, checkedBy{user: "writer", rev: 1})
	if err := srv.Put(ctx, "/q/x", []byte("1;epoch=1")); err != nil {
		t.Fatalf("the node's own put under a client's context checked at auth revision 1: %v, want nil", err)
	}
}

// authEnableCmd is the command an AuthEnable commits.
func authEnableCmd() *pb.InternalRaftRequest {
	return &pb.InternalRaftRequest{AuthEnable: &pb.AuthEnableRequest{},
		Authenticate: &pb.InternalAuthenticateRequest{SimpleToken: auth.NewTokenKey()}}
}

// addRoot adds the root user with the root role, auth still off, so that
// an AuthEnable the test commits may pass.
func addRoot(t *testing.T, ctx context.Context, cli *clientv3.Client) {
	t.Helper()
	if _, err := cli.UserAdd(ctx, "root", "rootpw"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
}

// TestAuth_writeAcrossEnable: a put let through while auth was off and
// applied after auth was enabled is refused, as etcd's apply refuses a
// request with no user ("user name is empty"); it was written.
func TestAuth_writeAcrossEnable(t *testing.T) {
	c := &interposer{oneMember: newOneMember(5)}
	srv, cli := startServerWith(t, authConfig, func(s *Server) { c.srv = s; s.SetConsensus(c) })
	ctx := testCtx(t, 20*time.Second)
	addRoot(t, ctx, cli)
	c.arm(func(r *pb.InternalRaftRequest) bool { return r.Put != nil && string(r.Put.Key) == "/a/1" }, authEnableCmd())
	_, err := cli.Put(ctx, "/a/1", "anonymous")
	root := rootClient(t, srv)
	g, gerr := root.Get(ctx, "/a/1")
	if gerr != nil {
		t.Fatal(gerr)
	}
	if !errors.Is(err, rpctypes.ErrUserEmpty) || len(g.Kvs) != 0 {
		t.Fatalf("anonymous put applied after auth enable: err=%v, stored=%v; want %v and nothing stored", err, g.Kvs, rpctypes.ErrUserEmpty)
	}
}

// TestAuth_readAcrossEnable: a linearizable read without a user, made
// while auth was off here and answered once the enable was applied, is
// refused, as etcd checks a read after its read index; it was answered.
func TestAuth_readAcrossEnable(t *testing.T) {
	c := &interposer{oneMember: newOneMember(5)}
	_, cli := startServerWith(t, authConfig, func(s *Server) { c.srv = s; s.SetConsensus(c) })
	ctx := testCtx(t, 20*time.Second)
	if _, err := cli.Put(ctx, "/secret", "s3cr3t"); err != nil {
		t.Fatal(err)
	}
	addRoot(t, ctx, cli)
	c.arm(nil, authEnableCmd())
	g, err := cli.Get(ctx, "/secret")
	if !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Fatalf("anonymous linearizable read after auth enable: %v, %v; want %v", g, err, rpctypes.ErrUserEmpty)
	}
}
