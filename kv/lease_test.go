package kv

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/kv/mvcc"
)

// TestLease_keysVanishAfterTTL checks that keys attached to a lease are
// deleted, with DELETE events, once the lease expires, and that keep-alives
// hold them meanwhile.
func TestLease_keysVanishAfterTTL(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 20*time.Second)
	short, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "eph", "1", clientv3.WithLease(short.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "held", "1", clientv3.WithLease(kept.ID)); err != nil {
		t.Fatal(err)
	}
	ka, err := cli.KeepAlive(ctx, kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka { // the client renews while this is drained
		}
	}()
	wc := cli.Watch(ctx, "eph")

	ttl, err := cli.TimeToLive(ctx, short.ID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != 1 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "eph" {
		t.Fatalf("time to live: got granted %d keys %q, want 1 and [eph]", ttl.GrantedTTL, ttl.Keys)
	}
	start := time.Now()
	evs := collect(t, wc, 1, 5*time.Second)
	if evs[0].Type != clientv3.EventTypeDelete || string(evs[0].Kv.Key) != "eph" {
		t.Fatalf("got %s, want DELETE eph", describe(evs))
	}
	t.Logf("expired %v after the first time-to-live read", time.Since(start))
	checkKey(t, cli, "eph", nil)

	ttl, err = cli.TimeToLive(ctx, short.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL != -1 {
		t.Fatalf("expired lease: got TTL %d, want -1", ttl.TTL)
	}
	// Well past its TTL, the kept-alive lease still holds its key.
	time.Sleep(1500 * time.Millisecond)
	checkKey(t, cli, "held", &kvState{"1", 3, 3, 1})
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 1 || leases.Leases[0].ID != kept.ID {
		t.Fatalf("leases: got %v, want only %x", leases.Leases, kept.ID)
	}
	if _, err := cli.Revoke(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}
	checkKey(t, cli, "held", nil)
}

// TestLease_grantRules checks etcd's grant rules: the minimum TTL, a chosen
// id, and a duplicate id.
func TestLease_grantRules(t *testing.T) {
	_, cli := startServer(t, func(c *Config) { c.MinLeaseTTL = DefaultMinLeaseTTL })
	ctx := testCtx(t, 10*time.Second)
	g, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if g.TTL != DefaultMinLeaseTTL {
		t.Fatalf("TTL 1: got %d, want the minimum %d", g.TTL, DefaultMinLeaseTTL)
	}
	raw := pb.NewLeaseClient(cli.ActiveConnection())
	chosen, err := raw.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 42, TTL: 10})
	if err != nil {
		t.Fatal(err)
	}
	if chosen.ID != 42 {
		t.Fatalf("chosen id: got %d, want 42", chosen.ID)
	}
	if _, err := raw.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 42, TTL: 10}); !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
		t.Fatalf("duplicate id: got %v, want %v", err, rpctypes.ErrLeaseExist)
	}
	if _, err := raw.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: mvcc.MaxLeaseTTL + 1}); !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseTTLTooLarge) {
		t.Fatalf("huge TTL: got %v, want %v", err, rpctypes.ErrLeaseTTLTooLarge)
	}
}

// TestServer_shutdownDoesNotWaitForIdleStreams checks that open keep-alive
// and watch streams do not hold up a shutdown until its deadline.
func TestServer_shutdownDoesNotWaitForIdleStreams(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	l, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.KeepAlive(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	wc := cli.Watch(ctx, "w", clientv3.WithCreatedNotify())
	<-wc
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if sctx.Err() != nil {
		t.Fatalf("shutdown ran into its deadline (%v): idle streams held it up", time.Since(start))
	}
}
