package mvcc

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// eventRevs returns the mod revisions of the events in resps.
func eventRevs(resps []*pb.WatchResponse) []int64 {
	var revs []int64
	for _, r := range resps {
		for _, ev := range r.Events {
			revs = append(revs, ev.Kv.ModRevision)
		}
	}
	return revs
}

// TestStore_Watch_fullSinkFallsBehind checks that a watcher whose sink is
// full becomes unsynced without slowing writes, and catches up from the
// change log, in order and losing nothing, once its sink has room.
func TestStore_Watch_fullSinkFallsBehind(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	sink := &testSink{limit: 2}
	w := st.Watch(1, &pb.WatchCreateRequest{Key: []byte("k")}, sink)
	for i := range 5 { // revisions 2..6
		put(t, sm, "k", fmt.Sprint(i))
	}
	if synced, unsynced := st.Watchers(); synced != 0 || unsynced != 1 {
		t.Fatalf("watchers: got %d synced %d unsynced, want 0 and 1", synced, unsynced)
	}
	got := eventRevs(sink.take())
	st.syncWatchers()
	got = append(got, eventRevs(sink.take())...)
	if want := "[2 3 4 5 6]"; fmt.Sprint(got) != want {
		t.Fatalf("events: got %v, want %v", got, want)
	}
	if synced, unsynced := st.Watchers(); synced != 1 || unsynced != 0 {
		t.Fatalf("watchers after the sync: got %d synced %d unsynced, want 1 and 0", synced, unsynced)
	}
	if rev, _ := st.ProgressRev([]*Watcher{w}); rev != 6 {
		t.Fatalf("ProgressRev: got %d, want 6", rev)
	}
	st.Unwatch(w)
	put(t, sm, "k", "after")
	if resps := sink.take(); len(resps) != 0 {
		t.Fatalf("after Unwatch: got %v, want nothing", resps)
	}
}

// TestStore_Watch_compactedCancels checks that a watcher whose place in
// history was compacted away is cancelled with compact_revision.
func TestStore_Watch_compactedCancels(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	for i := range 4 { // revisions 2..5
		put(t, sm, "k", fmt.Sprint(i))
	}
	sink := &testSink{limit: 100}
	st.Watch(1, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 2}, sink)
	apply(t, sm, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: 4}})
	st.syncWatchers()
	resps := sink.take()
	if len(resps) != 1 || !resps[0].Canceled || resps[0].CompactRevision != 4 || resps[0].WatchId != 1 {
		t.Fatalf("got %v, want one cancel of watch 1 with compact_revision 4", resps)
	}
	if synced, unsynced := st.Watchers(); synced+unsynced != 0 {
		t.Fatalf("watchers after the cancel: got %d, want 0", synced+unsynced)
	}
}

// TestStore_Watch_fullSinkKeepsItsDeleteThroughACompaction: a watcher
// whose full sink refused a DELETE gets it, though a compaction at that
// revision drops the DELETE from the log, as etcd keeps a slow
// watcher's events as a victim. It used to read them again from the log:
// PUT k=2, then PUT k=3 with a new create revision, no DELETE between,
// and no cancel. ProgressRev stays below the event not yet sent.
func TestStore_Watch_fullSinkKeepsItsDeleteThroughACompaction(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	put(t, sm, "k", "1")
	sink := &testSink{limit: 1}
	w := st.Watch(1, &pb.WatchCreateRequest{Key: []byte("k")}, sink)
	put(t, sm, "k", "2") // fills the sink
	del := apply(t, sm, &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}).Rev
	if rev, current := st.ProgressRev([]*Watcher{w}); rev != del-1 || current {
		t.Fatalf("ProgressRev with the DELETE refused: %d, want %d", rev, del-1)
	}
	apply(t, sm, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: del}})
	got := eventsOf(sink.take())
	st.syncWatchers()
	got += eventsOf(sink.take())
	put(t, sm, "k", "3")
	got += eventsOf(sink.take())
	if want := "PUT:k=2 DELETE:k= PUT:k=3 "; got != want {
		t.Fatalf("events: %q, want %q", got, want)
	}
}

// TestStore_Watch_catchUpBoundedByBytes: a watcher catching up through
// large values gets responses of about syncBatchBytes each, every event
// once and in order, where one response held them all (past any
// client's limit with enough of them).
func TestStore_Watch_catchUpBoundedByBytes(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	big := strings.Repeat("x", 1<<20)
	first := put(t, sm, "k", big)
	for range 11 {
		put(t, sm, "k", big)
	}
	sink := &testSink{limit: 100}
	st.Watch(1, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: first}, sink)
	for range 10 {
		st.syncWatchers()
	}
	resps := sink.take()
	var revs []int64
	for _, r := range resps {
		size := 0
		for _, ev := range r.Events {
			size += len(ev.Kv.Value)
			revs = append(revs, ev.Kv.ModRevision)
		}
		if size > syncBatchBytes+len(big) {
			t.Errorf("a response of %d bytes, want at most %d", size, syncBatchBytes+len(big))
		}
	}
	if len(resps) < 3 || len(revs) != 12 || !slices.IsSorted(revs) || revs[0] != first {
		t.Fatalf("%d responses of revisions %v, want 12 from %d in order, in 3 or more", len(resps), revs, first)
	}
}

// eventsOf spells the events in resps as TYPE:key=value(prev value).
func eventsOf(resps []*pb.WatchResponse) string {
	var s string
	for _, r := range resps {
		for _, ev := range r.Events {
			s += fmt.Sprintf("%s:%s=%s", ev.Type, ev.Kv.Key, ev.Kv.Value)
			if ev.PrevKv != nil {
				s += fmt.Sprintf("(%s)", ev.PrevKv.Value)
			}
			s += " "
		}
	}
	return s
}

// TestStore_Watch_prevKV checks that only watchers that asked get the
// previous values, notified as writes happen and caught up from the
// change log, and that a compaction takes the previous values of the
// changes at its revision from the log, as etcd's watch finds none
// below the compaction.
func TestStore_Watch_prevKV(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	put(t, sm, "k", "1") // revision 2
	live, livePrev := &testSink{limit: 100}, &testSink{limit: 100}
	st.Watch(1, &pb.WatchCreateRequest{Key: []byte("k")}, live)
	st.Watch(2, &pb.WatchCreateRequest{Key: []byte("k"), PrevKv: true}, livePrev)
	// Revisions 3, 4 and 5.
	put(t, sm, "k", "2")
	apply(t, sm, &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}})
	put(t, sm, "k", "3")
	if got, want := eventsOf(live.take()), "PUT:k=2 DELETE:k= PUT:k=3 "; got != want {
		t.Errorf("notified, no prev_kv: %q, want %q", got, want)
	}
	if got, want := eventsOf(livePrev.take()), "PUT:k=2(1) DELETE:k=(2) PUT:k=3 "; got != want {
		t.Errorf("notified, prev_kv: %q, want %q", got, want)
	}
	catchUp := func(prev bool) string {
		sink := &testSink{limit: 100}
		w := st.Watch(3, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 3, PrevKv: prev}, sink)
		defer st.Unwatch(w)
		st.syncWatchers()
		return eventsOf(sink.take())
	}
	if got, want := catchUp(false), "PUT:k=2 DELETE:k= PUT:k=3 "; got != want {
		t.Errorf("caught up, no prev_kv: %q, want %q", got, want)
	}
	if got, want := catchUp(true), "PUT:k=2(1) DELETE:k=(2) PUT:k=3 "; got != want {
		t.Errorf("caught up, prev_kv: %q, want %q", got, want)
	}
	apply(t, sm, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: 3}})
	if got, want := catchUp(true), "PUT:k=2 DELETE:k=(2) PUT:k=3 "; got != want {
		t.Errorf("caught up from the compaction, prev_kv: %q, want %q", got, want)
	}
}
