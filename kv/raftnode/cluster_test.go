package raftnode

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

func TestBootstrapClusterID(t *testing.T) {
	ab := raft.Configuration{Servers: []raft.Server{{ID: "a"}, {ID: "b"}}}
	ba := raft.Configuration{Servers: []raft.Server{{ID: "b"}, {ID: "a"}}}
	ac := raft.Configuration{Servers: []raft.Server{{ID: "a"}, {ID: "c"}}}
	if got, want := bootstrapClusterID(ba), bootstrapClusterID(ab); got != want {
		t.Fatalf("the order of the servers changed the id: %s and %s", got, want)
	}
	if bootstrapClusterID(ab) == bootstrapClusterID(ac) {
		t.Fatal("two bootstraps of different servers got one id")
	}
	if id := bootstrapClusterID(ab); !validClusterID(id) {
		t.Fatalf("%q is no valid id", id)
	}
	minted, err := newClusterID()
	if err != nil || !validClusterID(minted) {
		t.Fatalf("newClusterID: %q, %v", minted, err)
	}
	for _, bad := range []string{"", "0123", "0123456789ABCDEF", "0123456789abcdeg", "0123456789abcdef0"} {
		if validClusterID(bad) {
			t.Errorf("%q taken as an id", bad)
		}
	}
}

func openBolt(t *testing.T, path string) *raftboltdb.BoltStore {
	t.Helper()
	b, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClusterID_persists: the first id adopted stays, across a reopen of
// the stable store.
func TestClusterID_persists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	b := openBolt(t, path)
	c, err := loadClusterID(b)
	if err != nil || c.get() != "" {
		t.Fatalf("new store: %q, %v", c.get(), err)
	}
	if _, err := c.adopt("not an id"); err == nil {
		t.Fatal("a malformed id adopted")
	}
	const first, second = "00000000000000a1", "00000000000000a2"
	if got, err := c.adopt(first); got != first || err != nil {
		t.Fatalf("adopt: %q, %v", got, err)
	}
	if got, _ := c.adopt(second); got != first {
		t.Fatalf("a second adopt replaced the id: %q", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBolt(t, path)
	defer func() { _ = b.Close() }()
	c, err = loadClusterID(b)
	if err != nil || c.get() != first {
		t.Fatalf("reopened: %q, %v, want %q", c.get(), err, first)
	}
}

// TestWrapFSM_mintEntry: the first mint entry applied sets the id, later
// ones do not, and every entry reaches the key space's FSM, by Apply or
// by ApplyBatch as the FSM takes them.
func TestWrapFSM_mintEntry(t *testing.T) {
	const first, second = "00000000000000b1", "00000000000000b2"
	for _, batching := range []bool{false, true} {
		b := openBolt(t, filepath.Join(t.TempDir(), "raft.db"))
		c, err := loadClusterID(b)
		if err != nil {
			t.Fatal(err)
		}
		inner := &countFSM{}
		var fsm raft.FSM = inner
		if batching {
			fsm = batchFSM{inner}
		}
		w := wrapFSM(fsm, c, func(string, ...any) {})
		m1, m2 := mintEntry(first), mintEntry(second)
		cmd := raft.Log{Type: raft.LogCommand, Data: []byte("x")}
		if batching {
			bw, ok := w.(raft.BatchingFSM)
			if !ok {
				t.Fatal("a batching FSM wrapped as a plain one")
			}
			bw.ApplyBatch([]*raft.Log{&cmd, &m1, &m2})
		} else {
			w.Apply(&cmd)
			w.Apply(&m1)
			w.Apply(&m2)
		}
		if got := c.get(); got != first {
			t.Fatalf("batching %v: id %q, want %q", batching, got, first)
		}
		if got := inner.state(); len(got) != 3 || got[0] != "x" {
			t.Fatalf("batching %v: the FSM got %q, want every entry", batching, got)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// batchFSM is countFSM taking entries by ApplyBatch.
type batchFSM struct{ *countFSM }

func (f batchFSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = f.Apply(l)
	}
	return out
}
