package kv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv/v3electionpb"
	"chute/kv/v3lockpb"
)

// grant returns a lease of ttl seconds.
func grant(t *testing.T, cli *clientv3.Client, ttl int64) int64 {
	t.Helper()
	g, err := cli.Grant(testCtx(t, 10*time.Second), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return int64(g.ID)
}

// lockAsync calls Lock in a goroutine; the channel gets its answer.
type lockResult struct {
	resp *v3lockpb.LockResponse
	err  error
}

func lockAsync(ctx context.Context, lc v3lockpb.LockClient, name string, lease int64) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		resp, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(name), Lease: lease})
		ch <- lockResult{resp, err}
	}()
	return ch
}

// notYet fails the test if ch answers within d.
func notYet[T any](t *testing.T, ch <-chan T, d time.Duration, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: answered while it should wait: %+v", what, r)
	case <-time.After(d):
	}
}

// within returns ch's answer, failing the test after d.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
	}
	var zero T
	return zero
}

// TestLock_waitsAndHandsOver: etcd's Lock API. A second caller waits
// while the first holds the lock, and gets it once the first unlocks,
// or once the first's lease is revoked; one that gives up while waiting
// leaves no key behind. The holder's key is the name, "/" and the lease
// in hex, as clientv3's Mutex makes it.
func TestLock_waitsAndHandsOver(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 30*time.Second)
	lc := v3lockpb.NewLockClient(cli.ActiveConnection())
	la, lb, lc3 := grant(t, cli, 60), grant(t, cli, 60), grant(t, cli, 60)

	a, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: la})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("l/%x", la); string(a.Key) != want {
		t.Errorf("holder key %q, want %q (the name, / and the lease in hex)", a.Key, want)
	}
	bc := lockAsync(ctx, lc, "l", lb)
	notYet(t, bc, 300*time.Millisecond, "second Lock")

	// One that gives up leaves nothing.
	gctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = lc.Lock(gctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: lc3})
	cancel()
	if err == nil {
		t.Fatal("a Lock that gave up: got the lock")
	}

	if _, err := lc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: a.Key}); err != nil {
		t.Fatal(err)
	}
	b := within(t, bc, 5*time.Second, "second Lock after Unlock")
	if b.err != nil {
		t.Fatal(b.err)
	}
	keys, err := cli.Get(ctx, "l/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(keys.Kvs) != 1 || string(keys.Kvs[0].Key) != string(b.resp.Key) {
		t.Fatalf("keys under l/: %+v, %v; want only the second holder's %q", keys, err, b.resp.Key)
	}

	// The holder's lease revoked: the next caller gets the lock.
	cc := lockAsync(ctx, lc, "l", grant(t, cli, 60))
	notYet(t, cc, 300*time.Millisecond, "third Lock")
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(lb)); err != nil {
		t.Fatal(err)
	}
	if c := within(t, cc, 5*time.Second, "third Lock after the holder's lease was revoked"); c.err != nil {
		t.Fatal(c.err)
	}
}

// TestLock_excludesClientMutex: a Lock call and clientv3's Mutex on one
// name exclude each other (the same keys).
func TestLock_excludesClientMutex(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 30*time.Second)
	lc := v3lockpb.NewLockClient(cli.ActiveConnection())
	if _, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("shared"), Lease: grant(t, cli, 60)}); err != nil {
		t.Fatal(err)
	}
	s, err := concurrency.NewSession(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := concurrency.NewMutex(s, "shared").TryLock(ctx); err != concurrency.ErrLocked {
		t.Fatalf("clientv3 Mutex TryLock while a Lock call holds it: %v, want %v", err, concurrency.ErrLocked)
	}
}

// TestElection_campaignObserveResign: etcd's Election API. The first
// campaigner leads; the second waits; Leader and Observe show the
// leader's value and each value it proclaims; once it resigns the second
// leads and Observe shows its value. A proclamation by a former leader
// is refused with etcd's "election: not leader".
func TestElection_campaignObserveResign(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 30*time.Second)
	ec := v3electionpb.NewElectionClient(cli.ActiveConnection())

	if _, err := ec.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("e")}); err == nil || !strings.Contains(err.Error(), "election: no leader") {
		t.Fatalf("Leader before any campaign: %v, want election: no leader", err)
	}
	a, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("e"), Lease: grant(t, cli, 60), Value: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	type campaign struct {
		resp *v3electionpb.CampaignResponse
		err  error
	}
	bc := make(chan campaign, 1)
	go func() {
		resp, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("e"), Lease: grant(t, cli, 60), Value: []byte("b")})
		bc <- campaign{resp, err}
	}()
	notYet(t, bc, 300*time.Millisecond, "second Campaign")

	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs, err := ec.Observe(octx, &v3electionpb.LeaderRequest{Name: []byte("e")})
	if err != nil {
		t.Fatal(err)
	}
	wantObserved(t, obs, "a")
	if _, err := ec.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: a.Leader, Value: []byte("a2")}); err != nil {
		t.Fatal(err)
	}
	wantObserved(t, obs, "a2")
	if l, err := ec.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("e")}); err != nil || string(l.Kv.Value) != "a2" {
		t.Fatalf("Leader: %+v, %v; want a2", l, err)
	}
	if _, err := ec.Resign(ctx, &v3electionpb.ResignRequest{Leader: a.Leader}); err != nil {
		t.Fatal(err)
	}
	b := within(t, bc, 5*time.Second, "second Campaign after the first resigned")
	if b.err != nil {
		t.Fatal(b.err)
	}
	wantObserved(t, obs, "b")
	if _, err := ec.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: a.Leader, Value: []byte("stale")}); err == nil || !strings.Contains(err.Error(), "election: not leader") {
		t.Fatalf("Proclaim by the former leader: %v, want election: not leader", err)
	}
}

// wantObserved reads Observe's next answer and wants value.
func wantObserved(t *testing.T, obs grpc.ServerStreamingClient[v3electionpb.LeaderResponse], value string) {
	t.Helper()
	ch := make(chan *v3electionpb.LeaderResponse, 1)
	go func() {
		r, _ := obs.Recv()
		ch <- r
	}()
	r := within(t, ch, 5*time.Second, "Observe")
	if r == nil || string(r.Kv.GetValue()) != value {
		t.Fatalf("Observe: %+v, want the value %q", r, value)
	}
}

// TestRecipes_asTheCaller: with auth on, a user with write on the keys
// under a lock's name locks it; another name is refused with etcd's
// permission denied; and so is a campaign there.
func TestRecipes_asTheCaller(t *testing.T) {
	srv, cli := startServer(t, authConfig)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.RoleAdd(ctx, "locker"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.RoleGrantPermission(ctx, "locker", "mine/", "mine0", clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserAdd(ctx, "u", "upw"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "u", "locker"); err != nil {
		t.Fatal(err)
	}
	enableAuth(t, cli)
	u, err := userClient(t, srv, "u", "upw")
	if err != nil {
		t.Fatal(err)
	}
	lease := grant(t, u, 60)
	lc := v3lockpb.NewLockClient(u.ActiveConnection())
	if _, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("mine"), Lease: lease}); err != nil {
		t.Fatalf("Lock of a name the user may write under: %v", err)
	}
	if _, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("theirs"), Lease: lease}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Lock of another name: %v, want permission denied", err)
	}
	ec := v3electionpb.NewElectionClient(u.ActiveConnection())
	if _, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("theirs"), Lease: lease, Value: []byte("x")}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Campaign under another name: %v, want permission denied", err)
	}
}

// TestRecipes_asEtcd: what etcd's lock and election services answer,
// where chute's differed. Their errors have gRPC code Unknown (etcd runs
// the recipes through a client of its own), not their KV step's; a
// Proclaim with lease 0 attaches a new lease of 60 s to the leader's
// key, as etcd's session of lease 0 does, where chute's put took the
// key's lease away (it never went, and other candidates waited for ever);
// a Campaign that waited answers the header of its own write, not of the
// read that saw the way clear.
func TestRecipes_asEtcd(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 30*time.Second)
	lc := v3lockpb.NewLockClient(cli.ActiveConnection())
	ec := v3electionpb.NewElectionClient(cli.ActiveConnection())
	const unknown = 0x7777
	for what, call := range map[string]func() error{
		"Lock": func() error {
			_, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: unknown})
			return err
		},
		"Campaign": func() error {
			_, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("e"), Lease: unknown})
			return err
		},
		"Unlock": func() error { _, err := lc.Unlock(ctx, &v3lockpb.UnlockRequest{}); return err },
	} {
		if err := call(); status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "etcdserver: ") {
			t.Errorf("%s: %v, want code Unknown with etcd's message", what, err)
		}
	}

	a, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("p"), Lease: grant(t, cli, 60), Value: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	if a.Header.Revision != a.Leader.Rev {
		t.Errorf("Campaign at once: header %d, leader key created at %d", a.Header.Revision, a.Leader.Rev)
	}
	noLease := &v3electionpb.LeaderKey{Name: a.Leader.Name, Key: a.Leader.Key, Rev: a.Leader.Rev}
	if _, err := ec.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: noLease, Value: []byte("a2")}); err != nil {
		t.Fatal(err)
	}
	if g, err := cli.Get(ctx, string(a.Leader.Key)); err != nil || len(g.Kvs) != 1 || g.Kvs[0].Lease == 0 || string(g.Kvs[0].Value) != "a2" {
		t.Fatalf("leader key after a Proclaim with lease 0: %v, %v; want a2 with a lease", g, err)
	}

	bc := make(chan *v3electionpb.CampaignResponse, 1)
	go func() {
		b, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("p"), Lease: grant(t, cli, 60), Value: []byte("b")})
		if err != nil {
			t.Error(err)
		}
		bc <- b
	}()
	notYet(t, bc, 300*time.Millisecond, "second Campaign")
	for i := range 3 { // writes between the wait and the way clear
		if _, err := cli.Put(ctx, fmt.Sprintf("other%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, string(a.Leader.Key)); err != nil {
		t.Fatal(err)
	}
	if b := within(t, bc, 5*time.Second, "second Campaign"); b != nil && b.Header.Revision != b.Leader.Rev {
		t.Errorf("Campaign that waited: header %d, its key created at %d; want the same, as etcd", b.Header.Revision, b.Leader.Rev)
	}
}
