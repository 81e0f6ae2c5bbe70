package kv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"chute/internal/testutil"
	"chute/kv/mvcc"
)

// TestLeaderDuties_inTheirTerm: the leader records renewals and revokes
// expired leases only through ProposeAsLeader, in the term its Status
// showed; a member whose term ended meanwhile revokes nothing.
func TestLeaderDuties_inTheirTerm(t *testing.T) {
	c := newOneMember(5)
	srv, cli := startServerWith(t, func(cfg *Config) { cfg.LeaseCheckInterval = 20 * time.Millisecond },
		func(s *Server) { c.srv = s; s.SetConsensus(c) })
	ctx := testCtx(t, 10*time.Second)

	grant, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ka, err := cli.KeepAliveOnce(ctx, grant.ID); err != nil || ka.TTL != 1 {
		t.Fatalf("keep-alive: %+v, %v; want TTL 1", ka, err)
	}
	testutil.Eventually(t, 5*time.Second, "the lease revoked", func() error {
		if _, err := srv.store.TimeToLive(int64(grant.ID), false); err == nil {
			return fmt.Errorf("lease %x still there", grant.ID)
		}
		return nil
	})
	got := c.recorded()
	want := []string{"as leader in term 5 checkpoint", "as leader in term 5 revoke"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("duties proposed as %q, want %q", got, want)
	}

	// The term ends without Status showing it: the expiry is refused
	// each time it is tried, and the lease stays.
	c.setRaftTerm(6)
	stale, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the expiry tried", func() error {
		if len(c.recorded()) < 2 {
			return fmt.Errorf("duties so far: %q", c.recorded())
		}
		return nil
	})
	if _, err := srv.store.TimeToLive(int64(stale.ID), false); err != nil {
		t.Errorf("lease of a member whose term ended: %v, want it kept", err)
	}
	for _, d := range c.recorded() {
		if d != "refused in term 5 revoke" {
			t.Errorf("after the term ended, a duty was proposed as %q", d)
		}
	}
}

// revokeHook is oneMember that runs hook, once, as the revoke of lease
// id is proposed, before it commits: a commit that takes a while, as a
// raft round trip under load, or that waits while leadership goes and
// comes.
type revokeHook struct {
	*oneMember
	id   int64
	once sync.Once
	hook func()
}

func (c *revokeHook) ProposeAsLeader(ctx context.Context, term uint64, cmd []byte) error {
	var req pb.InternalRaftRequest
	if err := proto.Unmarshal(cmd, &req); err == nil && req.LeaseRevoke != nil && req.LeaseRevoke.ID == c.id {
		c.once.Do(c.hook)
	}
	return c.oneMember.ProposeAsLeader(ctx, term, cmd)
}

// TestLeaderDuties_keepAliveDuringRevokes: a keep-alive of an expired
// lease acknowledged while the leader revokes the leases of one check
// (lease 200 comes after the slow revoke of 100) is not followed by the
// revoke of that lease: it is checked again just before its revoke.
func TestLeaderDuties_keepAliveDuringRevokes(t *testing.T) {
	started := make(chan struct{})
	c := &revokeHook{oneMember: newOneMember(5), id: 100, hook: func() { close(started); time.Sleep(300 * time.Millisecond) }}
	srv, cli := startServerWith(t, func(cfg *Config) { cfg.LeaseCheckInterval = 20 * time.Millisecond },
		func(s *Server) { c.srv = s; s.SetConsensus(c) })
	ctx := testCtx(t, 10*time.Second)
	for _, id := range []int64{100, 200} {
		if res := srv.write(ctx, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: id, TTL: 1}}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if _, err := cli.Put(ctx, "held", "v", clientv3.WithLease(200)); err != nil {
		t.Fatal(err)
	}
	<-started // both expired; the leader revokes 100, and 200 is next
	ka, err := cli.KeepAliveOnce(ctx, 200)
	if err != nil || ka.TTL <= 0 {
		t.Fatalf("keep-alive of lease 200 during the revoke of 100: %v, %v; want it renewed", ka, err)
	}
	time.Sleep(500 * time.Millisecond) // within the renewed TTL, past the revoke of 100
	if _, err := srv.store.TimeToLive(200, false); err != nil {
		t.Fatalf("lease 200 renewed with TTL %d, then gone: %v", ka.TTL, err)
	}
	if g, err := cli.Get(ctx, "held"); err != nil || len(g.Kvs) != 1 {
		t.Fatalf("the renewed lease's key: %v, %v; want it kept", g, err)
	}
	if _, err := srv.store.TimeToLive(100, false); !errors.Is(err, mvcc.ErrLeaseNotFound) {
		t.Fatalf("lease 100, not renewed: %v, want revoked", err)
	}
}

// TestLeaderDuties_graceInEachTerm: a member that leads again in a later
// term gives every lease its grace again, though no lease check saw it
// follow in between (one waited on a commit meanwhile): a lease whose
// deadline passed while its holder could find no leader is not revoked
// at the first check.
func TestLeaderDuties_graceInEachTerm(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	c := &revokeHook{oneMember: newOneMember(5), id: 100, hook: func() { close(held); <-release }}
	srv, _ := startServerWith(t, func(cfg *Config) { cfg.LeaseCheckInterval = 20 * time.Millisecond },
		func(s *Server) { c.srv = s; s.SetConsensus(c) })
	ctx := testCtx(t, 10*time.Second)
	grant := func(id int64) {
		t.Helper()
		if res := srv.write(ctx, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: id, TTL: 1}}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	grant(100)
	<-held // lease 100 expired; the check waits on its revoke
	grant(200)
	c.statusTerm.Store(6) // leadership went and came back meanwhile
	c.setRaftTerm(6)
	time.Sleep(1200 * time.Millisecond) // lease 200's deadline passes, nobody to renew it
	close(release)                      // the revoke of term 5 is refused
	time.Sleep(300 * time.Millisecond)  // checks of term 6, within its grace
	if _, err := srv.store.TimeToLive(200, false); err != nil {
		t.Fatalf("lease 200, past its deadline when leadership came back: %v; want it given the grace", err)
	}
}
