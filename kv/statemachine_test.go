package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// logConsensus is an in-process stand-in for raft, for tests of the state
// machine only: it orders proposals in one log and applies each to every
// member's StateMachine at once, in log order. The first member leads.
// Raft itself, forwarding and elections are tested with the real raft in
// kv/raftkv and end to end in internal/e2e.
type logConsensus struct {
	mu      sync.Mutex // guards index and members; held while applying, so all apply in one order
	index   uint64
	members []*Server
}

func (c *logConsensus) Propose(_ context.Context, cmd []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index++
	for _, m := range c.members {
		m.StateMachine().Apply(c.index, 7, cmd)
	}
	return nil
}

func (c *logConsensus) ReadIndex(context.Context) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index, nil
}

func (c *logConsensus) RenewLease(_ context.Context, id int64) (int64, error) {
	return c.members[0].StateMachine().RenewLease(id)
}

func (c *logConsensus) TransferLeader(context.Context, uint64) error { return ErrBadTransferee }

func (c *logConsensus) Status() ConsensusStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ConsensusStatus{Leader: c.members[0].cfg.MemberID, Term: 7, CommitIndex: c.index, LastIndex: c.index}
}

// startMembers starts n servers sharing one logConsensus.
func startMembers(t *testing.T, n int) ([]*Server, []*clientv3.Client) {
	t.Helper()
	c := &logConsensus{}
	var srvs []*Server
	var clis []*clientv3.Client
	for i := range n {
		srv, cli := startServerWith(t, func(cfg *Config) { cfg.MemberID = uint64(0x100 + i) }, func(s *Server) { s.SetConsensus(c) })
		srvs = append(srvs, srv)
		clis = append(clis, cli)
	}
	c.mu.Lock()
	c.members = srvs
	c.mu.Unlock()
	return srvs, clis
}

// TestStateMachine_membersAgree writes through three members in turn and
// checks what only one ordered log gives: one revision sequence, a lease
// granted on one member usable and revocable on the others, compaction
// everywhere, a watch on one member resumed from another's revision.
func TestStateMachine_membersAgree(t *testing.T) {
	srvs, clis := startMembers(t, 3)
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
	for i, s := range srvs {
		if s.store.currentRev() != srvs[0].store.currentRev() {
			t.Fatalf("member %d at revision %d, member 0 at %d", i, s.store.currentRev(), srvs[0].store.currentRev())
		}
	}
}

// TestStateMachine_snapshotRestore restores one member's snapshot on a
// fresh member and checks reads at old revisions, the change log
// (watches from the past), leases, and that a corrupt snapshot is refused
// and changes nothing.
func TestStateMachine_snapshotRestore(t *testing.T) {
	a, ca := startServer(t, nil)
	ctx := testCtx(t, 20*time.Second)
	first, err := ca.Put(ctx, "/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	lease, err := ca.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { _, err := ca.Put(ctx, "/a", "2"); return err },
		func() error { _, err := ca.Put(ctx, "/b", "x", clientv3.WithLease(lease.ID)); return err },
		func() error { _, err := ca.Delete(ctx, "/a"); return err },
		func() error { _, err := ca.Put(ctx, "/a", "3"); return err },
		func() error { _, err := ca.Compact(ctx, first.Header.Revision+1); return err },
		func() error { _, err := ca.Put(ctx, "/c", "y"); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	write, err := a.StateMachine().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}

	b, cb := startServer(t, func(c *Config) { c.MemberID = 0xbeef })
	if _, err := cb.Put(ctx, "/before", "restore"); err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(buf.Bytes())
	corrupt[len(corrupt)/2] ^= 0xff
	if err := b.StateMachine().Restore(bytes.NewReader(corrupt)); !errors.Is(err, errSnapshotCorrupt) {
		t.Fatalf("restore of a corrupt snapshot: %v, want errSnapshotCorrupt", err)
	}
	if resp, err := cb.Get(ctx, "/before"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("after a refused restore: %v %v, want the old state", resp, err)
	}
	if err := b.StateMachine().Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if b.StateMachine().Applied() != a.StateMachine().Applied() {
		t.Fatalf("applied %d after restore, want %d", b.StateMachine().Applied(), a.StateMachine().Applied())
	}

	cur := a.store.currentRev()
	for rev := first.Header.Revision + 1; rev <= cur; rev++ {
		ra, err := ca.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			t.Fatal(err)
		}
		rb, err := cb.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			t.Fatalf("restored member at revision %d: %v", rev, err)
		}
		if fmt.Sprint(ra.Kvs) != fmt.Sprint(rb.Kvs) || ra.Header.Revision != rb.Header.Revision {
			t.Fatalf("revision %d: restored %v at %d, original %v at %d", rev, rb.Kvs, rb.Header.Revision, ra.Kvs, ra.Header.Revision)
		}
	}
	if _, err := cb.Get(ctx, "/a", clientv3.WithRev(first.Header.Revision)); err == nil {
		t.Fatal("restored member reads below the compaction")
	}
	events := func(cli *clientv3.Client) []string {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var out []string
		for wr := range cli.Watch(wctx, "/", clientv3.WithPrefix(), clientv3.WithRev(first.Header.Revision+1), clientv3.WithPrevKV()) {
			for _, ev := range wr.Events {
				prev := ""
				if ev.PrevKv != nil {
					prev = string(ev.PrevKv.Value)
				}
				out = append(out, fmt.Sprintf("%s %s=%s prev=%s @%d", ev.Type, ev.Kv.Key, ev.Kv.Value, prev, ev.Kv.ModRevision))
			}
			if wr.Header.Revision >= cur {
				break
			}
		}
		return out
	}
	ea, eb := events(ca), events(cb)
	if len(ea) == 0 || fmt.Sprint(ea) != fmt.Sprint(eb) {
		t.Fatalf("watch from the past:\nrestored %v\noriginal %v", eb, ea)
	}
	ttl, err := cb.TimeToLive(ctx, lease.ID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL < 50 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "/b" {
		t.Fatalf("lease after restore: ttl %d keys %q, want about 60 s and /b", ttl.TTL, ttl.Keys)
	}
	if _, err := cb.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if resp, err := cb.Get(ctx, "/b"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("key of a revoked restored lease: %v %v", resp, err)
	}
}
