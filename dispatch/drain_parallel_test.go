package dispatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// parallelSettings: two batches of at most 5 rows in flight, neither the
// interval nor the rate holding them back.
const parallelSettings = `{"max_inflight_inserts":2,"max_inserts_per_second":1000,"batch_interval":"0s","batch_rows":5}`

// startTwoInFlight puts 10 rows and waits until two batches of 5 are in
// the fake ClickHouse at once (each waits a second on the fake clock).
func startTwoInFlight(t *testing.T, fake *batchClickHouse, clk *clockwork.FakeClock) *testNode {
	t.Helper()
	n, cli, ctx := startBatchNode(t, fake, clk, parallelSettings)
	putIDs(t, ctx, cli, 0, 10)
	waitFor(t, "two inserts in flight", func() bool { return blocked(clk, managerTickers+2) })
	ins, peak := fake.snapshot()
	if len(ins) != 2 || peak != 2 {
		t.Fatalf("got %d inserts begun, %d in flight at once, want 2 and 2", len(ins), peak)
	}
	for i, in := range ins {
		if len(in.rows) != 5 {
			t.Fatalf("insert %d: got %d rows, want 5", i, len(in.rows))
		}
	}
	return n
}

// TestDrainer_parallel_twoInFlight: with max_inflight_inserts 2, two
// batches of one queue are in ClickHouse at once, disjoint, each in put
// order; every row lands once and no third batch starts meanwhile.
func TestDrainer_parallel_twoInFlight(t *testing.T) {
	clk := clockwork.NewFakeClock()
	fake := &batchClickHouse{clk: clk, delay: time.Second}
	n := startTwoInFlight(t, fake, clk)
	ins, _ := fake.snapshot()
	seen := map[string]bool{}
	for _, in := range ins {
		for j, r := range in.rows {
			if seen[r] {
				t.Errorf("row %s in two batches in flight", r)
			}
			seen[r] = true
			if j > 0 && r < in.rows[j-1] { // single digits: text order is id order
				t.Errorf("batch %v not in put order", in.rows)
			}
		}
	}
	clk.Advance(time.Second)
	waitFor(t, "every row to land", func() bool { return n.depth("ch:events") == 0 })
	wantLandedOnce(t, fake, 10)
	if ins, peak := fake.snapshot(); len(ins) != 2 || peak != 2 {
		t.Errorf("got %d inserts, %d at once, want 2 and 2", len(ins), peak)
	}
}

// TestDrainer_parallel_retryOnlyFailed: of two batches in flight, the one
// that fails (503) is retried after its backoff, alone, with the same
// rows; the other is not sent again.
func TestDrainer_parallel_retryOnlyFailed(t *testing.T) {
	clk := clockwork.NewFakeClock()
	fake := &batchClickHouse{clk: clk, delay: time.Second, fail: map[string]int{`{"id":5}`: 1}}
	n := startTwoInFlight(t, fake, clk)
	clk.Advance(time.Second) // both answered: one ok, one 503
	waitFor(t, "the failed batch to wait for its backoff", func() bool {
		ins, _ := fake.snapshot()
		return n.depth("ch:events") == 5 && len(ins) == 2 && blocked(clk, managerTickers+1)
	})
	clk.Advance(50 * time.Millisecond) // RetryMin: the longest first pause
	waitFor(t, "the retry in flight", func() bool { return blocked(clk, managerTickers+1) && len(fake.landed()) == 5 })
	clk.Advance(time.Second)
	waitFor(t, "every row to land", func() bool { return n.depth("ch:events") == 0 })
	wantLandedOnce(t, fake, 10)
	ins, _ := fake.snapshot()
	var got []string
	for _, in := range ins {
		got = append(got, fmt.Sprintf("%s..%s ok=%v", in.rows[0], in.rows[len(in.rows)-1], in.ok))
	}
	want := fmt.Sprint([]string{`{"id":0}..{"id":4} ok=true`, `{"id":5}..{"id":9} ok=false`, `{"id":5}..{"id":9} ok=true`})
	if len(got) != 3 || fmt.Sprint(got[2:]) != fmt.Sprint([]string{`{"id":5}..{"id":9} ok=true`}) ||
		!(fmt.Sprint(got[:2]) == fmt.Sprint([]string{`{"id":0}..{"id":4} ok=true`, `{"id":5}..{"id":9} ok=false`}) ||
			fmt.Sprint(got[:2]) == fmt.Sprint([]string{`{"id":5}..{"id":9} ok=false`, `{"id":0}..{"id":4} ok=true`})) {
		t.Errorf("inserts: got %v, want %v (the first two in either order)", got, want)
	}
}

// TestDrainer_parallel_stopWaitsForBoth: stopDrainer returns only once
// both batches in flight are answered and settled, so their rows are
// never handed over while ClickHouse takes them.
func TestDrainer_parallel_stopWaitsForBoth(t *testing.T) {
	clk := clockwork.NewFakeClock()
	fake := &batchClickHouse{clk: clk, delay: time.Second}
	n := startTwoInFlight(t, fake, clk)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n.mgr.stopDrainer("ch:events")
	}()
	select {
	case <-stopped:
		t.Fatal("stopDrainer returned with two inserts in flight")
	case <-time.After(200 * time.Millisecond): // it waits, on a clock nobody advances
	}
	clk.Advance(time.Second)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stopDrainer did not return once both inserts were answered")
	}
	wantLandedOnce(t, fake, 10)
	if d := n.depth("ch:events"); d != 0 {
		t.Errorf("got %d rows queued after stopDrainer, want 0: both batches settled", d)
	}
}

// TestDrainer_parallel_stopDuringRetry: a batch waiting to be retried
// does not hold stopDrainer up: its rows stay queued, unsent, for the
// next drainer, which inserts them once.
func TestDrainer_parallel_stopDuringRetry(t *testing.T) {
	clk := clockwork.NewFakeClock()
	fake := &batchClickHouse{clk: clk, delay: time.Second, fail: map[string]int{`{"id":5}`: 1}}
	n := startTwoInFlight(t, fake, clk)
	clk.Advance(time.Second) // both answered: one ok, one 503
	waitFor(t, "the failed batch to wait for its backoff", func() bool {
		return n.depth("ch:events") == 5 && blocked(clk, managerTickers+1)
	})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n.mgr.stopDrainer("ch:events")
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stopDrainer waited for a batch's backoff")
	}
	if d := n.depth("ch:events"); d != 5 {
		t.Fatalf("got %d rows queued after stopDrainer, want the failed batch's 5", d)
	}
	n.mgr.ensureDrainer(n.mgr.lookup("ch:events")) // as the next put or reconcile round would
	waitFor(t, "the rows to go in a new batch", func() bool { return blocked(clk, managerTickers+1) })
	clk.Advance(time.Second)
	waitFor(t, "every row to land", func() bool { return n.depth("ch:events") == 0 })
	wantLandedOnce(t, fake, 10)
}
