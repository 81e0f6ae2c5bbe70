package qlog

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ringExpected reports whether this kernel should give a ring: Linux 5.12
// or later (native workers) with io_uring enabled for everyone. Where it
// should not, the tests check that the log does without one instead.
func ringExpected(t *testing.T) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatalf("uname: %v", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("kernel release %q", release)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		t.Fatalf("kernel release %q", release)
	}
	if major < 5 || major == 5 && minor < 12 {
		t.Logf("kernel %s: before 5.12, no ring expected", release)
		return false
	}
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Logf("kernel.io_uring_disabled = %s: no ring expected", strings.TrimSpace(string(b)))
		return false
	}
	return true
}

// TestRing_writeSync: a ring writes at the offset asked and fsyncs, and
// answers a write the file refuses with the write's error, as WriteAt
// would, and stays usable.
func TestRing_writeSync(t *testing.T) {
	r, err := newRing()
	if !ringExpected(t) {
		if err == nil {
			r.close()
			t.Fatal("newRing worked where it was not expected to: ringExpected is wrong")
		}
		return
	}
	if err != nil {
		t.Fatalf("newRing on a kernel that has io_uring: %v", err)
	}
	defer r.close()

	path := filepath.Join(t.TempDir(), "f")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, c := range []struct {
		buf  string
		off  int64
		sync bool
	}{{"hello", 0, true}, {"WORLD", 10, false}, {"xy", 3, true}} {
		done, err := r.writeSync(f, []byte(c.buf), c.off, c.sync)
		if !done || err != nil {
			t.Fatalf("write %d: done %v, err %v", i, done, err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "helxy\x00\x00\x00\x00\x00WORLD"; string(got) != want {
		t.Fatalf("file holds %q, want %q", got, want)
	}

	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	done, err := r.writeSync(ro, []byte("no"), 0, true)
	var pe *os.PathError
	if !done || !errors.As(err, &pe) || pe.Op != "write" || !errors.Is(err, unix.EBADF) {
		t.Fatalf("write to a read-only file: done %v, err %v; want the write's EBADF", done, err)
	}
	if r.broken {
		t.Fatal("a refused write broke the ring")
	}
	if done, err := r.writeSync(f, []byte("!"), 0, true); !done || err != nil {
		t.Fatalf("write after a refused one: done %v, err %v", done, err)
	}
}

// TestLog_ioUring: a log writes through a ring where the kernel has one
// and without where Config.NoIOUring says so; both keep what they
// acknowledged across a crash.
func TestLog_ioUring(t *testing.T) {
	expected := ringExpected(t)
	for _, off := range []bool{false, true} {
		t.Run("NoIOUring="+strconv.FormatBool(off), func(t *testing.T) {
			cfg, _ := testConfig(t)
			cfg.NoIOUring = off
			l, _ := openLog(t, cfg, hooks{})
			if has, want := l.w.ring != nil, expected && !off; has != want {
				t.Fatalf("log has a ring: %v, want %v", has, want)
			}
			for i := range 40 { // rolls segments: 4 KiB each
				mustAppend(t, l, rec(i, 300))
			}
			_, got := reopen(t, l, cfg, true)
			if len(got) != 40 || got[39].rec != string(rec(39, 300)) {
				t.Fatalf("replayed %d records after a crash, want 40", len(got))
			}
		})
	}
}

// TestLog_ioUringBroken: a ring that fails to take an operation is left
// for good, with a warning, and the append is written without it.
func TestLog_ioUringBroken(t *testing.T) {
	if !ringExpected(t) {
		t.Log("no ring here: TestLog_ioUring checks the log without one")
		return
	}
	cfg, warns := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	if l.w.ring == nil {
		t.Fatal("no ring")
	}
	// Before the first append: the writer reads it after Append's wake.
	l.w.ring.broken = true
	mustAppend(t, l, rec(1, 100))
	found := false
	for _, w := range warns.take() {
		found = found || strings.Contains(w["msg"].(string), "io_uring failed")
	}
	if !found {
		t.Fatal("no warning that the ring was left")
	}
	mustAppend(t, l, rec(2, 100))
	_, got := reopen(t, l, cfg, true)
	if len(got) != 2 || got[1].rec != string(rec(2, 100)) {
		t.Fatalf("replayed %v, want both records", got)
	}
}
