package bench

import (
	"testing"
	"time"
)

func TestRowLatencies(t *testing.T) {
	start := time.Unix(1000, 0)
	ms := time.Millisecond
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// Table 0: calls answered at 5, 6 and 9 ms (listed out of order), of
	// 2, 1 and 3 rows; table 1: one call of 4 rows.
	acks := []ack{
		{sent: 7 * ms, done: 9 * ms, table: 0, rows: 3},
		{sent: 1 * ms, done: 5 * ms, table: 0, rows: 2},
		{sent: 2 * ms, done: 6 * ms, table: 0, rows: 1},
		{sent: 3 * ms, done: 4 * ms, table: 1, rows: 4},
	}
	polls := []rowPoll{
		{at: at(10 * ms), counts: []int64{2, 0}}, // the first call's rows
		{at: at(20 * ms), counts: []int64{4, 4}}, // the second's, and one of the third's
		{at: at(30 * ms), counts: []int64{6, 4}},
	}
	got := rowLatencies(start, acks, polls, 2)
	want := []weighted{
		{9 * ms, 2},  // table 0, sent at 1, in at 10
		{18 * ms, 1}, // sent at 2, in at 20
		{23 * ms, 3}, // sent at 7, in at 30: all three rows needed
		{17 * ms, 4}, // table 1, sent at 3, in at 20
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("latency %d: got %v, want %v", i, got[i], want[i])
		}
	}
	// Rows no poll holds are left out.
	if got := rowLatencies(start, acks, polls[:1], 2); len(got) != 1 || got[0] != (weighted{9 * ms, 2}) {
		t.Errorf("one poll: got %v, want only the first call's rows", got)
	}
}

func TestCovers(t *testing.T) {
	if !covers([]int64{3, 5}, []int64{3, 4}) || covers([]int64{3, 3}, []int64{3, 4}) {
		t.Errorf("covers: wrong answer")
	}
}
