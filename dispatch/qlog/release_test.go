package qlog

import (
	"math/rand/v2"
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

// A few records that stay unreleased while many others come and go must
// not pin the segments: compaction moves them to the head, and every one
// of them replays with its seq.
func TestLog_compaction_keepsUnreleased(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	want := map[uint64]string{}
	const n = 3000
	maxSize := int64(0)
	for i := range n {
		r := rec(i, 60+i%100)
		seq := mustAppend(t, l, r)
		if i%97 == 0 {
			want[seq] = string(r) // long-lived
		} else if err := l.Release(seq); err != nil {
			t.Fatal(err)
		}
		maxSize = max(maxSize, l.Size())
	}
	// 31 live records of about 120 bytes: well under a segment. The log
	// must have stayed within its bound (a few segments), not grown to
	// the 3000 records' 400 KiB.
	if maxSize > 8*cfg.SegmentBytes {
		t.Errorf("log grew to %d bytes with %d live records", maxSize, len(want))
	}
	s := l.Stats()
	if s.Moved == 0 || s.Deleted == 0 {
		t.Errorf("stats %+v: want records moved and segments deleted", s)
	}
	l, got := reopen(t, l, cfg, false)
	checkReplay(t, got, want)

	// Moved records release like any other, also after a reopen.
	for seq := range want {
		if seq%2 == 1 {
			if err := l.Release(seq); err != nil {
				t.Fatal(err)
			}
			delete(want, seq)
		}
	}
	_, got = reopen(t, l, cfg, false)
	checkReplay(t, got, want)
}

// TestLog_model runs random appends, releases and reopens (clean and as
// a crash) against a model: after a crash every unreleased record must
// replay, and a released one may; after a clean close exactly the
// unreleased ones replay. A tenth of the records live long, so that
// compaction moves them, some more than once.
func TestLog_model(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("", func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			cfg, _ := testConfig(t)
			l, _ := openLog(t, cfg, hooks{})
			live := map[uint64]string{}     // unreleased
			released := map[uint64]string{} // released since the last clean reopen
			var moved, deleted uint64
			deadline := time.Now().Add(10 * time.Second)
			for step := 0; step < 3000 && time.Now().Before(deadline); step++ {
				switch op := rng.IntN(1000); {
				case op < 550:
					k := 1 + rng.IntN(4)
					var recs [][]byte
					for j := range k {
						recs = append(recs, rec(step*8+j, 20+rng.IntN(200)))
					}
					seq := mustAppend(t, l, recs...)
					for j, r := range recs {
						live[seq+uint64(j)] = string(r)
					}
				case op < 990:
					var seqs []uint64
					for seq, r := range live {
						if seq%10 != 0 && rng.IntN(3) == 0 || rng.IntN(100) == 0 {
							seqs = append(seqs, seq)
							released[seq] = r
							delete(live, seq)
						}
					}
					if err := l.Release(seqs...); err != nil {
						t.Fatal(err)
					}
				default:
					crash := rng.IntN(2) == 0
					s := l.Stats()
					moved, deleted = moved+s.Moved, deleted+s.Deleted
					var got []replayed
					l, got = reopen(t, l, cfg, crash)
					if !crash {
						checkReplay(t, got, live)
						clear(released)
						break
					}
					seen := map[uint64]bool{}
					for _, r := range got {
						seen[r.seq] = true
						if _, ok := live[r.seq]; ok {
							continue
						}
						// A release not yet written when it crashed.
						if w, ok := released[r.seq]; !ok || w != r.rec {
							t.Fatalf("crash replay: seq %d %q, neither live nor released", r.seq, r.rec)
						}
						live[r.seq] = r.rec
					}
					for seq := range live {
						if !seen[seq] {
							t.Fatalf("crash replay lost unreleased record %d", seq)
						}
					}
					clear(released)
				}
				if t.Failed() {
					return
				}
			}
			s := l.Stats()
			moved, deleted = moved+s.Moved, deleted+s.Deleted
			if moved == 0 || deleted == 0 {
				t.Errorf("%d records moved, %d segments deleted: the test does not exercise compaction", moved, deleted)
			}
			t.Logf("%d records live, %d moved, %d segments deleted", len(live), moved, deleted)
			_, got := reopen(t, l, cfg, false)
			checkReplay(t, got, live)
		})
	}
}
