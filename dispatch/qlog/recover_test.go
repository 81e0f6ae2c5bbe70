package qlog

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"chute/internal/testutil"
)

// fillOne appends n records of size bytes to a log with one segment and
// closes it; it returns the records by seq and the segment file.
func fillOne(t *testing.T, cfg Config, n, size int) (map[uint64]string, string) {
	t.Helper()
	l, _ := openLog(t, cfg, hooks{})
	want := map[uint64]string{}
	for i := range n {
		r := rec(i, size)
		want[mustAppend(t, l, r)] = string(r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := segFiles(t, cfg.Dir)
	if len(files) != 1 {
		t.Fatalf("%d segment files, want 1", len(files))
	}
	return want, files[0]
}

// checkCut checks that warns holds exactly one warning, a cut of file
// that dropped dropped bytes.
func checkCut(t *testing.T, warns *warnings, file string, dropped int64) {
	t.Helper()
	w := warns.take()
	if len(w) != 1 {
		t.Fatalf("%d warnings, want 1: %v", len(w), w)
	}
	if w[0]["msg"] != "qlog: cut a damaged segment" || w[0]["file"] != file || w[0]["dropped_bytes"] != dropped {
		t.Errorf("warning %v, want a cut of %s dropping %d bytes", w[0], file, dropped)
	}
}

func TestLog_Open_tornTail(t *testing.T) {
	cfg, warns := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	want, file := fillOne(t, cfg, 30, 100)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// Cut the last record in its middle, as a crash during its write.
	frame := int64(dataFrameSize(100))
	if err := os.Truncate(file, fi.Size()-frame/2); err != nil {
		t.Fatal(err)
	}
	delete(want, 30)

	l, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
	checkCut(t, warns, file, frame-frame/2)

	// The log goes on from the cut, and the cut is not warned of again.
	r := rec(99, 100)
	if seq := mustAppend(t, l, r); seq != 30 {
		t.Errorf("seq after the cut: %d, want 30", seq)
	}
	want[30] = string(r)
	_, got = reopen(t, l, cfg, false)
	checkReplay(t, got, want)
	if w := warns.take(); len(w) != 0 {
		t.Errorf("warnings at the second open: %v", w)
	}
}

func TestLog_Open_garbageTail(t *testing.T) {
	cfg, warns := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	want, file := fillOne(t, cfg, 30, 100)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite the last 100 bytes: the last record (109 bytes) is
	// damaged, its first 9 bytes (its frame header and type) are not.
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 100)
	for i := range garbage {
		garbage[i] = byte(i*7 + 1)
	}
	if _, err := f.WriteAt(garbage, fi.Size()-100); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	delete(want, 30)

	l, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
	checkCut(t, warns, file, int64(dataFrameSize(100)))
	if fi2, err := os.Stat(file); err != nil || fi2.Size() != fi.Size()-int64(dataFrameSize(100)) {
		t.Errorf("after the cut the file has %d bytes (%v), want %d", fi2.Size(), err, fi.Size()-int64(dataFrameSize(100)))
	}
	mustAppend(t, l, rec(1, 10))
}

// fillSegments appends 100 records of 100 bytes to a new log and closes
// it; it returns the records by seq and the segment files, 3 or more.
func fillSegments(t *testing.T, cfg Config) (map[uint64]string, []string) {
	t.Helper()
	l, _ := openLog(t, cfg, hooks{})
	want := map[uint64]string{}
	for i := range 100 {
		r := rec(i, 100)
		want[mustAppend(t, l, r)] = string(r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := segFiles(t, cfg.Dir)
	if len(files) < 3 {
		t.Fatalf("%d segments, want 3 or more", len(files))
	}
	return want, files
}

func TestLog_Open_damagedSealedSegment(t *testing.T) {
	cfg, warns := testConfig(t)
	want, files := fillSegments(t, cfg)
	// Flip a byte of the first segment's fifth record: the segment is cut
	// there, the others replay whole.
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	frame := dataFrameSize(100)
	off := headerSize + 4*frame
	b[off+20] ^= 0xff
	if err := os.WriteFile(files[0], b, 0o640); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(5); seq <= uint64((len(b)-headerSize)/frame); seq++ {
		delete(want, seq)
	}

	_, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
	checkCut(t, warns, files[0], int64(len(b)-off))
}

func TestLog_Open_damagedHeader(t *testing.T) {
	cfg, warns := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	_, file := fillOne(t, cfg, 3, 100)
	if err := os.WriteFile(file, []byte("garbage"), 0o640); err != nil {
		t.Fatal(err)
	}
	l, got := openLog(t, cfg, hooks{})
	if len(got) != 0 {
		t.Errorf("replayed %d records of a segment without a header", len(got))
	}
	w := warns.take()
	if len(w) != 1 || w[0]["msg"] != "qlog: deleted a damaged segment" || w[0]["file"] != file {
		t.Errorf("warnings %v, want one deletion of %s", w, file)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("damaged segment still there: %v", err)
	}
	mustAppend(t, l, rec(1, 10))
}

// eioFile fails every read that reaches past off with EIO while armed,
// as a disk with a bad sector there.
type eioFile struct {
	segFile
	armed *atomic.Bool
	off   int64
}

func (f *eioFile) ReadAt(b []byte, off int64) (int, error) {
	if f.armed.Load() && off+int64(len(b)) > f.off {
		return 0, &os.PathError{Op: "read", Path: "eio", Err: syscall.EIO}
	}
	return f.segFile.ReadAt(b, off)
}

// TestLog_Open_readErrorIsNoDamage: a read that fails while Open scans a
// segment, of a frame or of the header, fails the open and leaves the
// file as it was, with no warning of damage: once the disk reads again,
// every record is there.
func TestLog_Open_readErrorIsNoDamage(t *testing.T) {
	for _, at := range []int64{0, 2000} { // the header; a frame in the middle
		cfg, warns := testConfig(t)
		cfg.SegmentBytes = 1 << 20
		want, file := fillOne(t, cfg, 30, 100)
		before, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		var armed atomic.Bool
		armed.Store(true)
		eio := hooks{openFile: func(path string, flag int) (segFile, error) {
			f, err := openOSFile(path, flag)
			if err != nil {
				return nil, err
			}
			return &eioFile{segFile: f, armed: &armed, off: at}, nil
		}}
		_, err = open(cfg, func(uint64, []byte, *Region) error { return nil }, true, eio)
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("read error at %d: open got %v, want EIO", at, err)
		}
		after, err := os.Stat(file)
		if err != nil || after.Size() != before.Size() {
			t.Fatalf("read error at %d: the segment went from %d bytes to %v, %v; want it untouched", at, before.Size(), after, err)
		}
		if w := warns.take(); len(w) != 0 {
			t.Errorf("read error at %d: warned of damage: %v", at, w)
		}
		armed.Store(false)
		_, got := openLog(t, cfg, hooks{})
		checkReplay(t, got, want)
	}
}

// TestOpen_syncsWhatItReads: a process killed during a compaction commit,
// after the moved copies were written and before their fsync, leaves them
// in the page cache only. Open counts them as the live copies and the
// writer deletes the originals' segment: unless Open fsyncs what it read,
// a machine crash then loses both.
func TestOpen_syncsWhatItReads(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.PreallocBytes = -1
	l, _ := openLog(t, cfg, hooks{})
	keep := rec(0, 100)
	keepSeq := mustAppend(t, l, keep)
	var drop []uint64
	for i := 1; len(segFiles(t, cfg.Dir)) < 6; i++ {
		drop = append(drop, mustAppend(t, l, rec(i, 100)))
	}
	first := segFiles(t, cfg.Dir)[0]
	saved, err := os.ReadFile(first) // sealed and fsynced
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(drop...); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 5*time.Second, "the kept record moved and its segment deleted", func() bool {
		_, err := os.Stat(first)
		return os.IsNotExist(err) && l.Stats().Moved > 0
	})
	l.crashOnClose.Store(true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// As a kill after the moved copy was written, before its fsync and
	// the original's deletion.
	if err := os.WriteFile(first, saved, 0o640); err != nil {
		t.Fatal(err)
	}
	fl := &faults{}
	_, got := openLog(t, cfg, fl.hooks())
	if n := fl.syncs.Load(); n == 0 {
		t.Fatal("Open read the moved copy of a record and fsynced nothing: the writer deletes the original next")
	}
	checkReplay(t, got, map[uint64]string{keepSeq: string(keep)})
}

// TestLog_Open_missingSegment: a segment file gone from between two that
// are there (fsck moved it to lost+found, an operator removed it) loses
// its records; Open says so, naming the next file and the seqs missing,
// as it says of every other loss, and replays the rest.
func TestLog_Open_missingSegment(t *testing.T) {
	cfg, warns := testConfig(t)
	want, files := fillSegments(t, cfg)
	first, gone := segmentSeqs(t, files[1])
	if err := os.Remove(files[1]); err != nil {
		t.Fatal(err)
	}
	for seq := first; seq < first+gone; seq++ {
		delete(want, seq)
	}

	_, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
	w := warns.take()
	if len(w) != 1 || w[0]["msg"] != "qlog: records missing before a segment (a segment file gone, or one cut at an earlier start)" || w[0]["file"] != files[2] ||
		w[0]["first_missing_seq"] != first || w[0]["missing"] != gone {
		t.Errorf("warnings %v, want one of %d records missing from seq %d before %s", w, gone, first, files[2])
	}
}

// segmentSeqs returns the first seq of a closed segment file, from its
// header, and how many data records it holds of 100 bytes each.
func segmentSeqs(t *testing.T, file string) (first, n uint64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	h := readHeader(t, file)
	return h.base, uint64((len(b) - int(h.size)) / dataFrameSize(100))
}

// readHeader returns what the header of segment file says.
func readHeader(t *testing.T, file string) header {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseHeader(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return h
}
