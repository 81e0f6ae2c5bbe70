package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/kv/mvcc"
)

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
	if err := b.StateMachine().Restore(bytes.NewReader(corrupt)); !errors.Is(err, mvcc.ErrSnapshotCorrupt) {
		t.Fatalf("restore of a corrupt snapshot: %v, want mvcc.ErrSnapshotCorrupt", err)
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

	cur := a.store.Rev()
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
