package qlog

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// mapped is a record AppendMapped or OpenMapped handed out, as the log's
// users keep it: the view and its region.
type mapped struct {
	seq  uint64
	want string
	view []byte
	r    *Region
}

// mustAppendMapped appends recs with AppendMapped and returns them as
// mapped records, failing the test unless every one was mapped.
func mustAppendMapped(t *testing.T, l *Log, recs ...[]byte) []mapped {
	t.Helper()
	first, views, r, err := l.AppendMapped(context.Background(), recs, nil)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if r == nil || len(views) != len(recs) {
		t.Fatalf("append: region %v, %d views, want a region and %d", r, len(views), len(recs))
	}
	out := make([]mapped, len(recs))
	for i, rec := range recs {
		if views[i] == nil {
			t.Fatalf("append: record %d not mapped", i)
		}
		out[i] = mapped{seq: first + uint64(i), want: string(rec), view: views[i], r: r}
	}
	return out
}

// checkMapped fails the test unless each record's view reads its bytes.
func checkMapped(t *testing.T, recs []mapped) {
	t.Helper()
	for _, m := range recs {
		if got := string(m.view); got != m.want {
			t.Errorf("record %d reads %q, want %q", m.seq, got, m.want)
		}
	}
}

func TestLog_AppendMapped_views(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	var recs []mapped
	for i := range 100 { // about 16 KiB: four segments
		recs = append(recs, mustAppendMapped(t, l, rec(2*i, 40+i), rec(2*i+1, 100))...)
	}
	checkMapped(t, recs)
	if n := len(segFiles(t, cfg.Dir)); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	for i, m := range recs {
		if i > 0 && m.seq != recs[i-1].seq+1 {
			t.Errorf("record %d has seq %d, want %d", i, m.seq, recs[i-1].seq+1)
		}
		if cap(m.view) != len(m.view) {
			t.Errorf("record %d: view capacity %d, want its length %d", m.seq, cap(m.view), len(m.view))
		}
	}
	// Views go after what dst holds.
	dst := [][]byte{[]byte("before")}
	_, views, _, err := l.AppendMapped(context.Background(), [][]byte{rec(500, 60), rec(501, 70)}, dst)
	if err != nil || len(views) != 3 || string(views[0]) != "before" || string(views[1]) != string(rec(500, 60)) || string(views[2]) != string(rec(501, 70)) {
		t.Errorf("append after dst: views %q, err %v; want dst's then the two records'", views, err)
	}
	// Plain Append hands out nothing mapped and keeps its seqs in order.
	if seq := mustAppend(t, l, rec(999, 50)); seq != recs[len(recs)-1].seq+3 {
		t.Errorf("append after mapped: seq %d, want %d", seq, recs[len(recs)-1].seq+3)
	}
}

// TestLog_AppendMapped_outlivesSegment keeps the views of records whose
// segments compaction moved and deleted, and of released ones: they must
// read the same bytes, and the log replays the live ones from where
// compaction put them.
func TestLog_AppendMapped_outlivesSegment(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	first := segFiles(t, cfg.Dir)[0]
	var kept []mapped
	want := map[uint64]string{}
	for i := range 3000 {
		m := mustAppendMapped(t, l, rec(i, 60+i%100))[0]
		switch {
		case i%97 == 0: // long-lived: compaction moves it
			want[m.seq] = m.want
			kept = append(kept, m)
		case i%10 == 0: // released, its view still held
			kept = append(kept, m)
			fallthrough
		default:
			if err := l.Release(m.seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s := l.Stats(); s.Moved == 0 || s.Deleted == 0 {
		t.Fatalf("stats %+v: want records moved and segments deleted", s)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("first segment %s: %v, want it deleted", first, err)
	}
	runtime.GC() // mappings held only by the views must survive it
	runtime.GC()
	checkMapped(t, kept)
	if !kept[0].r.Deleted() {
		t.Errorf("the region of deleted %s: Deleted() false, want true", first)
	}
	last := mustAppendMapped(t, l, rec(1, 50))[0]
	if last.r.Deleted() {
		t.Errorf("the head's region: Deleted() true, want false")
	}
	want[last.seq] = last.want

	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, want)
	checkMapped(t, kept) // a closed log's views stay readable too
}

// TestLog_OpenMapped_views replays through the mappings and reads the
// views after the log is closed.
func TestLog_OpenMapped_views(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	want := map[string]bool{}
	for i := range 200 {
		r := rec(i, 50+i%30)
		seq := mustAppend(t, l, r)
		if i%3 == 0 {
			want[string(r)] = true
		} else if err := l.Release(seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got []mapped
	l, err := OpenMapped(cfg, func(seq uint64, rec []byte, r *Region) error {
		if r == nil {
			t.Errorf("record %d replayed unmapped", seq)
			rec = append([]byte(nil), rec...)
		}
		got = append(got, mapped{seq: seq, want: string(rec), view: rec, r: r})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if len(got) != len(want) {
		t.Errorf("replayed %d records, want %d", len(got), len(want))
	}
	for _, m := range got {
		if !want[string(m.view)] || string(m.view) != m.want {
			t.Errorf("record %d reads %q after close, want %q", m.seq, m.view, m.want)
		}
	}
}

// TestRegion_unmappedOnceUnreachable checks that the mapping of a
// deleted segment ends once nothing holds its region: the log must not
// keep deleted files' disk space for good.
func TestRegion_unmappedOnceUnreachable(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no /proc/self/maps")
	}
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	first := segFiles(t, cfg.Dir)[0]
	// Deleted, it is renamed a spare: the mapping names the file as it
	// is now.
	number := strings.TrimSuffix(first, segExt)
	for i := range 200 { // about 20 KiB: the first segment is sealed
		m := mustAppendMapped(t, l, rec(i, 100))[0]
		if err := l.Release(m.seq); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(readMaps(t), number) {
		t.Fatalf("%s not mapped while records of it are held", first)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		if _, err := os.Stat(first); os.IsNotExist(err) && !strings.Contains(readMaps(t), number) {
			return
		}
		if i == 1000 || time.Now().After(deadline) {
			t.Fatalf("%s still mapped or present after %d collections", first, i)
		}
		mustAppend(t, l, rec(i, 10)) // wakes the writer, which deletes it
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func readMaps(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLog_AppendMapped_residentBounded reads every record's view right
// after its append, as a drainer reads the values it inserts: the pages
// it maps must leave the process's resident memory as the log goes on,
// not stay until their segment's mapping ends.
func TestLog_AppendMapped_residentBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status")
	}
	cfg, _ := testConfig(t)
	cfg.SegmentBytes, cfg.NoSync = DefaultSegmentBytes, true
	l, _ := openLog(t, cfg, hooks{})
	const total = 4 * dropEvery
	before := rssFile(t)
	batch := make([][]byte, 64)
	for written := 0; written < total; {
		for i := range batch {
			batch[i] = rec(i, 4000)
			written += len(batch[i])
		}
		_, views, _, err := l.AppendMapped(context.Background(), batch, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range views {
			if v[len(v)-1] != batch[i][len(v)-1] { // the read maps the page
				t.Fatalf("view %d reads %q, want %q", i, v[len(v)-1], batch[i][len(v)-1])
			}
		}
	}
	if n := len(segFiles(t, cfg.Dir)); n != 1 {
		t.Fatalf("%d segments, want the head alone (nothing dropped at a roll)", n)
	}
	if got := rssFile(t) - before; got > 2*dropEvery {
		t.Errorf("file-backed resident memory grew by %d bytes over %d written and read, want at most %d", got, total, 2*dropEvery)
	}
}

// rssFile returns RssFile of this process, in bytes.
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestRegion_ReadViews reads runs of mapped records by pread: the views
// it returns hold the records' bytes in the buffer given, and a run ends
// at what one read cannot cover (a record of another region or on the
// heap, one before the last, one far after it, the buffer's end).
func TestRegion_ReadViews(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	l, _ := openLog(t, cfg, hooks{})
	var recs [][]byte
	for i := range 60 {
		recs = append(recs, rec(i, 100+i))
	}
	got := mustAppendMapped(t, l, recs...)
	cfg2, _ := testConfig(t)
	l2, _ := openLog(t, cfg2, hooks{})
	other := mustAppendMapped(t, l2, rec(100, 100)) // another log's region
	r := got[0].r
	views := make([][]byte, len(got))
	for i, m := range got {
		views[i] = m.view
	}
	buf := make([]byte, 64<<10)
	read := func(buf []byte, vs ...[]byte) [][]byte {
		t.Helper()
		out := r.ReadViews(buf, vs, nil)
		for i, v := range out {
			if string(v) != string(vs[i]) {
				t.Fatalf("view %d reads %q, want %q", i, v, vs[i])
			}
			if len(v) > 0 && !slicesOverlap(v, buf) {
				t.Fatalf("view %d is not in the buffer", i)
			}
		}
		return out
	}

	if n := len(read(buf, views...)); n != len(views) {
		t.Errorf("all %d records, one after another: read %d", len(views), n)
	}
	if n := len(read(buf, views[3], views[4], views[5])); n != 3 {
		t.Errorf("three records from the middle: read %d, want 3", n)
	}
	small := buf[:len(views[0])+len(views[1])+40] // the first two and the frame between, not the third
	if n := len(read(small, views...)); n != 2 {
		t.Errorf("a buffer for two records: read %d, want 2", n)
	}
	if n := len(read(buf[:len(views[0])-1], views...)); n != 0 {
		t.Errorf("a buffer smaller than the first record: read %d, want 0", n)
	}
	if n := len(read(buf, views[5], views[4])); n != 1 {
		t.Errorf("a record before the one read: read %d records, want 1", n)
	}
	if n := len(read(buf, views[0], views[59])); n != 1 { // about 7 KiB between
		t.Errorf("a record %d bytes after the one read: read %d records, want 1", maxViewGap, n)
	}
	heap := []byte(string(views[1]))
	if n := len(read(buf, views[0], heap, views[2])); n != 1 {
		t.Errorf("a record on the heap second: read %d records, want 1", n)
	}
	if n := len(read(buf, heap, views[2])); n != 0 {
		t.Errorf("a record on the heap first: read %d records, want 0", n)
	}
	if n := len(read(buf, views[0], other[0].view)); n != 1 {
		t.Errorf("a record of another region second: read %d records, want 1", n)
	}
	if r.Contains(other[0].view) || !other[0].r.Contains(other[0].view) || (*Region)(nil).Contains(views[0]) {
		t.Errorf("Contains: a region holds its own views only")
	}
	if out := (*Region)(nil).ReadViews(buf, views, nil); len(out) != 0 {
		t.Errorf("a nil region read %d records, want 0", len(out))
	}
}

// slicesOverlap reports whether a lies within b's memory.
func slicesOverlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa >= pb && pa+uintptr(len(a)) <= pb+uintptr(len(b))
}
