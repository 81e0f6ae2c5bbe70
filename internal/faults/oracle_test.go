package faults

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func outcome(p int, n uint64, r Result, c codes.Code) Outcome {
	at := time.Unix(1000, 0)
	return Outcome{ID: ID(p, n), Producer: p, Result: r, Code: c, Start: at, End: at}
}

func TestID_split(t *testing.T) {
	for _, tc := range []struct {
		p int
		n uint64
	}{{0, 0}, {1, 0}, {3, 17}, {1<<31 - 1, 1<<32 - 1}} {
		id := ID(tc.p, tc.n)
		if p, n := SplitID(id); p != tc.p || n != tc.n {
			t.Errorf("SplitID(ID(%d, %d)) = %d, %d", tc.p, tc.n, p, n)
		}
	}
	if ID(1, 0) == ID(0, 1<<32) {
		t.Errorf("ID(1, 0) = ID(0, 2^32): the counter must not reach the producer bits")
	}
}

func TestJudge(t *testing.T) {
	acked := func(n uint64) Outcome { return outcome(1, n, Acked, codes.OK) }
	for _, tc := range []struct {
		name     string
		log      Log
		found    map[uint64]int
		want     Verdict
		pass     []int  // maxLost, maxDuplicates Check accepts; nil: none
		fail     []int  // maxLost, maxDuplicates Check refuses; nil: none
		failWith string // part of Check's error with fail
	}{
		{
			name:  "all acked once",
			log:   Log{acked(0), acked(1), acked(2)},
			found: map[uint64]int{ID(1, 0): 1, ID(1, 1): 1, ID(1, 2): 1},
			want:  Verdict{Puts: 3, Acked: 3, Rows: 3, IDs: 3},
			pass:  []int{0, 0},
		},
		{
			name:  "acked row absent is lost",
			log:   Log{acked(0), acked(1), acked(2)},
			found: map[uint64]int{ID(1, 0): 1, ID(1, 2): 1},
			want:  Verdict{Puts: 3, Acked: 3, Rows: 2, IDs: 2, Lost: []uint64{ID(1, 1)}},
			pass:  []int{1, 0}, fail: []int{0, 0}, failWith: "lost 1 acknowledged ids, want at most 0: [1-1]",
		},
		{
			name:  "a row twice is one extra copy",
			log:   Log{acked(0), acked(1)},
			found: map[uint64]int{ID(1, 0): 2, ID(1, 1): 1},
			want:  Verdict{Puts: 2, Acked: 2, Rows: 3, IDs: 2, Duplicated: []uint64{ID(1, 0)}, Extra: 1},
			pass:  []int{0, 1}, fail: []int{0, 0}, failWith: "1 extra copies of 1 ids, want at most 0: [1-0]",
		},
		{
			name: "failed and timed out puts that landed are indeterminate",
			log: Log{acked(0), outcome(1, 1, Failed, codes.Unavailable), outcome(1, 2, TimedOut, codes.DeadlineExceeded),
				outcome(1, 3, Failed, codes.Unavailable)},
			found: map[uint64]int{ID(1, 0): 1, ID(1, 1): 1, ID(1, 2): 1},
			want:  Verdict{Puts: 4, Acked: 1, Failed: 2, TimedOut: 1, Rows: 3, IDs: 3, Indeterminate: 2},
			pass:  []int{0, 0},
		},
		{
			name:  "a refused put that landed always fails",
			log:   Log{acked(0), outcome(1, 1, Failed, codes.ResourceExhausted)},
			found: map[uint64]int{ID(1, 0): 1, ID(1, 1): 1},
			want:  Verdict{Puts: 2, Acked: 1, Failed: 1, Rows: 2, IDs: 2, Indeterminate: 1, RefusedLanded: []uint64{ID(1, 1)}},
			fail:  []int{5, 5}, failWith: "1 puts refused with InvalidArgument or ResourceExhausted landed anyway: [1-1]",
		},
		{
			name:  "an id never put always fails",
			log:   Log{acked(0)},
			found: map[uint64]int{ID(1, 0): 1, ID(7, 7): 1, ID(1, 9): 0},
			want:  Verdict{Puts: 1, Acked: 1, Rows: 1, IDs: 1, Unknown: []uint64{ID(7, 7)}},
			fail:  []int{5, 5}, failWith: "1 ids in the table were never put: [7-7]",
		},
		{
			name:  "the last outcome of an id counts",
			log:   Log{outcome(1, 0, TimedOut, codes.DeadlineExceeded), acked(0)},
			found: map[uint64]int{},
			want:  Verdict{Puts: 1, Acked: 1, Lost: []uint64{ID(1, 0)}},
			pass:  []int{1, 0}, fail: []int{0, 0}, failWith: "lost 1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Judge(tc.log, tc.found)
			if !equalVerdicts(got, tc.want) {
				t.Errorf("Judge: got %+v, want %+v", got, tc.want)
			}
			if tc.pass != nil {
				if err := got.Check(tc.pass[0], tc.pass[1]); err != nil {
					t.Errorf("Check(%d, %d): got %v, want nil", tc.pass[0], tc.pass[1], err)
				}
			}
			if tc.fail != nil {
				err := got.Check(tc.fail[0], tc.fail[1])
				if err == nil || !strings.Contains(err.Error(), tc.failWith) {
					t.Errorf("Check(%d, %d): got %v, want an error with %q", tc.fail[0], tc.fail[1], err, tc.failWith)
				}
			}
		})
	}
}

func equalVerdicts(a, b Verdict) bool {
	return a.Puts == b.Puts && a.Acked == b.Acked && a.Failed == b.Failed && a.TimedOut == b.TimedOut &&
		a.Rows == b.Rows && a.IDs == b.IDs && a.Extra == b.Extra && a.Indeterminate == b.Indeterminate &&
		slices.Equal(a.Lost, b.Lost) && slices.Equal(a.Duplicated, b.Duplicated) &&
		slices.Equal(a.RefusedLanded, b.RefusedLanded) && slices.Equal(a.Unknown, b.Unknown)
}

func TestVerdict_Check_negativeBoundsAreNone(t *testing.T) {
	v := Judge(Log{outcome(0, 0, Acked, codes.OK), outcome(0, 1, Acked, codes.OK)}, map[uint64]int{ID(0, 1): 3})
	if err := v.Check(-1, -1); err != nil {
		t.Errorf("Check(-1, -1) of %v: got %v, want nil", v, err)
	}
}

func TestLog_AckedOverlapping(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(n uint64, r Result, from, to int) Outcome {
		return Outcome{ID: ID(0, n), Result: r, Start: base.Add(time.Duration(from) * time.Second), End: base.Add(time.Duration(to) * time.Second)}
	}
	log := Log{
		at(0, Acked, 0, 1),    // ended before the window
		at(1, Acked, 1, 3),    // answered in it
		at(2, Acked, 3, 4),    // sent and answered in it
		at(3, Acked, 4, 9),    // sent in it, answered after
		at(4, Acked, 6, 7),    // sent after it
		at(5, Failed, 3, 4),   // not acked
		at(6, TimedOut, 1, 9), // not acked
	}
	if got := log.AckedOverlapping(base.Add(2*time.Second), base.Add(5*time.Second)); got != 3 {
		t.Errorf("AckedOverlapping(2s, 5s): got %d, want 3", got)
	}
	if got := len(log.Between(base.Add(time.Second), base.Add(4*time.Second))); got != 4 {
		t.Errorf("Between(1s, 4s): got %d outcomes, want 4", got)
	}
	if got, want := log.Count(Acked), 5; got != want {
		t.Errorf("Count(Acked): got %d, want %d", got, want)
	}
}
