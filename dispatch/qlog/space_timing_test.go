package qlog

import (
	"testing"
	"time"

	"chute/internal/testutil"
)

// On a full disk a compaction that fails is not retried in a loop: the
// writer waits for the next append or release, and compacts once there
// is space.
func TestLog_compaction_fullDiskWaits(t *testing.T) {
	cfg, _ := testConfig(t)
	fl := &faults{}
	l, _ := openLog(t, cfg, fl.hooks())
	want := map[uint64]string{}
	var gone []uint64
	for i := range 300 {
		r := rec(i, 100)
		seq := mustAppend(t, l, r)
		if i%10 == 0 {
			want[seq] = string(r)
		} else {
			gone = append(gone, seq)
		}
	}
	fl.full.Store(true)
	if err := l.Release(gone...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the writer tries, fails, waits
	before := fl.writes.Load()
	time.Sleep(300 * time.Millisecond)
	if n := fl.writes.Load() - before; n > 0 {
		t.Errorf("%d writes tried in 300ms on a full disk with nothing to do", n)
	}

	fl.full.Store(false)
	r := rec(1000, 100)
	want[mustAppend(t, l, r)] = string(r)
	testutil.EventuallyTrue(t, 5*time.Second, "compacted", func() bool {
		return l.Size() <= 2*cfg.SegmentBytes
	})
	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, want)
}
