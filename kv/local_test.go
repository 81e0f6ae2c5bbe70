package kv

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestServer_Apply checks that Apply's deletes and puts are one write:
// one command applied, one revision for all of them, more ops than a
// client's txn may carry; that a NOSPACE alarm refuses a write that puts
// and lets one that only deletes through.
func TestServer_Apply(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := testCtx(t, 20*time.Second)
	for i := range 300 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/old/%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	deletes := make([]string, 300)
	for i := range deletes {
		deletes[i] = fmt.Sprintf("/old/%d", i)
	}
	puts := make([]KeyValue, 200)
	for i := range puts {
		puts[i] = KeyValue{Key: fmt.Sprintf("/new/%d", i), Value: []byte("y")}
	}
	applied := srv.StateMachine().Applied()
	if err := srv.Apply(ctx, puts, deletes); err != nil {
		t.Fatal(err)
	}
	if got := srv.StateMachine().Applied() - applied; got != 1 {
		t.Fatalf("Apply of 500 ops: %d commands applied, want 1", got)
	}
	old, err := cli.Get(ctx, "/old/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if old.Count != 0 {
		t.Fatalf("deleted keys left: got %d, want 0", old.Count)
	}
	got, err := cli.Get(ctx, "/new/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != len(puts) {
		t.Fatalf("put keys: got %d, want %d", len(got.Kvs), len(puts))
	}
	for _, kv := range got.Kvs {
		if kv.ModRevision != got.Header.Revision {
			t.Fatalf("%s: mod revision %d, want %d: one revision for the write", kv.Key, kv.ModRevision, got.Header.Revision)
		}
	}
	if err := srv.Apply(ctx, nil, nil); err != nil {
		t.Fatalf("empty Apply: got %v, want nil", err)
	}

	if err := srv.RaiseNoSpace(ctx); err != nil {
		t.Fatal(err)
	}
	err = srv.Apply(ctx, []KeyValue{{Key: "/more", Value: []byte("z")}}, []string{"/new/0"})
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Apply with a put under NOSPACE: got %v, want %v", err, ErrNoSpace)
	}
	if v := srv.Get("/new/0"); v == nil {
		t.Fatal("/new/0 deleted by a write NOSPACE refused: not all or nothing")
	}
	if err := srv.Apply(ctx, nil, []string{"/new/0"}); err != nil {
		t.Fatalf("Apply of deletes only under NOSPACE: got %v, want nil", err)
	}
	if v := srv.Get("/new/0"); v != nil {
		t.Fatalf("/new/0 after its delete: got %q, want none", v)
	}
}

// TestServer_CompareAndDelete checks that CompareAndDelete deletes a key
// only while it holds the value compared, and never a missing one.
func TestServer_CompareAndDelete(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := testCtx(t, 20*time.Second)
	if _, err := cli.Put(ctx, "/r", "1;epoch=2"); err != nil {
		t.Fatal(err)
	}
	exists := true
	for _, c := range []struct {
		key, old string
		want     bool
	}{
		{"/r", "1;epoch=1", false}, // claimed again since it was read
		{"/missing", "", false},
		{"/r", "1;epoch=2", true},
		{"/r", "1;epoch=2", false}, // gone
	} {
		deleted, err := srv.CompareAndDelete(ctx, c.key, []byte(c.old))
		if err != nil || deleted != c.want {
			t.Fatalf("CompareAndDelete(%s, %q): %v, %v; want %v", c.key, c.old, deleted, err, c.want)
		}
		exists = exists && !deleted
		r, err := cli.Get(ctx, "/r")
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.Kvs) == 1; got != exists {
			t.Fatalf("after CompareAndDelete(%s, %q): /r exists %v, want %v", c.key, c.old, got, exists)
		}
	}
}
