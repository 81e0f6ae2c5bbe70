package kv

import (
	"fmt"
	"testing"
	"time"

	"chute/internal/testutil"
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
