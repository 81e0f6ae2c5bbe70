package qlog

import (
	"testing"
	"time"

	"chute/internal/testutil"
)

func TestLog_Release_survivesReopen(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	want := map[uint64]string{}
	for i := range 100 {
		r := rec(i, 80)
		seq := mustAppend(t, l, r)
		if i%2 == 0 {
			if err := l.Release(seq, seq); err != nil { // twice: harmless
				t.Fatal(err)
			}
			continue
		}
		want[seq] = string(r)
	}
	if err := l.Release(1_000_000); err != nil { // never appended: ignored
		t.Fatal(err)
	}
	if s := l.Stats(); s.Released != 50 || s.Live != 50 {
		t.Errorf("stats %+v, want 50 released and 50 live", s)
	}
	l, got := reopen(t, l, cfg, false)
	checkReplay(t, got, want)

	// Releases of replayed records survive the next reopen too.
	for seq := range want {
		if seq%4 == 0 {
			if err := l.Release(seq); err != nil {
				t.Fatal(err)
			}
			delete(want, seq)
		}
	}
	_, got = reopen(t, l, cfg, false)
	checkReplay(t, got, want)
}

func TestLog_Release_deletesSegments(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	var seqs []uint64
	for i := range 200 {
		seqs = append(seqs, mustAppend(t, l, rec(i, 100)))
	}
	if n := len(segFiles(t, cfg.Dir)); n < 5 {
		t.Fatalf("%d segments, want 5 or more", n)
	}
	if err := l.Release(seqs...); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, 5*time.Second, "released segments deleted", func() bool {
		return len(segFiles(t, cfg.Dir)) == 1 && l.Stats().Segments == 1
	})
	if s := l.Size(); s > cfg.SegmentBytes+1024 {
		t.Errorf("size %d with nothing live, want at most a segment", s)
	}
	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, nil)
}
