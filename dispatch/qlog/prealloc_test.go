package qlog

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"chute/internal/testutil"
)

// fileSize is the bytes of file.
func fileSize(t *testing.T, file string) int64 {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// preallocLog opens a log of 1 MiB segments that writes 64 KiB of zeros
// ahead, and appends n records of 100 bytes, fsynced; want holds them
// by seq.
func preallocLog(t *testing.T, n int) (cfg Config, warns *warnings, l *Log, want map[uint64]string) {
	t.Helper()
	cfg, warns = testConfig(t)
	cfg.SegmentBytes = 1 << 20
	cfg.PreallocBytes = 64 << 10
	l, _ = openLog(t, cfg, hooks{})
	want = map[uint64]string{}
	for i := range n {
		r := rec(i, 100)
		want[mustAppend(t, l, r)] = string(r)
	}
	return cfg, warns, l, want
}

// TestLog_prealloc: after an fsynced append the head's file holds zeros
// ahead of its records; a crash leaves them, and the next open takes
// them for the segment's end, without a warning, and cuts them; a close
// cuts them too.
func TestLog_prealloc(t *testing.T) {
	cfg, warns, l, want := preallocLog(t, 10)
	file := segFiles(t, cfg.Dir)[0]
	size := l.Size()
	if got := fileSize(t, file); got < size+cfg.PreallocBytes/2 || got > size+cfg.PreallocBytes {
		t.Errorf("head file: got %d bytes for %d of records, want %d to %d of zeros after them", got, size, cfg.PreallocBytes/2, cfg.PreallocBytes)
	}

	l, got := reopen(t, l, cfg, true)
	checkReplay(t, got, want)
	if w := warns.take(); len(w) != 0 {
		t.Errorf("warnings: got %v, want none for the zeros", w)
	}
	if got := fileSize(t, file); got != size || l.Size() != size {
		t.Errorf("after the crash: file %d bytes, log %d; want both %d, the zeros cut", got, l.Size(), size)
	}

	r := rec(10, 100)
	want[mustAppend(t, l, r)] = string(r)
	size = l.Size()
	if got := fileSize(t, file); got <= size {
		t.Errorf("appending after the open: file %d bytes for %d of records, want zeros after them", got, size)
	}
	l, got = reopen(t, l, cfg, false)
	if got := fileSize(t, file); got != size {
		t.Errorf("after a close: file %d bytes, want %d, the zeros cut", got, size)
	}
	checkReplay(t, got, want)
	if w := warns.take(); len(w) != 0 {
		t.Errorf("warnings: got %v, want none", w)
	}
	_ = l
}

// TestLog_prealloc_sealed: a sealed segment keeps no zeros: each scans to
// its end.
func TestLog_prealloc_sealed(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.PreallocBytes = 1 << 10 // a quarter of the test's segments
	l, _ := openLog(t, cfg, hooks{})
	for i := 0; len(segFiles(t, cfg.Dir)) < 4; i++ {
		if i > 1000 {
			t.Fatal("no fourth segment after 1000 records")
		}
		mustAppend(t, l, rec(i, 100))
	}
	files := segFiles(t, cfg.Dir)
	for _, file := range files[:len(files)-1] {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		h := readHeader(t, file)
		sc := newScanner(f, h.salt, h.size, fileSize(t, file))
		frames := 0
		for {
			_, err := sc.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("%s: frame %d: %v; want the file to end with its last record", file, frames, err)
				break
			}
			frames++
		}
		f.Close()
	}
}

// TestLog_prealloc_damaged: bytes after zeros at the end of the head are
// not preallocated space: the open warns of a damaged segment and cuts
// it at the zeros.
func TestLog_prealloc_damaged(t *testing.T) {
	cfg, warns, l, want := preallocLog(t, 5)
	size := l.Size()
	l.crashOnClose.Store(true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	file := segFiles(t, cfg.Dir)[0]
	end := fileSize(t, file)
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1}, end-1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	_, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
	checkCut(t, warns, file, end-size)
}

// TestLog_prealloc_off: without fsync, or with PreallocBytes negative, the
// head's file holds its records only.
func TestLog_prealloc_off(t *testing.T) {
	for name, set := range map[string]func(*Config){
		"NoSync":   func(c *Config) { c.NoSync = true },
		"negative": func(c *Config) { c.PreallocBytes = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _ := testConfig(t)
			cfg.SegmentBytes = 1 << 20
			set(&cfg)
			l, _ := openLog(t, cfg, hooks{})
			for i := range 5 {
				mustAppend(t, l, rec(i, 100))
			}
			if got, want := fileSize(t, segFiles(t, cfg.Dir)[0]), l.Size(); got != want {
				t.Errorf("head file: got %d bytes, want %d, its records", got, want)
			}
		})
	}
}

// TestLog_prealloc_full: a disk too full for the zeros takes the records
// still: every append succeeds, the file holds its records only, and the
// failure is warned of once; once the disk has room the zeros come back.
func TestLog_prealloc_full(t *testing.T) {
	cfg, warns := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	cfg.PreallocBytes = 4 << 10
	fl := &faults{}
	fl.fullZeros.Store(true)
	l, _ := openLog(t, cfg, fl.hooks())
	for i := range 100 {
		mustAppend(t, l, rec(i, 100))
	}
	file := segFiles(t, cfg.Dir)[0]
	if got, want := fileSize(t, file), l.Size(); got != want {
		t.Errorf("head file: got %d bytes, want %d, its records", got, want)
	}
	w := warns.take()
	if len(w) != 1 || w[0]["msg"] != "qlog: cannot write zeros ahead of the head" {
		t.Errorf("warnings: got %v, want one of the zeros", w)
	}
	fl.fullZeros.Store(false)
	mustAppend(t, l, rec(100, 100))
	if got := fileSize(t, file); got <= l.Size() {
		t.Errorf("with room again: file %d bytes for %d of records, want zeros after them", got, l.Size())
	}
	if w := warns.take(); len(w) != 0 {
		t.Errorf("warnings with room again: got %v, want none", w)
	}
}

// TestLog_prealloc_largeRecord: a record larger than a segment makes a
// larger head, and no zeros after it: they would pass the segment size.
func TestLog_prealloc_largeRecord(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	for i, size := range []int{100, int(cfg.SegmentBytes) + 100, 100} {
		mustAppend(t, l, rec(i, size))
	}
	files := segFiles(t, cfg.Dir)
	if got := fileSize(t, files[len(files)-2]); got <= cfg.SegmentBytes {
		t.Errorf("the large record's segment: %d bytes, want it past the segment size %d", got, cfg.SegmentBytes)
	}
}

// TestLog_prealloc_quota: with a quota the zeros never take the log's
// files past it, while appends fill the log up to it.
func TestLog_prealloc_quota(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.QuotaBytes = 64 << 10
	l, _ := openLog(t, cfg, hooks{})
	disk := func() int64 {
		n := int64(0)
		for _, f := range segFiles(t, cfg.Dir) {
			n += fileSize(t, f)
		}
		return n
	}
	full := false
	for i := 0; i < 2000 && !full; i++ {
		_, err := l.Append(context.Background(), rec(i, 100))
		if full = errors.Is(err, ErrNoSpace); err != nil && !full {
			t.Fatal(err)
		}
		if d := disk(); d > cfg.QuotaBytes {
			t.Fatalf("after %d appends the log's files hold %d bytes, past the quota %d", i+1, d, cfg.QuotaBytes)
		}
	}
	if !full {
		t.Fatal("2000 records of 100 bytes did not fill a quota of 64 KiB")
	}
}

// TestLog_prealloc_largeCommits: while commits average more than
// preallocMaxCommit the writer writes no zeros ahead (they cost more
// than the metadata they save): the appends pass the zeros written
// before and the file ends at the records; once commits are small again
// the zeros come back.
func TestLog_prealloc_largeCommits(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.SegmentBytes = 4 << 20
	cfg.PreallocBytes = 64 << 10
	l, _ := openLog(t, cfg, hooks{})
	mustAppend(t, l, rec(0, 100))
	file := segFiles(t, cfg.Dir)[0]
	if got := fileSize(t, file); got <= l.Size() {
		t.Fatalf("after a small commit: file %d bytes for %d of records, want zeros after them", got, l.Size())
	}
	batch := make([][]byte, 64) // a commit of about 64 KiB
	for i := range batch {
		batch[i] = rec(i, 1<<10)
	}
	for i := range 16 {
		if _, err := l.Append(context.Background(), batch...); err != nil {
			t.Fatalf("large commit %d: %v", i, err)
		}
	}
	if got, want := fileSize(t, file), l.Size(); got != want {
		t.Errorf("after large commits: file %d bytes, want %d, its records only", got, want)
	}
	// Commits of releases alone fsync nothing and do not count.
	commits := l.Stats().Commits
	for seq := uint64(2); seq < 34; seq++ {
		if err := l.Release(seq); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyTrue(t, 5*time.Second, "a commit of the release", func() bool { return l.Stats().Commits > commits })
		commits = l.Stats().Commits
	}
	if _, err := l.Append(context.Background(), batch...); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, file), l.Size(); got != want {
		t.Errorf("a large commit after commits of releases: file %d bytes, want %d, its records only", got, want)
	}
	for i := range 64 {
		mustAppend(t, l, rec(i, 100))
	}
	if got := fileSize(t, file); got <= l.Size() {
		t.Errorf("small commits again: file %d bytes for %d of records, want zeros after them", got, l.Size())
	}
}
