package qlog

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"chute/internal/testutil"
)

func TestLog_Append_quota(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.QuotaBytes = 4 * cfg.SegmentBytes
	l, _ := openLog(t, cfg, hooks{})
	seqs := fillToQuota(t, l)
	if s := l.Size(); s > cfg.QuotaBytes {
		t.Errorf("size %d, above the quota %d", s, cfg.QuotaBytes)
	}
	// Releasing frees the segments; appends work again.
	if err := l.Release(seqs...); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 5*time.Second, "space freed", func() bool {
		return l.Size() <= cfg.SegmentBytes+1024
	})
	r := rec(5000, 100)
	seq := mustAppend(t, l, r)
	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, map[uint64]string{seq: string(r)})
}

// A full file system fails the append with ErrNoSpace and leaves nothing
// of it; the log goes on once there is space.
func TestLog_Append_fileSystemFull(t *testing.T) {
	cfg, warns := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	fl := &faults{}
	l, _ := openLog(t, cfg, fl.hooks())
	want := map[uint64]string{}
	r := rec(0, 100)
	want[mustAppend(t, l, r)] = string(r)
	size := l.Size()

	fl.full.Store(true)
	if _, err := l.Append(context.Background(), rec(1, 100), rec(2, 100)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append on a full disk: %v, want ErrNoSpace", err)
	}
	if s := l.Size(); s != size {
		t.Errorf("size %d after a failed append, want %d", s, size)
	}
	fl.full.Store(false)
	r = rec(3, 100)
	seq := mustAppend(t, l, r)
	if seq != 2 {
		t.Errorf("seq after a failed append: %d, want 2", seq)
	}
	want[seq] = string(r)
	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, want)
	if w := warns.take(); len(w) != 0 {
		t.Errorf("the failed append left damage: %v", w)
	}
}

// A quota below the segment size still frees once every record is
// released: the head is never deleted, so a head that held the whole
// quota would refuse appends for ever.
func TestLog_Append_quotaBelowSegment(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.SegmentBytes = 64 << 10
	cfg.QuotaBytes = 16 << 10
	l, _ := openLog(t, cfg, hooks{})
	seqs := fillToQuota(t, l)
	if err := l.Release(seqs...); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 5*time.Second, "space freed", func() bool {
		return l.Size() <= cfg.QuotaBytes/2
	})
	mustAppend(t, l, rec(5000, 100))
}

// fillToQuota appends records of 100 bytes until l refuses one, which
// must be for the quota, and returns the numbers of those it took.
func fillToQuota(t *testing.T, l *Log) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := 0; i < 1000; i++ {
		seq, err := l.Append(context.Background(), rec(i, 100))
		if err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("appends past the quota: %v, want ErrNoSpace", err)
			}
			return seqs
		}
		seqs = append(seqs, seq)
	}
	t.Fatal("appends past the quota: 1000 records taken, want ErrNoSpace")
	return nil
}

// A close on a full disk cannot write the pending releases: it says so
// (ErrNoSpace) rather than close clean, and the records come back at
// the next open, as the error warns.
func TestLog_Close_fullDiskReportsReleasesUnwritten(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	fl := &faults{}
	l, _ := openLog(t, cfg, fl.hooks())
	a := mustAppend(t, l, rec(1, 100))
	b := mustAppend(t, l, rec(2, 100))
	fl.full.Store(true)
	if err := l.Release(a); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("close on a full disk with a release pending: %v, want ErrNoSpace", err)
	}
	fl.full.Store(false)
	_, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, map[uint64]string{a: string(rec(1, 100)), b: string(rec(2, 100))})
}

// An fsync that fails for lack of space fails the log (ErrFailed), where
// a write that does is undone (ErrNoSpace, previous test): the kernel
// may have dropped pages it could not write, so nothing after it can be
// trusted until the log is opened again.
func TestLog_Append_fsyncFullFailsTheLog(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	fl := &faults{}
	l, _ := openLog(t, cfg, fl.hooks())
	r := rec(0, 100)
	want := map[uint64]string{mustAppend(t, l, r): string(r)}
	fl.syncFull.Store(true)
	_, err := l.Append(context.Background(), rec(1, 100))
	if !errors.Is(err, ErrFailed) || errors.Is(err, ErrNoSpace) {
		t.Fatalf("append whose fsync found no space: %v, want ErrFailed (not ErrNoSpace)", err)
	}
	fl.syncFull.Store(false)
	if _, err := l.Append(context.Background(), rec(2, 100)); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failed fsync: %v, want ErrFailed until reopened", err)
	}
	_ = l.Close()
	_, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
}

// TestLog_quotaCompactsWhenNear: records kept and records released
// alternate until the quota refuses an append. The ratio (CompactRatio
// times the live bytes and a segment) lies above the quota once the live
// records pass about half of it: without a compaction due by the quota,
// appends were refused for good with half the quota reclaimable. Now the
// quota refuses only once live records fill most of it.
func TestLog_quotaCompactsWhenNear(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.QuotaBytes = 64 << 10 // segments of 4 KiB
	l, _ := openLog(t, cfg, hooks{})
	live := 0
	for i := 0; i < 1000; i++ {
		if _, err := l.Append(t.Context(), rec(2*i, 300)); errors.Is(err, ErrNoSpace) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		live += dataFrameSize(300)
		drop, err := l.Append(t.Context(), rec(2*i+1, 300))
		if errors.Is(err, ErrNoSpace) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(drop); err != nil {
			t.Fatal(err)
		}
	}
	if live < int(cfg.QuotaBytes)*7/10 {
		t.Fatalf("the quota of %d bytes refused appends with %d live: the released records were never reclaimed", cfg.QuotaBytes, live)
	}
}

// TestLog_quotaDeletesReleasedHeadFirst: every record released, an
// append that fits the quota alone rolls the head; the sealed head, whose
// records are all released, counted against the quota until the next
// round deleted it, and the append was refused.
func TestLog_quotaDeletesReleasedHeadFirst(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.QuotaBytes = 8 << 10 // segments of 2 KiB
	l, _ := openLog(t, cfg, hooks{})
	seq := mustAppend(t, l, rec(1, 4080)) // larger than a segment: a head of its own
	if err := l.Release(seq); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 5*time.Second, "the release written", func() bool {
		return l.Stats().Live == 0 && l.Stats().Commits >= 2
	})
	if _, err := l.Append(t.Context(), rec(2, 4080)); err != nil { // 4113 bytes of 8192
		t.Fatalf("an append to a log with nothing live: %v (stats %+v)", err, l.Stats())
	}
}

// TestLog_deletedSegmentsLetGo: a segment the log deleted gives its disk
// space back once nothing maps it. The log's list of segments dropped the
// oldest by reslicing, and its array kept the segment, and so its
// mapping and its file, reachable until an append moved the array: a few
// segments (64 MiB each by default) held on disk for nothing.
func TestLog_deletedSegmentsLetGo(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	for round := range 4 {
		var seqs []uint64
		for i := range 20 {
			seqs = append(seqs, mustAppend(t, l, rec(round*100+i, 300)))
		}
		if err := l.Release(seqs...); err != nil {
			t.Fatal(err)
		}
	}
	testutil.EventuallyTrue(t, 5*time.Second, "segments deleted", func() bool { return l.Stats().Deleted >= 4 })
	testutil.EventuallyTrue(t, 5*time.Second, "the deleted segments' files closed", func() bool {
		runtime.GC()
		return testutil.DeletedOpen(t, cfg.Dir, spareExt) == 0
	})
}
