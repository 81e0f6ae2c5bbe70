package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestStore_Range_oldRevisions checks reads at past revisions, and the
// errors below the compaction and above the current revision.
func TestStore_Range_oldRevisions(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	if got := st.Rev(); got != 1 {
		t.Fatalf("fresh store at revision %d, want 1", got)
	}
	r2 := put(t, sm, "a", "1")
	r3 := put(t, sm, "a", "2")
	apply(t, sm, &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("a")}})
	tests := []struct {
		rev  int64
		want string
	}{{r2, "1"}, {r3, "2"}, {0, ""}}
	for _, tt := range tests {
		if got, err := get(t, st, "a", tt.rev); err != nil || got != tt.want {
			t.Errorf("a at %d: got %q %v, want %q", tt.rev, got, err, tt.want)
		}
	}
	if _, err := get(t, st, "a", st.Rev()+1); !errors.Is(err, ErrFutureRev) {
		t.Errorf("future revision: got %v, want %v", err, ErrFutureRev)
	}
	apply(t, sm, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: r3}})
	if _, err := get(t, st, "a", r2); !errors.Is(err, ErrCompacted) {
		t.Errorf("below the compaction: got %v, want %v", err, ErrCompacted)
	}
	if got, err := get(t, st, "a", r3); err != nil || got != "2" {
		t.Errorf("at the compaction: got %q %v, want 2", got, err)
	}
}

// TestStore_autoCompaction checks that writes keep at least
// HistoryRevisions revisions and compact older ones, and that with
// DisableAutoCompaction they leave it to CompactionDue's caller.
func TestStore_autoCompaction(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{HistoryRevisions: 10})
	for i := range 30 { // revisions 2..31
		put(t, sm, "a", fmt.Sprint(i))
	}
	// Twice 10 revisions accumulated at 20 and at 30: compacted to 10, then 20.
	if _, err := get(t, st, "a", 19); !errors.Is(err, ErrCompacted) {
		t.Fatalf("revision 19: got %v, want %v", err, ErrCompacted)
	}
	if got, err := get(t, st, "a", 20); err != nil || got != "18" {
		t.Fatalf("revision 20: got %q %v, want 18", got, err)
	}

	sm, st = newTestStateMachine(t, Config{HistoryRevisions: 10})
	st.DisableAutoCompaction()
	for i := range 30 {
		put(t, sm, "a", fmt.Sprint(i))
	}
	if _, err := get(t, st, "a", 2); err != nil {
		t.Fatalf("revision 2 without auto compaction: %v", err)
	}
	if rev, due := st.CompactionDue(); !due || rev != 21 {
		t.Fatalf("CompactionDue: got %d %v, want 21 true", rev, due)
	}
}

// TestKeyIndex_compact checks which revisions of a key survive a
// compaction: the newest at or below it, unless it is a tombstone, and
// every later one.
func TestKeyIndex_compact(t *testing.T) {
	// Revisions 2 and 4 are puts, 5 a tombstone, 7 a put.
	build := func() *keyIndex {
		ki := &keyIndex{key: "k"}
		for _, r := range []struct {
			main int64
			live bool
		}{{2, true}, {4, true}, {5, false}, {7, true}} {
			kr := keyRevision{rev: revision{main: r.main}}
			if r.live {
				kr.kv = &mvccpb.KeyValue{Key: []byte("k"), ModRevision: r.main}
			}
			ki.revisions = append(ki.revisions, kr)
		}
		return ki
	}
	tests := []struct {
		rev       int64
		wantMains []int64
		wantEmpty bool
	}{
		{1, []int64{2, 4, 5, 7}, false},
		{3, []int64{2, 4, 5, 7}, false},
		{4, []int64{4, 5, 7}, false},
		{5, []int64{7}, false},
		{6, []int64{7}, false},
		{8, []int64{7}, false},
	}
	for _, tt := range tests {
		ki := build()
		_, empty := ki.compact(tt.rev)
		var mains []int64
		for _, r := range ki.revisions {
			mains = append(mains, r.rev.main)
		}
		if fmt.Sprint(mains) != fmt.Sprint(tt.wantMains) || empty != tt.wantEmpty {
			t.Errorf("compact(%d): got %v empty=%v, want %v empty=%v", tt.rev, mains, empty, tt.wantMains, tt.wantEmpty)
		}
	}
	ki := &keyIndex{key: "k", revisions: []keyRevision{{rev: revision{main: 2}, kv: &mvccpb.KeyValue{}}, {rev: revision{main: 3}}}}
	if _, empty := ki.compact(3); !empty {
		t.Errorf("compact past a tombstone: got %d revisions left, want none", len(ki.revisions))
	}
}

// BenchmarkStateMachine_Put applies puts of a 256-byte value to 50,000
// keys, two to each, with no watcher; besides the allocations per put it
// reports the live heap each put leaves beside its value, which the
// request brought (the key space holds every revision until a
// compaction). With an event of its own for each change in the change
// log (fe620aa): 276 B and 7 allocations per put; with the log's records
// holding what an event is made of: 230 B and 6.
func BenchmarkStateMachine_Put(b *testing.B) {
	const keys = 50_000
	value := make([]byte, 256)
	reqs := make([]*pb.InternalRaftRequest, 2*keys)
	for i := range reqs {
		reqs[i] = &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: fmt.Appendf(nil, "/bench/%06d", i%keys), Value: bytes.Clone(value)}}
	}
	var live float64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		sm, _ := newTestStateMachine(b, Config{})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for _, r := range reqs {
			if res := sm.ApplyLocal(r); res.Err != nil {
				b.Fatal(res.Err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		live = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(reqs))
		runtime.KeepAlive(sm)
		b.StartTimer()
	}
	b.ReportMetric(live, "live-B/put")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reqs)), "ns/put")
}
