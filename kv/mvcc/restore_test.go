package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// snapshot returns sm's snapshot as bytes.
func snapshot(t testing.TB, sm *StateMachine) []byte {
	t.Helper()
	write, err := sm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestStateMachine_Restore_roundTrip checks that a restored state machine
// reads as the original at every revision it kept, with its applied
// index, leases and lease keys.
func TestStateMachine_Restore_roundTrip(t *testing.T) {
	a, sa := newTestStateMachine(t, Config{MemberID: 1})
	put(t, a, "/a", "1")
	apply(t, a, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: 7, TTL: 60}})
	apply(t, a, &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("/b"), Value: []byte("x"), Lease: 7}})
	put(t, a, "/a", "2")
	apply(t, a, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: 3}})
	raw := snapshot(t, a)

	b, sb := newTestStateMachine(t, Config{MemberID: 2})
	if err := b.Restore(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if b.Applied() != a.Applied() || sb.Rev() != sa.Rev() {
		t.Fatalf("restored at applied %d revision %d, want %d and %d", b.Applied(), sb.Rev(), a.Applied(), sa.Rev())
	}
	for rev := int64(3); rev <= sa.Rev(); rev++ {
		for _, key := range []string{"/a", "/b"} {
			want, _ := get(t, sa, key, rev)
			if got, err := get(t, sb, key, rev); err != nil || got != want {
				t.Errorf("%s at %d: restored %q %v, original %q", key, rev, got, err, want)
			}
		}
	}
	info, err := sb.TimeToLive(7, true)
	if err != nil || info.TTL != 60 || len(info.Keys) != 1 || string(info.Keys[0]) != "/b" {
		t.Fatalf("lease 7 after restore: %+v %v, want TTL 60 and key /b", info, err)
	}
	h1, _, _, err1 := sa.HashKV(0)
	h2, _, _, err2 := sb.HashKV(0)
	if err1 != nil || err2 != nil || h1 != h2 {
		t.Errorf("HashKV: restored %x %v, original %x %v", h2, err2, h1, err1)
	}
}

// TestStateMachine_Snapshot_writtenAfterApplies checks that a snapshot
// holds the state of its capture, byte for byte what writing it at once
// gives, when later puts and a compaction are applied before it is
// written, and more while it is written (which the race detector
// watches): the write reads the keys' revisions after the store's lock
// is released.
func TestStateMachine_Snapshot_writtenAfterApplies(t *testing.T) {
	a, sa := newTestStateMachine(t, Config{MemberID: 1})
	putReq := func(i int) *pb.InternalRaftRequest {
		return &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(fmt.Sprintf("/k%02d", i%10)), Value: []byte(strconv.Itoa(i))}}
	}
	for i := range 50 {
		apply(t, a, putReq(i))
	}
	apply(t, a, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: 7, TTL: 60}})
	apply(t, a, &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("/k03")}})
	want := snapshot(t, a)
	rev := sa.Rev()
	write, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Later applies, few enough that each key's revisions stay in the
	// array the capture saw (five of room for eight), then every key's
	// revisions compacted away but its last.
	for i := 50; i < 70; i++ {
		apply(t, a, putReq(i))
	}
	apply(t, a, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: sa.Rev()}})
	done := make(chan error, 1)
	go func() {
		for i := 70; i < 300; i++ {
			if res := a.ApplyLocal(putReq(i)); res.Err != nil {
				done <- res.Err
				return
			}
		}
		done <- nil
	}()
	var got bytes.Buffer
	werr := write(&got)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("snapshot written after later applies: %d bytes, want the %d written at its capture", got.Len(), len(want))
	}
	b, sb := newTestStateMachine(t, Config{MemberID: 2})
	if err := b.Restore(bytes.NewReader(got.Bytes())); err != nil {
		t.Fatal(err)
	}
	if sb.Rev() != rev {
		t.Fatalf("restored at revision %d, want the capture's %d", sb.Rev(), rev)
	}
}

// TestStateMachine_Restore_refusesCorrupt checks that a damaged snapshot
// is refused and leaves the state as it was.
func TestStateMachine_Restore_refusesCorrupt(t *testing.T) {
	a, _ := newTestStateMachine(t, Config{})
	put(t, a, "k", "v")
	raw := snapshot(t, a)
	b, sb := newTestStateMachine(t, Config{})
	put(t, b, "before", "restore")
	for name, bad := range map[string][]byte{
		"flipped byte":        func() []byte { c := bytes.Clone(raw); c[len(c)/2] ^= 0xff; return c }(),
		"truncated":           raw[:len(raw)-1],
		"bytes after the end": append(bytes.Clone(raw), 0),
		"not one":             []byte("hello"),
		"empty":               nil,
	} {
		if err := b.Restore(bytes.NewReader(bad)); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Errorf("%s: got %v, want %v", name, err, ErrSnapshotCorrupt)
		}
	}
	if got, err := get(t, sb, "before", 0); err != nil || got != "restore" {
		t.Fatalf("after refused restores: got %q %v, want the old state", got, err)
	}
}

// TestStateMachine_Restore_failsWaiting checks that a request waiting for
// its command learns that its result is unknown when a snapshot replaces
// the state.
func TestStateMachine_Restore_failsWaiting(t *testing.T) {
	a, _ := newTestStateMachine(t, Config{})
	raw := snapshot(t, a)
	b, _ := newTestStateMachine(t, Config{})
	_, ch, cancel := b.Register()
	defer cancel()
	if err := b.Restore(bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-ch:
		if !errors.Is(res.Err, ErrResultUnknown) {
			t.Fatalf("waiting request: got %v, want %v", res.Err, ErrResultUnknown)
		}
	default:
		t.Fatal("waiting request not told of the restore")
	}
}

// BenchmarkStateMachine_Snapshot captures and writes the snapshot of a
// store of 100,000 keys with two revisions of a 256-byte value each (56 MB
// encoded): its bytes per op are what a snapshot costs in memory beyond
// the store. At e95aa49, which encoded the whole snapshot into one buffer
// under the store's read lock, 201 MB and 416 ms per op; capturing the
// keys' revision slices and streaming the encoding, 4 MB and 29 ms.
func BenchmarkStateMachine_Snapshot(b *testing.B) {
	sm := benchSnapshotStore(b)
	b.ReportAllocs()
	for b.Loop() {
		write, err := sm.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		if err := write(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateMachine_SnapshotCapture is Snapshot without the write:
// about the time the store's read lock is held, in which applies wait
// (384 ms at e95aa49, 13-15 ms since).
func BenchmarkStateMachine_SnapshotCapture(b *testing.B) {
	sm := benchSnapshotStore(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sm.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateMachine_Restore restores the snapshot of the store of
// BenchmarkStateMachine_Snapshot (56 MB) into an empty state machine:
// its bytes per op are what a follower allocates to restore it. Read
// whole before decoding (io.ReadAll, at 8cdcdae: the snapshot's bytes,
// and the copies of them as the buffer grew), 257 MB per op; decoded as
// it is read, 136-144 MB (the restored state, and the change log as it
// grew), in about the same time.
func BenchmarkStateMachine_Restore(b *testing.B) {
	raw := snapshot(b, benchSnapshotStore(b))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		to, _ := newTestStateMachine(b, Config{MemberID: 2})
		r := bytes.NewReader(raw)
		b.StartTimer()
		if err := to.Restore(r); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSnapshotStore(b *testing.B) *StateMachine {
	b.Helper()
	sm, _ := newTestStateMachine(b, Config{MemberID: 1})
	value := bytes.Repeat([]byte("v"), 256)
	for round := range 2 {
		for i := range 100_000 {
			res := sm.ApplyLocal(&pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(fmt.Sprintf("/bench/%06d", i)), Value: value}})
			if res.Err != nil {
				b.Fatalf("round %d put %d: %v", round, i, res.Err)
			}
		}
	}
	return sm
}

// TestRestore_futureWatchKeepsItsStart: a watch from a revision the
// member has not reached (a client resuming on a member behind the one
// it watched) that then restores an older snapshot, and replays the log
// after it, gets nothing before its start revision, and each revision
// from it once.
func TestRestore_futureWatchKeepsItsStart(t *testing.T) {
	leader, _ := newTestStateMachine(t, Config{MemberID: 1})
	follower, fs := newTestStateMachine(t, Config{MemberID: 2})
	for i := range 3 { // revisions 2 to 4 on both
		put(t, leader, "k", fmt.Sprint(i))
		put(t, follower, "k", fmt.Sprint(i))
	}
	sink := &testSink{limit: 100}
	fs.Watch(1, &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 10}, sink)
	for i := range 3 { // revisions 5 to 7 on the leader alone
		put(t, leader, "k", fmt.Sprint("l", i))
	}
	if err := follower.Restore(bytes.NewReader(snapshot(t, leader))); err != nil {
		t.Fatal(err)
	}
	fs.syncWatchers()
	for i := range 5 { // revisions 8 to 12, replayed after the snapshot
		put(t, follower, "k", fmt.Sprint("f", i))
	}
	fs.syncWatchers()
	if got := eventRevs(sink.take()); fmt.Sprint(got) != "[10 11 12]" {
		t.Errorf("watch from revision 10 got events at %v, want [10 11 12]", got)
	}
}

// TestRestore_watchFromCompactionAsLive: a watch from the compaction
// revision gets the same events on a member that compacted live and on
// one restored from a snapshot taken after: the changes from that
// revision on, without a DELETE at it, whose tombstone the compaction
// dropped (as etcd's does). The live member delivered that DELETE and
// the restored one did not.
func TestRestore_watchFromCompactionAsLive(t *testing.T) {
	live, ls := newTestStateMachine(t, Config{MemberID: 1})
	put(t, live, "a", "1")                                                                         // 2
	put(t, live, "b", "1")                                                                         // 3
	apply(t, live, &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("a")}}) // 4
	put(t, live, "b", "2")                                                                         // 5
	apply(t, live, &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: 4}})
	restored, rs := newTestStateMachine(t, Config{MemberID: 2})
	if err := restored.Restore(bytes.NewReader(snapshot(t, live))); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name string
		st   *Store
	}{{"live", ls}, {"restored", rs}} {
		sink := &testSink{limit: 100}
		m.st.Watch(1, &pb.WatchCreateRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: 4}, sink)
		m.st.syncWatchers()
		if got := eventRevs(sink.take()); fmt.Sprint(got) != "[5]" {
			t.Errorf("%s member: a watch from the compaction revision 4 got events at %v, want [5]", m.name, got)
		}
	}
}
