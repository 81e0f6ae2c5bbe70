package qlog

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// churn appends and releases records of 100 bytes, collecting garbage
// as it goes so that deleted segments' mappings end, until the log has
// written reuse segments over spare files (or fails the test after
// 5,000 records or 10 s). It returns the next record's index.
func churn(t *testing.T, l *Log, from int, reuse uint64) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := from; ; i++ {
		if l.Stats().Reused >= reuse {
			return i
		}
		if i-from == 5000 || time.Now().After(deadline) {
			t.Fatalf("%d segments written over spare files after %d records, want %d", l.Stats().Reused, i-from, reuse)
		}
		if err := l.Release(mustAppend(t, l, rec(i, 100))); err != nil {
			t.Fatal(err)
		}
		if i%8 == 0 {
			runtime.GC()
		}
	}
}

// noWarnings fails the test if the log warned.
func noWarnings(t *testing.T, warns *warnings) {
	t.Helper()
	if w := warns.take(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
}

// withSpare churns l until a segment was written over a spare file and
// another spare file is kept.
func withSpare(t *testing.T, l *Log) {
	t.Helper()
	churn(t, l, 0, 1)
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Spares == 0 { // another segment deleted after the reuse
		if time.Now().After(deadline) {
			t.Fatal("no spare file after churning")
		}
		if err := l.Release(mustAppend(t, l, rec(0, 100))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLog_reusedFile_crash writes a head over a full spare segment,
// crashes and reopens: the older segment's frames that follow the head's
// records are not replayed and are not taken for damage, and the head
// is cut to its records.
func TestLog_reusedFile_crash(t *testing.T) {
	cfg, warns := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	next := churn(t, l, 0, 3)
	want := map[uint64]string{}
	for i := next; i < next+5; i++ {
		want[mustAppend(t, l, rec(i, 100))] = string(rec(i, 100))
	}
	files := segFiles(t, cfg.Dir)
	head := files[len(files)-1]
	if !readHeader(t, head).reused {
		t.Fatalf("head %s: not written over a spare file", head)
	}
	end := l.Size() // the head's records end here; the sealed segments are cut to theirs
	for _, f := range files[:len(files)-1] {
		end -= fileSize(t, f)
	}
	if size := fileSize(t, head); size < end+int64(dataFrameSize(100)) {
		t.Fatalf("head %s holds %d bytes, its records end at %d: no older frames follow them", head, size, end)
	}

	l, got := reopen(t, l, cfg, true)
	checkReplay(t, got, want)
	noWarnings(t, warns)
	if size := fileSize(t, head); size != end {
		t.Errorf("head holds %d bytes after the open, want its records' %d", size, end)
	}
	seq := mustAppend(t, l, rec(next+5, 100))
	want[seq] = string(rec(next+5, 100))
	_, got = reopen(t, l, cfg, false)
	checkReplay(t, got, want)
}

// TestLog_spareKeptWhileMapped holds a view of a released record while
// its segment is deleted and the log rolls on: the file is not written
// over while the view can read it.
func TestLog_spareKeptWhileMapped(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	first := segFiles(t, cfg.Dir)[0]
	held := mustAppendMapped(t, l, rec(-1, 100))[0]
	if err := l.Release(held.seq); err != nil {
		t.Fatal(err)
	}
	churn(t, l, 0, 4)
	if got := string(held.view); got != held.want {
		t.Errorf("held view reads %q, want %q", got, held.want)
	}
	spareFile := strings.TrimSuffix(first, segExt) + spareExt
	if _, err := os.Stat(spareFile); err != nil {
		t.Errorf("the held segment's file is not a spare any more: %v", err)
	}
	runtime.KeepAlive(held.r)
}

// TestLog_Open_version1 reads a segment of format version 1, as chutes
// before reused files wrote it (unsalted frames, a 24-byte header), and
// appends after it.
func TestLog_Open_version1(t *testing.T) {
	cfg, warns := testConfig(t)
	b := append([]byte(segMagic), binary.LittleEndian.AppendUint64(nil, 1)...)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli()))
	for i := range 3 {
		b = appendFrame(b, 0, typeData, nil, rec(i, 100))
	}
	b = appendReleases(b, 0, []uint64{2})
	if err := os.WriteFile(filepath.Join(cfg.Dir, segName(1)), b, 0o640); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{1: string(rec(0, 100)), 3: string(rec(2, 100))}
	l, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
	want[mustAppend(t, l, rec(3, 100))] = string(rec(3, 100))
	_, got = reopen(t, l, cfg, false)
	checkReplay(t, got, want)
	noWarnings(t, warns)
}

// TestLog_Open_laterVersion: a segment of a format this chute does not
// know (a later one's) fails the open and is left as it is.
func TestLog_Open_laterVersion(t *testing.T) {
	cfg, _ := testConfig(t)
	b := appendHeader(nil, 1, 1, false)
	binary.LittleEndian.PutUint32(b[16:], segVersion+1)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli()))
	b = appendFrame(b, 1, typeData, nil, rec(0, 100))
	path := filepath.Join(cfg.Dir, segName(1))
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
	l, err := Open(cfg, nil)
	if err == nil {
		_ = l.Close()
		t.Fatal("open of a later format's segment: no error")
	}
	if !strings.Contains(err.Error(), "format version") {
		t.Errorf("open: %v, want the version named", err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(b) {
		t.Errorf("segment changed by the failed open (%v)", err)
	}
}

// TestLog_quotaDropsSpares: spare files count against the quota, and an
// append that would pass it deletes them before it is refused.
func TestLog_quotaDropsSpares(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.QuotaBytes = 64 << 10 // segments of 4 KiB (testConfig)
	l, _ := openLog(t, cfg, hooks{})
	withSpare(t, l)
	for i := range 2000 {
		_, err := l.Append(t.Context(), rec(i, 100))
		if errors.Is(err, ErrNoSpace) {
			st := l.Stats()
			if st.Spares != 0 {
				t.Errorf("refused with %d bytes of spare files kept", st.Spares)
			}
			if room := cfg.QuotaBytes - st.Size; room >= int64(dataFrameSize(100)) {
				t.Errorf("refused with %d bytes of the quota left", room)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if st := l.Stats(); st.Size+st.Spares > cfg.QuotaBytes {
			t.Fatalf("segments %d + spares %d bytes: past the quota of %d", st.Size, st.Spares, cfg.QuotaBytes)
		}
	}
	t.Fatal("2000 live records fit under a 64 KiB quota")
}

// TestLog_reusedFile_olderFramesAligned writes a head over a spare whose
// frames lie exactly where the head's next ones would: after a crash
// they must not check out as the head's (each segment's frames are
// salted with its own number).
func TestLog_reusedFile_olderFramesAligned(t *testing.T) {
	cfg, warns := testConfig(t) // segments of 4 KiB: 37 frames of 109 bytes
	l, _ := openLog(t, cfg, hooks{})
	batch := func(from, n int) [][]byte {
		var recs [][]byte
		for i := range n {
			recs = append(recs, rec(from+i, 100))
		}
		return recs
	}
	want := map[uint64]string{}
	keep := func(first uint64, recs [][]byte) {
		for i, r := range recs {
			want[first+uint64(i)] = string(r)
		}
	}
	// Segment 1: 30 frames in a row, all released.
	a := mustAppend(t, l, batch(0, 30)...)
	for seq := a; seq < a+30; seq++ {
		if err := l.Release(seq); err != nil {
			t.Fatal(err)
		}
	}
	// Segment 2: 36 kept, with the releases; segment 1 becomes a spare.
	b := batch(100, 36)
	keep(mustAppend(t, l, b...), b)
	for range 5 { // its mapping ends
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	// Segment 3, over segment 1's file: 5 frames where its first 5
	// were, its 6th to 30th right after them.
	c := batch(200, 5)
	keep(mustAppend(t, l, c...), c)
	if st := l.Stats(); st.Reused != 1 || st.Segments != 2 {
		t.Fatalf("stats %+v: want segment 1's file reused by the third, the first deleted", st)
	}
	_, got := reopen(t, l, cfg, true)
	checkReplay(t, got, want)
	noWarnings(t, warns)
}

// TestLog_fullDiskDropsSpares: a write that finds the disk full deletes
// the spare files, so that the next append may fit.
func TestLog_fullDiskDropsSpares(t *testing.T) {
	cfg, _ := testConfig(t)
	fl := &faults{}
	l, _ := openLog(t, cfg, fl.hooks())
	withSpare(t, l)
	fl.full.Store(true)
	if _, err := l.Append(t.Context(), rec(0, 100)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append on a full disk: %v, want ErrNoSpace", err)
	}
	if st := l.Stats(); st.Spares != 0 {
		t.Errorf("after a write found the disk full: %d bytes of spare files kept", st.Spares)
	}
	if n, err := filepath.Glob(filepath.Join(cfg.Dir, "*"+spareExt)); err != nil || len(n) != 0 {
		t.Errorf("spare files left: %v (%v)", n, err)
	}
	fl.full.Store(false)
	mustAppend(t, l, rec(1, 100))
}

// TestLog_reopenKeepsHeldView: a log closed and opened again in one
// process must not write over a file the first log's mapping still
// reads (a view is valid while its Region is reachable, after Close
// too): Open deletes the spare files it finds, and only segments a log
// made itself become its spares.
func TestLog_reopenKeepsHeldView(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	held := mustAppendMapped(t, l, rec(-1, 100))[0]
	if err := l.Release(held.seq); err != nil {
		t.Fatal(err)
	}
	churn(t, l, 0, 2)
	if _, err := os.Stat(filepath.Join(cfg.Dir, strings.TrimSuffix(segName(1), segExt)+spareExt)); err != nil {
		t.Fatalf("segment 1 not kept as a spare: %v", err)
	}
	// And one in the head, which the next log recovers.
	head := mustAppendMapped(t, l, rec(-2, 100))[0]
	if err := l.Release(head.seq); err != nil {
		t.Fatal(err)
	}
	l, _ = reopen(t, l, cfg, false)
	churn(t, l, 100000, 4)
	for _, m := range []mapped{held, head} {
		if got := string(m.view); got != m.want {
			t.Errorf("held view reads %q after the log was opened again, want %q", got, m.want)
		}
	}
	runtime.KeepAlive(held.r)
	runtime.KeepAlive(head.r)
}

// stallFile holds the writer right after it fsynced a spare's new
// header, before the rename to the new segment's name.
type stallFile struct {
	segFile
	path    string
	once    *sync.Once
	stalled chan struct{}
	release chan struct{}
}

func (f *stallFile) Sync() error {
	err := f.segFile.Sync()
	if strings.HasSuffix(f.path, spareExt) {
		f.once.Do(func() { close(f.stalled) })
		<-f.release
	}
	return err
}

// TestLog_Open_spareRenameLost: a crash that lost the renaming of a
// deleted segment to its spare name (its directory fsync failed, which
// is only warned of) after the next segment's header was written over
// the file leaves that header under the old segment's name. Open must
// take it for the spare it is, not cut the segment and, with it, every
// later one as out of order.
func TestLog_Open_spareRenameLost(t *testing.T) {
	cfg, _ := testConfig(t)
	stalled, release := make(chan struct{}), make(chan struct{})
	once := &sync.Once{}
	h := hooks{openFile: func(path string, flag int) (segFile, error) {
		f, err := openOSFile(path, flag)
		if err != nil {
			return nil, err
		}
		return &stallFile{segFile: f, path: path, once: once, stalled: stalled, release: release}, nil
	}}
	l, _ := openLog(t, cfg, h)
	for i := 0; l.Stats().Segments < 2; i++ { // segment 1, all released
		if err := l.Release(mustAppend(t, l, rec(i, 100))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	acked := map[uint64]string{}
	done := make(chan struct{})
	go func() { // live records until the writer stalls at the reuse
		defer close(done)
		for i := 1000; i < 100_000; i++ {
			seq, err := l.Append(context.Background(), rec(i, 100))
			if err != nil {
				return
			}
			mu.Lock()
			acked[seq] = string(rec(i, 100))
			mu.Unlock()
			if i%4 == 0 {
				runtime.GC()
			}
		}
	}()
	select {
	case <-stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("no segment written over a spare file in 20s")
	}
	// The disk as the crash leaves it: the spare under its old name.
	crash := t.TempDir()
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(cfg.Dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name, _ := strings.CutSuffix(e.Name(), spareExt)
		if name != e.Name() {
			name += segExt
		}
		if err := os.WriteFile(filepath.Join(crash, name), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	want := maps.Clone(acked)
	mu.Unlock()
	close(release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	<-done

	ccfg, warns := testConfig(t)
	ccfg.Dir = crash
	_, got := openLog(t, ccfg, hooks{})
	checkReplay(t, got, want)
	noWarnings(t, warns)
}

// TestLog_Open_rottedVersion: a header whose version field rotted is
// damage (its CRC says so), deleted with a warning, not a later
// chute's format that fails every open.
func TestLog_Open_rottedVersion(t *testing.T) {
	cfg, warns := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	for i := range 80 { // two segments and more
		mustAppend(t, l, rec(i, 100))
	}
	l.crashOnClose.Store(true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	first := segFiles(t, cfg.Dir)[0]
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[16:], 0)
	if err := os.WriteFile(first, b, 0o640); err != nil {
		t.Fatal(err)
	}
	openLog(t, cfg, hooks{})
	if w := warns.take(); len(w) != 1 || w[0]["msg"] != "qlog: deleted a damaged segment" {
		t.Errorf("warnings %v, want the damaged segment deleted", w)
	}
}
