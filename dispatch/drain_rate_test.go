package dispatch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// batchClickHouse is a fake ClickHouse that records every insert (its
// start on the manager's fake clock and its rows), holds each for delay
// on that clock, and fails with a 503 (transient) the inserts whose first
// row holds a string the test names, as often as it says. The real server
// cannot be made to answer slowly or to fail one chosen batch on demand.
type batchClickHouse struct {
	clk   clockwork.Clock
	delay time.Duration

	mu       sync.Mutex
	fail     map[string]int // first-row substring: failures still to give
	inserts  []fakeInsert   // every attempt, in the order they began
	inFlight int            // attempts not answered yet
	peak     int            // most attempts in flight at once
}

type fakeInsert struct {
	start time.Time
	rows  []string
	ok    bool
}

func (f *batchClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	body := string(b)
	if strings.Contains(body, "system.settings") || strings.Contains(r.URL.Query().Get("query"), "system.settings") {
		fmt.Fprintln(w, "0") // no insert_deduplication_token
		return
	}
	rows := strings.Split(strings.TrimSpace(body), "\n")
	f.mu.Lock()
	ok := true
	for s, n := range f.fail {
		if n > 0 && strings.Contains(rows[0], s) {
			f.fail[s], ok = n-1, false
		}
	}
	i := len(f.inserts)
	f.inserts = append(f.inserts, fakeInsert{start: f.clk.Now(), rows: rows})
	f.inFlight++
	f.peak = max(f.peak, f.inFlight)
	f.mu.Unlock()
	if f.delay > 0 {
		select {
		case <-f.clk.After(f.delay):
		case <-r.Context().Done():
		}
	}
	f.mu.Lock()
	f.inFlight--
	f.inserts[i].ok = ok
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// snapshot returns the inserts so far and the most in flight at once.
func (f *batchClickHouse) snapshot() ([]fakeInsert, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.inserts), f.peak
}

// landed returns how many times each row was inserted, by its text.
func (f *batchClickHouse) landed() map[string]int {
	ins, _ := f.snapshot()
	got := make(map[string]int)
	for _, in := range ins {
		if in.ok {
			for _, r := range in.rows {
				got[r]++
			}
		}
	}
	return got
}

// startBatchNode starts a node draining into fake, on clk, with the
// settings of ch:events.
func startBatchNode(t *testing.T, fake *batchClickHouse, clk *clockwork.FakeClock, settings string) (*testNode, *clientv3.Client, context.Context) {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"}, func(c *Config) { c.Clock = clk })
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), settings); err != nil {
		t.Fatal(err)
	}
	return n, cli, ctx
}

// putIDs puts rows {"id":from} to {"id":to-1} to ch:events in one txn.
func putIDs(t *testing.T, ctx context.Context, cli *clientv3.Client, from, to int) {
	t.Helper()
	var ops []clientv3.Op
	for i := from; i < to; i++ {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:events/p/%d", i), fmt.Sprintf(`{"id":%d}`, i)))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
}

// wantLandedOnce fails unless rows {"id":0} to {"id":n-1} each landed
// exactly once, and nothing else did.
func wantLandedOnce(t *testing.T, fake *batchClickHouse, n int) {
	t.Helper()
	got := fake.landed()
	for i := range n {
		if c := got[fmt.Sprintf(`{"id":%d}`, i)]; c != 1 {
			t.Errorf("row %d landed %d times, want once", i, c)
		}
	}
	if len(got) != n {
		t.Errorf("got %d distinct rows landed, want %d", len(got), n)
	}
}

// blocked reports whether clk has at least n waiters now.
func blocked(clk *clockwork.FakeClock, n int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	return clk.BlockUntilContext(ctx, n) == nil
}

// TestDrainer_rate_steadyLoad: rows arriving steadily for 10 s (10 rows
// every 100 ms) at max_inserts_per_second 2 make at most 2×10+1 inserts,
// each as large as the load makes it, and every row lands once.
func TestDrainer_rate_steadyLoad(t *testing.T) {
	clk := clockwork.NewFakeClock()
	fake := &batchClickHouse{clk: clk}
	n, cli, ctx := startBatchNode(t, fake, clk, `{"max_inserts_per_second":2,"batch_interval":"50ms"}`)
	t0 := clk.Now()
	const steps, perStep = 100, 10
	for s := range steps {
		putIDs(t, ctx, cli, s*perStep, (s+1)*perStep)
		// The drainer inserts them at once, or waits for its rate.
		waitFor(t, "the drainer to insert or wait", func() bool {
			return n.depth("ch:events") == 0 || blocked(clk, managerTickers+1)
		})
		clk.Advance(100 * time.Millisecond)
	}
	end := clk.Now()
	for range 10 { // what is left goes within one gap
		waitFor(t, "the drainer to insert or wait", func() bool {
			return n.depth("ch:events") == 0 || blocked(clk, managerTickers+1)
		})
		clk.Advance(100 * time.Millisecond)
	}
	waitFor(t, "every row to land", func() bool { return n.depth("ch:events") == 0 })
	wantLandedOnce(t, fake, steps*perStep)
	ins, _ := fake.snapshot()
	during := 0
	for _, in := range ins {
		if !in.start.After(end) {
			during++
		}
	}
	if want := 2*int(end.Sub(t0)/time.Second) + 1; during > want {
		t.Errorf("got %d inserts in %v, want at most %d", during, end.Sub(t0), want)
	}
	if during < 15 {
		t.Errorf("got %d inserts in %v, want about 20: the load keeps the queue busy", during, end.Sub(t0))
	}
}

// TestDrainer_rate_idleGoesAtOnce: a put on an idle queue is inserted
// at once, not after the insert rate's gap (2 s at 0.5 per second); a put
// just after it waits for the gap; a put after a quiet spell longer than
// the gap goes at once again.
func TestDrainer_rate_idleGoesAtOnce(t *testing.T) {
	clk := clockwork.NewFakeClock()
	fake := &batchClickHouse{clk: clk}
	n, cli, ctx := startBatchNode(t, fake, clk, `{"max_inserts_per_second":0.5,"batch_interval":"50ms"}`)
	began := func(want ...time.Duration) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d inserts", len(want)), func() bool {
			ins, _ := fake.snapshot()
			return len(ins) >= len(want)
		})
		ins, _ := fake.snapshot()
		var got []time.Duration
		for _, in := range ins {
			got = append(got, in.start.Sub(ins[0].start))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("inserts began at %v, want %v", got, want)
		}
	}
	t0 := clk.Now()
	putIDs(t, ctx, cli, 0, 1)
	began(0)
	if ins, _ := fake.snapshot(); ins[0].start != t0 {
		t.Fatalf("the lone put was inserted %v after it, want at once", ins[0].start.Sub(t0))
	}
	waitFor(t, "the first row to land", func() bool { return n.depth("ch:events") == 0 })
	clk.Advance(100 * time.Millisecond)
	putIDs(t, ctx, cli, 1, 2)
	waitFor(t, "the drainer to wait for its rate", func() bool { return blocked(clk, managerTickers+1) })
	clk.Advance(1899 * time.Millisecond)
	waitFor(t, "the drainer to wait for its rate", func() bool { return blocked(clk, managerTickers+1) })
	began(0)
	clk.Advance(time.Millisecond)
	began(0, 2*time.Second)
	waitFor(t, "the second row to land", func() bool { return n.depth("ch:events") == 0 })

	clk.Advance(5 * time.Second) // quiet: the queue is idle again
	putIDs(t, ctx, cli, 2, 3)
	began(0, 2*time.Second, 7*time.Second)
	waitFor(t, "every row to land", func() bool { return n.depth("ch:events") == 0 })
	wantLandedOnce(t, fake, 3)
}

// TestDrainer_rate_fullBatchesNotHeld: batches that reach batch_rows go
// one batch_interval after the previous start, whatever the insert rate
// (one per 10 s here); the rest, not full, waits for the rate.
func TestDrainer_rate_fullBatchesNotHeld(t *testing.T) {
	const ms = time.Millisecond
	clk := clockwork.NewFakeClock()
	fake := &batchClickHouse{clk: clk}
	n, cli, ctx := startBatchNode(t, fake, clk, `{"max_inserts_per_second":0.1,"batch_interval":"50ms","batch_rows":10}`)
	putIDs(t, ctx, cli, 0, 1)
	waitFor(t, "the first row to land", func() bool { return n.depth("ch:events") == 0 })
	putIDs(t, ctx, cli, 1, 26)
	step := func(d time.Duration, inserts int) {
		t.Helper()
		waitFor(t, "the drainer to wait", func() bool { return blocked(clk, managerTickers+1) })
		clk.Advance(d)
		waitFor(t, fmt.Sprintf("%d inserts", inserts), func() bool {
			ins, _ := fake.snapshot()
			return len(ins) == inserts
		})
	}
	step(50*ms, 2)
	step(50*ms, 3)
	step(10*time.Second-ms, 3) // the last 5 rows are not a full batch
	step(ms, 4)
	waitFor(t, "every row to land", func() bool { return n.depth("ch:events") == 0 })
	ins, _ := fake.snapshot()
	var got []string
	for _, in := range ins {
		got = append(got, fmt.Sprintf("%d rows at %v", len(in.rows), in.start.Sub(ins[0].start)))
	}
	want := []string{"1 rows at 0s", "10 rows at 50ms", "10 rows at 100ms", "5 rows at 10.1s"}
	if !slices.Equal(got, want) {
		t.Errorf("inserts: got %v, want %v", got, want)
	}
	wantLandedOnce(t, fake, 26)
}
