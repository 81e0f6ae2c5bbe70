package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
	"chute/sink"
)

// slowClickHouse is a fake ClickHouse whose inserts take as long on the
// manager's fake clock as the test says, and which records when each
// began on that clock: slow answers are what the real server cannot be
// made to give on demand.
type slowClickHouse struct {
	clk    clockwork.Clock
	mu     sync.Mutex
	delays []time.Duration // of the inserts in turn; zero past the end
	starts []time.Time
	rows   int
}

func (s *slowClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(r.URL.Query().Get("query"), "system.settings") || strings.Contains(string(body), "system.settings") {
		fmt.Fprintln(w, "0") // no insert_deduplication_token
		return
	}
	s.mu.Lock()
	var delay time.Duration
	if n := len(s.starts); n < len(s.delays) {
		delay = s.delays[n]
	}
	s.starts = append(s.starts, s.clk.Now())
	s.rows += strings.Count(string(body), "\n") + 1
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-s.clk.After(delay):
		case <-r.Context().Done():
		}
	}
}

func (s *slowClickHouse) inserts() ([]time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.starts...), s.rows
}

// TestDrainer_intervalFromStartToStart checks that the batch interval runs
// from one insert's start to the next's, on the manager's clock: with
// inserts of 150 ms and an interval of 200 ms, inserts start 200 ms apart,
// not 350 (the interval after the end of the last insert) and not before;
// an insert slower than the interval is followed at once. Every row lands.
// One insert at a time, and an insert rate the interval is below.
func TestDrainer_intervalFromStartToStart(t *testing.T) {
	const ms = time.Millisecond
	clk := clockwork.NewFakeClock()
	fake := &slowClickHouse{clk: clk, delays: []time.Duration{150 * ms, 150 * ms, 250 * ms}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"}, func(c *Config) { c.Clock = clk })
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), `{"batch_interval":"200ms","max_inserts_per_second":1000,"max_inflight_inserts":1}`); err != nil {
		t.Fatal(err)
	}
	put := 0
	putRows := func(k int) {
		t.Helper()
		for range k {
			if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", put), fmt.Sprintf(`{"id":%d}`, put)); err != nil {
				t.Fatal(err)
			}
			put++
		}
	}
	// Besides the manager's tickers, one waiter on the clock: an insert
	// in flight or the drainer waiting out the interval.
	busy := func(what string) {
		t.Helper()
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := clk.BlockUntilContext(bctx, managerTickers+1); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	began := func(want ...time.Duration) {
		t.Helper()
		starts, _ := fake.inserts()
		var got []time.Duration
		for _, s := range starts {
			got = append(got, s.Sub(starts[0]))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("inserts began at %v, want %v", got, want)
		}
	}

	putRows(1)
	busy("the first insert")
	putRows(4) // while it is in flight
	clk.Advance(150 * ms)
	busy("the drainer to wait out the interval's rest")
	clk.Advance(49 * ms)
	began(0)
	clk.Advance(1 * ms)
	busy("the second insert")
	began(0, 200*ms)

	putRows(5)
	clk.Advance(150 * ms)
	busy("the interval's rest")
	clk.Advance(50 * ms)
	busy("the third insert")
	began(0, 200*ms, 400*ms)

	putRows(5)
	clk.Advance(250 * ms) // longer than the interval: no wait after it
	waitUntil(t, 10*time.Second, "every row to be inserted", func() bool {
		_, rows := fake.inserts()
		return rows == put
	})
	began(0, 200*ms, 400*ms, 650*ms)
}

// failingClickHouse refuses the first inserts with a 503 (transient),
// takes the rest, and counts them.
type failingClickHouse struct {
	mu       sync.Mutex
	fail     int // inserts still to refuse
	attempts int
	rows     int
}

func (f *failingClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(string(body), "system.settings") {
		fmt.Fprintln(w, "0")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.fail > 0 {
		f.fail--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	f.rows += strings.Count(string(body), "\n") + 1
}

func (f *failingClickHouse) counts() (attempts, rows int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts, f.rows
}

func (f *failingClickHouse) failNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = n
}

// TestDrainer_retryBackoff checks the drainer's retries on the manager's
// clock: a failed insert is retried without a put to wake it, after a
// pause of [d/2, d] for steps d of 50, 100, 200 ms (RetryMin 50 ms),
// never earlier; and a success starts the next failure from RetryMin.
// The insert rate is high enough not to hold the second row back.
func TestDrainer_retryBackoff(t *testing.T) {
	const ms = time.Millisecond
	clk := clockwork.NewFakeClock()
	fake := &failingClickHouse{fail: 3}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"}, func(c *Config) { c.Clock = clk })
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), `{"batch_interval":"0s","max_inserts_per_second":1000}`); err != nil {
		t.Fatal(err)
	}
	retrying := func(wantAttempts int) {
		t.Helper()
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := clk.BlockUntilContext(bctx, managerTickers+1); err != nil {
			t.Fatalf("waiting for the drainer to pause: %v", err)
		}
		if got, _ := fake.counts(); got != wantAttempts {
			t.Fatalf("%d attempts, want %d", got, wantAttempts)
		}
	}
	if _, err := cli.Put(ctx, "/q/ch:events/p/a", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	retrying(1)
	for i, step := range []time.Duration{50 * ms, 100 * ms, 200 * ms} {
		clk.Advance(step/2 - ms) // the shortest pause of the step is not over
		retrying(i + 1)
		clk.Advance(step/2 + ms)
		if i < 2 {
			retrying(i + 2)
		}
	}
	waitFor(t, "the row to land after three failures", func() bool {
		attempts, rows := fake.counts()
		return attempts == 4 && rows == 1
	})

	fake.failNext(1)
	if _, err := cli.Put(ctx, "/q/ch:events/p/b", `{"id":2}`); err != nil {
		t.Fatal(err)
	}
	retrying(5)
	clk.Advance(50 * ms) // the longest pause of the first step again
	waitFor(t, "the second row after one failure", func() bool {
		attempts, rows := fake.counts()
		return attempts == 6 && rows == 2
	})
}

// pickyClickHouse is a fake ClickHouse that is down (503) until told
// otherwise, then refuses with a data error (code 27) every insert that
// holds a row with "bad" in it and takes the others: a refusal whose
// timing the test chooses.
type pickyClickHouse struct {
	mu      sync.Mutex
	up      bool
	rows    []string
	refused int // inserts refused with code 27
}

// insertBody reads the body of a request to a fake ClickHouse, and
// answers the question whether it knows insert_deduplication_token
// (knowsToken) when that is what it is: ok is then false.
func insertBody(w http.ResponseWriter, r *http.Request, knowsToken bool) (body string, ok bool) {
	b, _ := io.ReadAll(r.Body)
	if strings.Contains(string(b), "system.settings") {
		if knowsToken {
			fmt.Fprintln(w, "1")
		} else {
			fmt.Fprintln(w, "0")
		}
		return "", false
	}
	return string(b), true
}

func (f *pickyClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := insertBody(w, r, false)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.up:
		w.WriteHeader(http.StatusServiceUnavailable)
	case strings.Contains(body, "bad"):
		f.refused++
		w.Header().Set("X-ClickHouse-Exception-Code", "27")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintln(w, "Code: 27, e.displayText() = DB::Exception: Cannot parse input")
	case strings.TrimSpace(body) != "": // an insert with no row stores nothing
		f.rows = append(f.rows, strings.Split(strings.TrimSpace(body), "\n")...)
	}
}

func (f *pickyClickHouse) setUp() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up = true
}

func (f *pickyClickHouse) counts() (inserted, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rows), f.refused
}

// TestDrainer_deadLetterWaitsForSpace: a row ClickHouse refuses while a
// NOSPACE alarm is raised cannot be stored as a dead letter (the alarm
// refuses the put); it stays queued, nothing is dropped, and once the
// alarm is disarmed it becomes a dead letter.
func TestDrainer_deadLetterWaitsForSpace(t *testing.T) {
	fake := &pickyClickHouse{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	for i, v := range []string{`{"id":1}`, `{"id":2,"s":"bad"}`, `{"id":3}`} {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.kv.RaiseNoSpace(ctx); err != nil {
		t.Fatal(err)
	}
	fake.setUp()
	// One bisection refuses the bad row three times (the batch, its half,
	// the row); a fifth refusal is a second try.
	waitUntil(t, 10*time.Second, "the good rows inserted and the bad row tried again, or dropped", func() bool {
		inserted, refused := fake.counts()
		return inserted == 2 && (refused >= 5 || n.mgr.dropped.Load() > 0)
	})
	if d := n.depth("ch:events"); d != 1 {
		t.Fatalf("depth with the dead letter refused by NOSPACE: %d, want the refused row kept", d)
	}
	if got := n.mgr.dropped.Load(); got != 0 {
		t.Fatalf("%d rows dropped under NOSPACE, want 0", got)
	}

	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: 7, Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the queue to empty", func() bool { return n.depth("ch:events") == 0 })
	letters, err := cli.Get(ctx, "/q/ch:events/dlq/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(letters.Kvs) != 1 || !strings.Contains(string(letters.Kvs[0].Value), "bad") {
		t.Fatalf("dead letters after disarm: %v, want the refused row", letters.Kvs)
	}
	if got := n.mgr.dropped.Load(); got != 0 {
		t.Fatalf("%d rows dropped, want 0", got)
	}
}

// TestSpares_keptClearedAndBounded: a batch's slices are kept for the
// next batches cleared of their messages and values, at most
// maxSpareBufs of each, and a values slice is taken only if it holds the
// batch.
func TestSpares_keptClearedAndBounded(t *testing.T) {
	var rs spares[row]
	var vs spares[[]byte]
	for range maxSpareBufs + 2 {
		rs.keep([]row{{seq: 1, m: &message{}}})
		vs.keep([][]byte{[]byte("v")})
	}
	rs.keep(nil) // nothing to keep
	if len(rs.kept) != maxSpareBufs || len(vs.kept) != maxSpareBufs {
		t.Fatalf("kept %d rows and %d values slices, want %d of each", len(rs.kept), len(vs.kept), maxSpareBufs)
	}
	rows := rs.take(0)
	if len(rows) != 0 || cap(rows) != 1 || rows[:1][0].m != nil {
		t.Errorf("a kept rows slice: len %d, cap %d, first %+v; want empty, cap 1, cleared", len(rows), cap(rows), rows[:1][0])
	}
	if v := vs.take(1); len(v) != 0 || cap(v) != 1 || v[:1][0] != nil {
		t.Errorf("a kept values slice: %q (cap %d), want empty, cap 1, cleared", v[:1], cap(v))
	}
	if v := vs.take(5); v != nil || len(vs.kept) != maxSpareBufs-1 {
		t.Errorf("values for 5 rows: cap %d, %d kept; want none taken and the kept ones left", cap(v), len(vs.kept))
	}
	for range maxSpareBufs {
		rs.take(0)
	}
	if r := rs.take(0); r != nil {
		t.Errorf("no rows slice kept: got one of cap %d, want nil", cap(r))
	}
}

// TestSink_rowsAreNotAcknowledgedByDelete: a ClickHouse queue's rows
// leave it by their insert alone. Deleting the delivery key of a queued
// row (its number is easy to guess), from a client or as a member's
// ack, is InvalidArgument and drops nothing: the row still lands.
func TestSink_rowsAreNotAcknowledgedByDelete(t *testing.T) {
	fake := &failingClickHouse{fail: 1 << 30}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, "/q/ch:events/p/a", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	for seq := range uint64(4) {
		resp, err := cli.Delete(ctx, fmt.Sprintf("/q/ch:events/%d/a", seq+1))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "acknowledged by their insert") {
			t.Fatalf("delete of delivery %d of a ClickHouse queue: got %v, %v; want InvalidArgument", seq+1, resp, err)
		}
		_, err = n.mgr.PeerService().Ack(ctx, &peerpb.AckRequest{Queue: "ch:events", Seq: seq + 1, Tail: "a"})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a member's ack of delivery %d of a ClickHouse queue: got %v; want InvalidArgument", seq+1, err)
		}
	}
	if d := n.depth("ch:events"); d != 1 {
		t.Fatalf("depth after the deletes: got %d, want the row still queued", d)
	}
	fake.failNext(0)
	waitFor(t, "the row to land", func() bool { _, rows := fake.counts(); return rows == 1 })
}

// dedupClickHouse is a fake ClickHouse of a version that knows
// insert_deduplication_token (18.16 does not), in front of a table that
// deduplicates blocks, as a Replicated*MergeTree does: by the token when
// an insert has one, by the block's bytes otherwise. It refuses a block
// holding "n":11 as a constraint would, naming no row.
type dedupClickHouse struct {
	mu     sync.Mutex
	seen   map[string]bool
	stored int
}

func (f *dedupClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := insertBody(w, r, true)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Contains(body, `"n":11`) {
		w.Header().Set("X-ClickHouse-Exception-Code", "469")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintln(w, "Code: 469. DB::Exception: Constraint `c` for table default.t is violated at row 1. Expression: (n < 10)")
		return
	}
	rows := strings.TrimSpace(body)
	if rows == "" {
		return
	}
	key := r.URL.Query().Get("insert_deduplication_token")
	if key == "" {
		key = "hash:" + rows
	}
	if !f.seen[key] {
		f.seen[key] = true
		f.stored += len(strings.Split(rows, "\n"))
	}
}

// TestDrainer_bisectPartsCarryTokens: a batch of equal rows and one a
// constraint refuses (naming no row) is bisected. Its parts went without
// a deduplication token, so a deduplicating table took two parts of equal
// rows for one block and dropped the second, counted inserted.
func TestDrainer_bisectPartsCarryTokens(t *testing.T) {
	fake := &dedupClickHouse{seen: map[string]bool{}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	ops := make([]clientv3.Op, 0, 9)
	for i := range 8 {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:t/p/%d", i), `{"event":"click","n":1}`))
	}
	ops = append(ops, clientv3.OpPut("/q/ch:t/p/bad", `{"event":"click","n":11}`))
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil { // one batch
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the queue to empty", func() bool { return n.depth("ch:t") == 0 })
	fake.mu.Lock()
	stored := fake.stored
	fake.mu.Unlock()
	if stored != 8 {
		t.Fatalf("the table holds %d of the 8 good rows", stored)
	}
}

// rolledBackClickHouse is a fake ClickHouse that knows
// insert_deduplication_token until rolled back to a version that does
// not (18.16 is one), at the same address.
type rolledBackClickHouse struct {
	mu     sync.Mutex
	old    bool
	stored int
}

func (f *rolledBackClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, ok := insertBody(w, r, !f.old)
	if !ok {
		return
	}
	if f.old && r.URL.Query().Has("insert_deduplication_token") {
		w.Header().Set("X-ClickHouse-Exception-Code", "115")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, "Code: 115, e.displayText() = DB::Exception: Unknown setting insert_deduplication_token")
		return
	}
	if rows := strings.TrimSpace(body); rows != "" {
		f.stored += len(strings.Split(rows, "\n"))
	}
}

// TestDrainer_tokenSupportAskedAgain: a server that knew the dedup token
// is replaced at its address by one that does not (a rollback). The
// answer was remembered for good, and every batch refused as a config
// error: the queue stalled until the node restarted.
func TestDrainer_tokenSupportAskedAgain(t *testing.T) {
	fake := &rolledBackClickHouse{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, "/q/ch:t/p/1", `{"n":1}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the first row in", func() bool { return n.depth("ch:t") == 0 })
	fake.mu.Lock()
	fake.old = true
	fake.mu.Unlock()
	if _, err := cli.Put(ctx, "/q/ch:t/p/2", `{"n":2}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the row put after the rollback in", func() bool { return n.depth("ch:t") == 0 })
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.stored != 2 {
		t.Fatalf("stored %d rows, want 2", fake.stored)
	}
}

// TestDrainer_timed: a timed-out request doubles the queue's insert
// timeout, up to maxTimeoutFactor times Config.InsertTimeout; an answer
// in under a quarter of a grown timeout halves it, never below the
// config's; an error that is no timeout changes nothing. A request that
// ran with a shorter timeout than the queue's now (one in flight beside
// the one that doubled it) doubles nothing.
func TestDrainer_timed(t *testing.T) {
	const base = time.Second
	d := &drainer{m: &Manager{cfg: Config{InsertTimeout: base}, log: slog.New(slog.DiscardHandler)}, q: &queue{name: "ch:t"}}
	timedOut := sink.Result{Class: sink.ClassTransient, Err: fmt.Errorf("x: %w", sink.ErrTimeout)}
	ok := func(took time.Duration) sink.Result { return sink.Result{Class: sink.ClassOK, Duration: took} }
	steps := []struct {
		res  sink.Result
		want time.Duration
		ran  time.Duration // the request's own timeout; 0: the queue's then
	}{
		{ok(10 * time.Millisecond), base, 0},
		{sink.Result{Class: sink.ClassTransient, Err: errors.New("connection refused")}, base, 0},
		{timedOut, 2 * base, 0},
		{timedOut, 4 * base, 0},
		{timedOut, 4 * base, 2 * base},             // in flight beside the last one
		{ok(1500 * time.Millisecond), 4 * base, 0}, // not under a quarter
		{timedOut, 8 * base, 0},
		{timedOut, 8 * base, 0}, // at most maxTimeoutFactor times
		{ok(time.Second), 4 * base, 0},
		{ok(time.Second / 2), 2 * base, 0},
		{ok(time.Millisecond), base, 0},
		{ok(time.Millisecond), base, 0},
	}
	for i, s := range steps {
		ran := s.ran
		if ran == 0 {
			ran = d.insertTimeout()
		}
		d.timed("`d`.`t`", sink.Endpoint{}, s.res, ran)
		if got := d.insertTimeout(); got != s.want {
			t.Fatalf("step %d: timeout %v, want %v", i, got, s.want)
		}
	}
}
