package qlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testConfig is a log in a fresh directory with 4 KiB segments, so that
// a few dozen records roll, and a logger that keeps warnings.
func testConfig(t *testing.T) (Config, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.SegmentBytes = 4 << 10
	cfg.Logger = slog.New(w)
	return cfg, w
}

// replayed is a record a replay gave.
type replayed struct {
	seq uint64
	rec string
}

// openLog opens cfg's log with h and returns what it replayed; the log is
// closed at the end of the test. It replays as OpenMapped does, so the
// tests of recovery read the records through the segments' mappings.
func openLog(t *testing.T, cfg Config, h hooks) (*Log, []replayed) {
	t.Helper()
	var got []replayed
	l, err := open(cfg, func(seq uint64, rec []byte, _ *Region) error {
		got = append(got, replayed{seq, string(rec)})
		return nil
	}, true, h)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, got
}

// reopen closes l (as a crash would, when crash is set) and opens its
// directory again.
func reopen(t *testing.T, l *Log, cfg Config, crash bool) (*Log, []replayed) {
	t.Helper()
	l.crashOnClose.Store(crash)
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return openLog(t, cfg, hooks{})
}

// rec is record i: n bytes (at least 16) that name i.
func rec(i, n int) []byte {
	b := fmt.Appendf(nil, "rec-%08d-", i)
	for len(b) < n {
		b = append(b, byte('a'+(len(b)+i)%26))
	}
	return b
}

// mustAppend appends recs and returns the first seq.
func mustAppend(t *testing.T, l *Log, recs ...[]byte) uint64 {
	t.Helper()
	seq, err := l.Append(context.Background(), recs...)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return seq
}

// checkReplay fails the test unless got is exactly want, in seq order.
func checkReplay(t *testing.T, got []replayed, want map[uint64]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("replayed %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if i > 0 && got[i-1].seq >= r.seq {
			t.Errorf("replay: seq %d after %d", r.seq, got[i-1].seq)
		}
		if w, ok := want[r.seq]; !ok {
			t.Errorf("replay: seq %d, not live", r.seq)
		} else if w != r.rec {
			t.Errorf("replay: seq %d is %q, want %q", r.seq, r.rec, w)
		}
	}
	if t.Failed() {
		var seqs []uint64
		for _, r := range got {
			seqs = append(seqs, r.seq)
		}
		t.Logf("replayed seqs: %v", seqs)
	}
}

// segFiles returns the log's segment files, oldest first.
func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segExt))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// warnings is a slog handler that keeps the records at WARN and above.
type warnings struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r.Clone())
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// take returns the warnings so far, as maps of their attributes with the
// message under "msg", and forgets them.
func (w *warnings) take() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]any
	for _, r := range w.recs {
		m := map[string]any{"msg": r.Message}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.Any()
			return true
		})
		out = append(out, m)
	}
	w.recs = nil
	return out
}

// faults wraps a log's files: it counts fsyncs, can hold them, and can
// fail writes as a full disk does.
type faults struct {
	syncs atomic.Int64
	// hold, when set, is received from before each fsync.
	hold atomic.Pointer[chan struct{}]
	// syncing gets a value (when it has room) as an fsync starts.
	syncing chan struct{}
	// full makes writes store half their bytes and fail with ENOSPC;
	// fullZeros only the writes of zeros ahead of the head; syncFull
	// fsyncs, as with delayed allocation on a full file system.
	full, fullZeros, syncFull atomic.Bool
	// writes counts the writes tried.
	writes atomic.Int64
}

// waitSync waits until an fsync starts (syncing), at most 10s.
func (f *faults) waitSync(t testing.TB) {
	t.Helper()
	select {
	case <-f.syncing:
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync started within 10s")
	}
}

func (fl *faults) hooks() hooks {
	return hooks{openFile: func(path string, flag int) (segFile, error) {
		f, err := openOSFile(path, flag)
		if err != nil {
			return nil, err
		}
		return &faultFile{segFile: f, fl: fl}, nil
	}}
}

type faultFile struct {
	segFile
	fl *faults
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	f.fl.writes.Add(1)
	if f.fl.full.Load() || f.fl.fullZeros.Load() && len(b) > 0 && !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		n, err := f.segFile.WriteAt(b[:len(b)/2], off)
		if err != nil {
			return n, err
		}
		return n, &os.PathError{Op: "write", Path: "faulty", Err: syscall.ENOSPC}
	}
	return f.segFile.WriteAt(b, off)
}

func (f *faultFile) Sync() error {
	if f.fl.syncing != nil {
		select {
		case f.fl.syncing <- struct{}{}:
		default:
		}
	}
	if h := f.fl.hold.Load(); h != nil {
		<-*h
	}
	if f.fl.syncFull.Load() {
		return &os.PathError{Op: "fsync", Path: "faulty", Err: syscall.ENOSPC}
	}
	f.fl.syncs.Add(1)
	return f.segFile.Sync()
}
