package kvtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"chute/kv"
)

// startMembers starts n servers on free loopback ports sharing one Log
// and returns a client of each; all are stopped when the test ends.
func startMembers(t *testing.T, n int) []*clientv3.Client {
	t.Helper()
	_, clis := startLogMembers(t, New(), n)
	return clis
}

// startLogMembers starts n servers on free loopback ports joining log and
// returns them with a client of each; all are stopped when the test ends.
func startLogMembers(t *testing.T, log *Log, n int) ([]*kv.Server, []*clientv3.Client) {
	t.Helper()
	var srvs []*kv.Server
	var clis []*clientv3.Client
	for i := range n {
		srv, cli := startLogMember(t, log, uint64(0x100+i))
		srvs = append(srvs, srv)
		clis = append(clis, cli)
	}
	return srvs, clis
}

// startLogMember starts a server with member id id on a free loopback
// port joining log, and returns it with a client; both are stopped when
// the test ends.
func startLogMember(t *testing.T, log *Log, id uint64) (*kv.Server, *clientv3.Client) {
	t.Helper()
	cfg := kv.DefaultConfig()
	cfg.MemberID = id
	cfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	cfg.MinLeaseTTL = 1
	cfg.BcryptCost = bcrypt.MinCost // tests log in often; cost 10 takes seconds under -race
	srv, err := kv.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := log.Join(srv, cfg.MemberID)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetConsensus(c)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientAddrs()[0].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return srv, cli
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestLog_membersAgree writes through three members in turn and
// checks what only one ordered log gives: one revision sequence, a lease
// granted on one member usable and revocable on the others, compaction
// everywhere, a watch on one member resumed from another's revision.
func TestLog_membersAgree(t *testing.T) {
	clis := startMembers(t, 3)
	ctx := testCtx(t, 20*time.Second)
	var revs []int64
	for i := range 9 {
		resp, err := clis[i%3].Put(ctx, fmt.Sprintf("/k/%d", i), fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	for i := 1; i < len(revs); i++ {
		if revs[i] != revs[i-1]+1 {
			t.Fatalf("revisions through three members %v: want one sequence", revs)
		}
	}
	// A watch on c from the revision of a put through a sees exactly the
	// later puts.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := clis[2].Watch(wctx, "/k/", clientv3.WithPrefix(), clientv3.WithRev(revs[6]))
	var got []string
	for len(got) < 3 {
		wr := <-wch
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			got = append(got, string(ev.Kv.Key))
		}
	}
	if want := []string{"/k/6", "/k/7", "/k/8"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watch from revision %d on c: %v, want %v", revs[6], got, want)
	}

	lease, err := clis[0].Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clis[1].Put(ctx, "/leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("put with a lease granted on another member: %v", err)
	}
	if _, err := clis[2].KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatalf("keep-alive on a third member: %v", err)
	}
	if _, err := clis[1].Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	for i, cli := range clis {
		if resp, err := cli.Get(ctx, "/leased"); err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("member %d after revoke: %v %v, want the key gone", i, resp, err)
		}
	}

	cur, err := clis[0].Get(ctx, "/k/0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clis[0].Compact(ctx, revs[4]); err != nil {
		t.Fatal(err)
	}
	for i, cli := range clis {
		if _, err := cli.Get(ctx, "/k/0", clientv3.WithRev(revs[2])); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatalf("member %d read below the compaction: %v, want compacted", i, err)
		}
	}
	var hashes []uint32
	for _, cli := range clis {
		h, err := cli.HashKV(ctx, cli.Endpoints()[0], cur.Header.Revision)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h.Hash)
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Fatalf("HashKV at revision %d: %v, want equal", cur.Header.Revision, hashes)
	}
	for i, cli := range clis {
		resp, err := cli.Get(ctx, "/k/0", clientv3.WithSerializable())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Revision != cur.Header.Revision {
			t.Fatalf("member %d at revision %d, member 0 at %d", i, resp.Header.Revision, cur.Header.Revision)
		}
	}
}

// TestLog_leaseOutlivesLeaderChange renews a lease on the leader, then
// takes the leader out: the next leader expires the lease no earlier than
// the TTL after the acknowledged renewal (the checkpoint told it), and not
// long after.
func TestLog_leaseOutlivesLeaderChange(t *testing.T) {
	log := New()
	srvs, clis := startLogMembers(t, log, 2)
	ctx := testCtx(t, 20*time.Second)
	const ttl = 3
	lease, err := clis[0].Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clis[1].Put(ctx, "/leased", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // half the TTL gone before the renewal
	if _, err := clis[0].KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	renewed := time.Now()
	log.Leave(srvs[0]) // the leader goes; the second member leads
	for {
		resp, err := clis[1].Get(ctx, "/leased", clientv3.WithSerializable())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			break
		}
		if time.Since(renewed) > ttl*time.Second+2*time.Second {
			t.Fatalf("lease still there %v after its last renewal, TTL %ds", time.Since(renewed), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(renewed); took < ttl*time.Second-100*time.Millisecond {
		t.Fatalf("lease expired %v after its last acknowledged renewal, before its TTL of %ds", took, ttl)
	}
}
