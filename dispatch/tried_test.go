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

	"chute/sink"
)

// triedQueue returns a ClickHouse queue holding n rows numbered 1 to n,
// all delivered to its drainer's consumer, as a hand-over brings them at
// at: heads[seq] is the rows of the tried batch row seq heads.
func triedQueue(n int, heads map[uint64]int, at time.Time) (*queue, *consumer) {
	q := newQueue("ch:t", Config{}.withDefaults().defaults())
	c := &consumer{id: "clickhouse", prefix: "q", drain: &drainer{ready: make(chan struct{}, 1)}}
	msgs := make([]incoming, n)
	for i := range msgs {
		seq := uint64(i + 1)
		msgs[i] = incoming{id: MsgID{Origin: 9, N: seq}, tail: "k", value: []byte(`{"a":1}`), seq: seq, batch: heads[seq]}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enqueueLocked(msgs, at, arrivedCopy, false)
	q.addConsumerLocked(c, at)
	return q, c
}

func seqsOf(rows []row) []uint64 {
	out := make([]uint64, len(rows))
	for i, r := range rows {
		out[i] = r.seq
	}
	return out
}

// TestDrainBatch_triedBatchFormsAgain: a batch another attempt sent
// (handed over with its first row's QueueMessage.Batch) forms again with
// its rows alone, whatever the caps; the batch before it ends at its
// first row; the batch after it starts past it; and its mark goes once
// it formed.
func TestDrainBatch_triedBatchFormsAgain(t *testing.T) {
	now := time.Unix(1000, 0)
	q, c := triedQueue(10, map[uint64]int{3: 4}, now)
	set := q.set
	set.BatchRows = 100
	var flight []*inflight
	want := [][]uint64{{1, 2}, {3, 4, 5, 6}, {7, 8, 9, 10}}
	wantFull := []bool{true, true, false}
	for i, w := range want {
		f := q.drainBatch(c, set, flight, nil, now, false)
		if got := seqsOf(f.rows); !slices.Equal(got, w) || f.full != wantFull[i] || f.wait != 0 || f.tried != (i == 1) {
			t.Fatalf("batch %d: %v (full %v, wait %v, tried %v), want %v (full %v)", i, got, f.full, f.wait, f.tried, w, wantFull[i])
		}
		if f.tried {
			q.takeTried(f.rows[0].seq) // as start does
		}
		flight = append(flight, &inflight{rows: f.rows})
	}
	if len(q.tried) != 0 {
		t.Fatalf("tried batches after they started: %v", q.tried)
	}

	// Caps below the batch's rows do not cut it.
	q, c = triedQueue(6, map[uint64]int{1: 5}, now)
	set.BatchRows, set.BatchBytes = 2, 10
	f := q.drainBatch(c, set, nil, nil, now, false)
	if got := seqsOf(f.rows); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) || !f.full {
		t.Fatalf("tried batch of 5 under caps of 2 rows: %v (full %v)", got, f.full)
	}
}

// TestDrainBatch_triedBatchWaitsForItsRows: a tried batch whose rows have
// not all come (a hand-over in chunks) forms nothing for triedWait after
// it came, then what came; at once when the member leaves (hurry).
func TestDrainBatch_triedBatchWaitsForItsRows(t *testing.T) {
	at := time.Unix(1000, 0)
	set := Config{}.withDefaults().defaults()
	q, c := triedQueue(3, map[uint64]int{1: 5}, at)
	f := q.drainBatch(c, set, nil, nil, at.Add(time.Second), false)
	if len(f.rows) != 0 || f.wait != triedWait-time.Second {
		t.Fatalf("3 of 5 rows come, a second later: %v, wait %v; want none, wait %v", seqsOf(f.rows), f.wait, triedWait-time.Second)
	}
	f = q.drainBatch(c, set, nil, nil, at.Add(time.Second), true)
	if got := seqsOf(f.rows); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("leaving: %v, want what came", got)
	}
	q, c = triedQueue(3, map[uint64]int{1: 5}, at)
	f = q.drainBatch(c, set, nil, nil, at.Add(triedWait), false)
	if got := seqsOf(f.rows); !slices.Equal(got, []uint64{1, 2, 3}) || !f.full || f.wait != 0 {
		t.Fatalf("after triedWait: %v (full %v, wait %v), want what came", got, f.full, f.wait)
	}
}

// TestQueue_triedBatchGoesWithAHandover: a batch the drainer gave up
// (markTried) goes with its first row when the queue is taken for a
// hand-over; a mark whose first row left is dropped when the rows after
// it form a batch.
func TestQueue_triedBatchGoesWithAHandover(t *testing.T) {
	now := time.Unix(1000, 0)
	q, c := triedQueue(6, nil, now)
	set := q.set
	f := q.drainBatch(c, set, nil, nil, now, false)
	q.markTried(f.rows[2:5], now, 0)
	msgs := q.takeAll()
	for _, in := range msgs {
		if want := map[uint64]int{3: 3}[in.seq]; in.batch != want {
			t.Fatalf("taken row %d: batch %d, want %d", in.seq, in.batch, want)
		}
	}
	if q.tried != nil {
		t.Fatalf("tried batches after takeAll: %v", q.tried)
	}

	q, c = triedQueue(4, map[uint64]int{1: 2}, now)
	q.mu.Lock()
	first := q.msgs.get(1)
	q.mu.Unlock()
	q.ackRows([]row{{seq: 1, m: first}}, now)
	f = q.drainBatch(c, set, nil, nil, now, false)
	if got := seqsOf(f.rows); !slices.Equal(got, []uint64{2, 3, 4}) || len(q.tried) != 0 {
		t.Fatalf("after the tried batch's first row left: %v, tried %v; want the rest as one batch, no mark", got, q.tried)
	}
}

// tokenRecorder is a fake ClickHouse that takes insert_deduplication_token
// and keeps each insert's token and body. While fail is set it keeps the
// insert and answers 503: the insert landed and its answer was lost. A
// fake because 18.16 knows no such token, and a real server cannot be
// made to lose an answer on demand.
type tokenRecorder struct {
	mu      sync.Mutex
	fail    bool
	inserts []recordedInsert
}

type recordedInsert struct{ token, body string }

func (f *tokenRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(r.URL.Query().Get("query"), "system.settings") || strings.Contains(string(body), "system.settings") {
		_, _ = io.WriteString(w, "1\n")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inserts = append(f.inserts, recordedInsert{token: r.URL.Query().Get("insert_deduplication_token"), body: string(body)})
	if f.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// startTokenRecorder starts a tokenRecorder, failing from the start when
// fail is set, and returns it and its ClickHouse settings.
func startTokenRecorder(t *testing.T, fail bool) (*tokenRecorder, *chURL) {
	f := &tokenRecorder{fail: fail}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, &chURL{url: srv.URL, db: "default"}
}

// stopNode stops n as a member with nobody to hand its queues to: they
// stay in its queue log.
func stopNode(t *testing.T, ctx context.Context, n *testNode) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = n.kv.Shutdown(sctx)
	if err := n.mgr.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

func (f *tokenRecorder) snapshot() []recordedInsert {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.inserts)
}

func (f *tokenRecorder) setFail(fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

// rowsFrom counts the rows of the inserts from the i-th on.
func (f *tokenRecorder) rowsFrom(i int) int {
	n := 0
	for _, in := range f.snapshot()[i:] {
		n += strings.Count(in.body, "\n") + 1 // no newline after the last row
	}
	return n
}

// checkTriedAgain fails t unless the insert at is the tried batch first
// again, token and rows, and the inserts after it hold rows rest (lines
// of JSONEachRow), in order.
func checkTriedAgain(t *testing.T, got []recordedInsert, at int, first recordedInsert, rest string) {
	t.Helper()
	if again := got[at]; again != first {
		t.Fatalf("insert %d: %+v; want the tried batch again: %+v", at, again, first)
	}
	var bodies []string
	for _, in := range got[at+1:] {
		bodies = append(bodies, in.body)
	}
	if got := strings.Join(bodies, "\n"); got != rest {
		t.Fatalf("rows inserted after the tried batch: %q, want %q", got, rest)
	}
}

// checkTriedAmong fails t unless the inserts got hold the tried batch
// first, token and rows, once, and the others hold rows rest (lines of
// JSONEachRow), in order: for a member just started, which may run its
// first batches before the queue's settings reach it, two inserts in
// flight that land in either order.
func checkTriedAmong(t *testing.T, got []recordedInsert, first recordedInsert, rest string) {
	t.Helper()
	i := slices.Index(got, first)
	if i < 0 {
		t.Fatalf("inserts %+v; want the tried batch again: %+v", got, first)
	}
	var bodies []string
	for j, in := range got {
		if j != i {
			bodies = append(bodies, in.body)
		}
	}
	if b := strings.Join(bodies, "\n"); b != rest {
		t.Fatalf("rows inserted besides the tried batch: %q, want %q", b, rest)
	}
}

// putBehindFirstInsert puts rows {"id":0} to {"id":n-1} to queue
// ch:tok through member a, the first alone: it waits for fake's first
// insert, which it returns, before it puts the others.
func putBehindFirstInsert(t *testing.T, ctx context.Context, a *member, fake *tokenRecorder, n int) recordedInsert {
	t.Helper()
	for i := range n {
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/ch:tok/p/%02d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			waitUntil(t, 5*time.Second, "the first insert", func() bool { return len(fake.snapshot()) == 1 })
		}
	}
	return fake.snapshot()[0]
}

// withDirCH gives a member data dir dir and ClickHouse ch (one without a
// URL keeps its rows queued).
func withDirCH(dir string, ch *chURL) func(*Config) {
	return func(c *Config) { c.DataDir, c.ClickHouse, c.ClickHouseOptions = dir, ch.get, ch.options }
}

// restartSendsTriedAgain starts member name of cl again, alone, on data
// dir dir with ClickHouse ch (fake), and checks that the inserts from the
// from-th on are the tried batch first again and the other rows rest (as
// checkTriedAmong), and that the member then releases its whole log.
func restartSendsTriedAgain(t *testing.T, cl *cluster, name, dir string, ch *chURL, fake *tokenRecorder, from int, first recordedInsert, rest string) {
	t.Helper()
	m := cl.start(name, withDirCH(dir, ch))
	connect(m)
	rows := strings.Count(first.body, "\n") + strings.Count(rest, "\n") + 2
	waitUntil(t, 10*time.Second, "every row in", func() bool { return fake.rowsFrom(from) >= rows && rowsOn(m.mgr, "ch:tok") == 0 })
	checkTriedAmong(t, fake.snapshot()[from:], first, rest)
	waitUntil(t, 5*time.Second, "the log to release everything", func() bool { return liveRecords(m.mgr) == 0 })
}

// TestHandoff_triedBatchKeepsItsToken: a batch whose insert landed but
// whose answer was lost, waiting to retry when its dispatcher hands the
// queue over (a graceful stop), goes from the next dispatcher as the same
// rows with the same dedup token, though more rows came behind it: a
// table that deduplicates drops it. It went as part of a batch of every
// row the next dispatcher held, under another token: twice in the table.
func TestHandoff_triedBatchKeepsItsToken(t *testing.T) {
	fake, ch := startTokenRecorder(t, true)
	withCH := func(c *Config) {
		c.ClickHouse, c.ClickHouseOptions = ch.get, ch.options
		c.RetryMin, c.RetryMax = time.Minute, time.Minute // the batch waits to retry when a hands it over
		c.InsertTimeout = 5 * time.Second
	}
	cl := newCluster(t)
	a, b := cl.start("a", withCH), cl.start("b", withCH)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("ch:tok"), `{"max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/ch:tok/p/%02d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One put, one batch: the first of its insert lands, its answer lost.
	put(0, 1)
	waitUntil(t, 5*time.Second, "the first insert", func() bool { return len(fake.snapshot()) == 1 })
	put(1, 4) // behind the batch waiting to retry (one insert in flight at most)
	first := fake.snapshot()[0]
	fake.setFail(false)

	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _ := ParseRecord(recordOn(a, "ch:tok")); rec.Member != b.id {
		t.Fatalf("record after Handoff: %+v, want b", rec)
	}
	waitUntil(t, 10*time.Second, "b to insert every row", func() bool { return fake.rowsFrom(1) >= 4 })
	checkTriedAgain(t, fake.snapshot(), 1, first, "{\"id\":1}\n{\"id\":2}\n{\"id\":3}")
}

// TestHandoff_receiverRestartKeepsTheMark: the member a hand-over gave
// a tried batch to, stopped before its drainer sent the batch (it has no
// ClickHouse URL, so nothing is sent), sends it as the mark says once it
// starts again on its data dir: the same rows, the same token, though
// more rows wait behind it. The sender released its record of the mark
// when the hand-over was answered, and the receiver kept the mark in
// memory only: its restart formed one batch of every row.
func TestHandoff_receiverRestartKeepsTheMark(t *testing.T) {
	fake, ch := startTokenRecorder(t, true)
	withCH := func(c *Config) {
		c.ClickHouse, c.ClickHouseOptions = ch.get, ch.options
		c.RetryMin, c.RetryMax = time.Minute, time.Minute
		c.InsertTimeout = 5 * time.Second
	}
	dirB := t.TempDir()
	cl := newCluster(t)
	a, b := cl.start("a", withCH), cl.start("b", withDirCH(dirB, &chURL{db: "default"}))
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("ch:tok"), `{"max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	first := putBehindFirstInsert(t, ctx, a, fake, 4)
	fake.setFail(false)
	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _ := ParseRecord(recordOn(a, "ch:tok")); rec.Member != b.id || rowsOn(b.mgr, "ch:tok") != 4 {
		t.Fatalf("after Handoff: record %+v, %d rows on b; want b, 4", rec, rowsOn(b.mgr, "ch:tok"))
	}
	a.stop()
	b.stop()
	restartSendsTriedAgain(t, cl, "b", dirB, ch, fake, 1, first, "{\"id\":1}\n{\"id\":2}\n{\"id\":3}")
}

// TestHandoff_partialTriedBatchKeepsItsRows: a tried batch whose rows
// did not all come with its hand-over goes, after triedWait, with those
// that came; killed while that insert waited to retry, the member sends
// those rows again after its restart, with the same token, though the
// rest came meanwhile. The hand-over's mark (recMark: the first row and
// the count) stayed its record, and the restart formed the batch of the
// count's rows, under another token.
func TestHandoff_partialTriedBatchKeepsItsRows(t *testing.T) {
	fake, ch := startTokenRecorder(t, false)
	dirB := t.TempDir()
	withB := func(c *Config) {
		withDirCH(dirB, ch)(c)
		c.RetryMin, c.RetryMax = time.Minute, time.Minute
	}
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", withB)
	connect(a, b)
	ctx := testCtx(t, 40*time.Second)
	if _, err := b.cli.Put(ctx, SettingsKey("ch:tok"), `{"max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.Put(ctx, "/q/ch:tok/p/w", `{"id":0}`); err != nil { // b dispatches the queue
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the first row in", func() bool { return len(fake.snapshot()) == 1 })
	fake.setFail(true)
	row := func(n uint64, batch int) incoming {
		return incoming{id: MsgID{Origin: 77, N: n}, tail: fmt.Sprintf("%02d", n), value: fmt.Appendf(nil, `{"id":%d}`, n), batch: batch}
	}
	// A hand-over cut short: the first two rows of a tried batch of four.
	if err := a.mgr.forward(ctx, b.id, "ch:tok", []incoming{row(1, 4), row(2, 0)}, false, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, triedWait+5*time.Second, "the tried batch to go with the rows that came", func() bool { return len(fake.snapshot()) == 2 })
	first := fake.snapshot()[1]
	if first.body != "{\"id\":1}\n{\"id\":2}" {
		t.Fatalf("the tried batch went as %q, want its two rows", first.body)
	}
	if err := a.mgr.forward(ctx, b.id, "ch:tok", []incoming{row(3, 0), row(4, 0)}, false, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "b to take the rest", func() bool { return rowsOn(b.mgr, "ch:tok") == 4 })
	b.stop()
	fake.setFail(false)
	restartSendsTriedAgain(t, cl, "b", dirB, ch, fake, 2, first, "{\"id\":3}\n{\"id\":4}")
}

// TestRestart_triedBatchKeepsItsToken: a batch whose insert landed but
// whose answer was lost, waiting to retry when its member stops without a
// hand-over (alone, or killed), goes after the restart as the same rows
// with the same token, though more rows wait behind it: its mark is in the
// queue log, and is released once the batch is in. Fake ClickHouse, as in
// TestHandoff_triedBatchKeepsItsToken.
func TestRestart_triedBatchKeepsItsToken(t *testing.T) {
	fake, ch := startTokenRecorder(t, true)
	dir := t.TempDir()
	withDir := func(c *Config) {
		c.DataDir = dir
		c.RetryMin, c.RetryMax = time.Minute, time.Minute
	}
	ctx := testCtx(t, 30*time.Second)
	n1 := startSinkNode(t, ch, withDir)
	cli := n1.client(t)
	if _, err := cli.Put(ctx, SettingsKey("ch:tok"), `{"max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:tok/p/%02d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 1)
	waitUntil(t, 5*time.Second, "the first insert", func() bool { return len(fake.snapshot()) == 1 })
	put(1, 4)
	first := fake.snapshot()[0]
	stopNode(t, ctx, n1)
	fake.setFail(false)

	n2 := startSinkNode(t, ch, withDir)
	waitUntil(t, 10*time.Second, "every row in", func() bool { return fake.rowsFrom(1) >= 4 && n2.depth("ch:tok") == 0 })
	checkTriedAmong(t, fake.snapshot()[1:], first, "{\"id\":1}\n{\"id\":2}\n{\"id\":3}")
	waitUntil(t, 5*time.Second, "the log to release everything", func() bool { return liveRecords(n2.mgr) == 0 })
}

// TestRestart_triedBatchGoesToTheNewDispatcher: a dispatcher killed while
// a batch of its waited to retry, whose queue another member dispatches by
// the time it is back, hands its recovered rows over with the batch's
// mark: the new dispatcher sends the batch as the first attempt did. The
// recovered rows carry no number, which the peer bound first refused a
// mark on, and the hand-over of every recovered row failed.
func TestRestart_triedBatchGoesToTheNewDispatcher(t *testing.T) {
	fake, ch := startTokenRecorder(t, true)
	dirA := t.TempDir()
	with := func(dir string) func(*Config) {
		return func(c *Config) {
			c.DataDir = dir
			c.ClickHouse, c.ClickHouseOptions = ch.get, ch.options
			c.RetryMin, c.RetryMax = time.Minute, time.Minute
		}
	}
	cl := newCluster(t)
	a, b := cl.start("a", with(dirA)), cl.start("b", with(t.TempDir()))
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("ch:tok"), `{"max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	first := putBehindFirstInsert(t, ctx, a, fake, 3)
	a.stop() // no hand-over: the rows and the mark stay in a's log
	fake.setFail(false)
	connect(b)
	if _, err := b.cli.Put(ctx, "/q/ch:tok/p/new", `{"id":9}`); err != nil { // b claims the queue
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "b's insert of its own row", func() bool { return len(fake.snapshot()) == 2 })
	a2 := cl.start("a", with(dirA))
	connect(a2, b)
	waitUntil(t, 10*time.Second, "every row in", func() bool {
		return rowsOn(b.mgr, "ch:tok") == 0 && liveRecords(a2.mgr) == 0 && len(fake.snapshot()) >= 4
	})
	checkTriedAgain(t, fake.snapshot(), 2, first, "{\"id\":1}\n{\"id\":2}")
}

// TestTakeover_triedBatchKeepsItsToken: with ack=replicated, a dispatcher
// killed while a batch of its waited to retry (its insert landed, its
// answer lost) leaves the batch's mark on its backup, which takes the
// queue over and sends the same rows as one batch first, with the same
// token, though more rows wait behind it. The backup formed batches of
// its own, and the rows went in twice.
func TestTakeover_triedBatchKeepsItsToken(t *testing.T) {
	fake, ch := startTokenRecorder(t, false)
	withCH := func(c *Config) {
		c.ClickHouse, c.ClickHouseOptions = ch.get, ch.options
		c.RetryMin, c.RetryMax = time.Minute, time.Minute
	}
	cl := newCluster(t)
	a, b := cl.start("a", withCH), cl.start("b", withCH)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("ch:tok"), `{"ack":"replicated","max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the settings on b", func() bool { return b.kv.Get(SettingsKey("ch:tok")) != nil })
	// A first row makes b the queue's backup, and goes in.
	if _, err := a.cli.Put(ctx, "/q/ch:tok/p/w", `{"id":-1}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the first row in, and released on b", func() bool {
		return len(fake.snapshot()) == 1 && backupRowsOf(b, "ch:tok") == 0
	})
	fake.mu.Lock()
	fake.fail, fake.inserts = true, nil
	fake.mu.Unlock()
	putBehindFirstInsert(t, ctx, a, fake, 3)
	if got := backupRowsOf(b, "ch:tok"); got != 3 {
		t.Fatalf("b keeps %d copies, want 3", got)
	}
	first := fake.snapshot()[0]
	a.stop()
	fake.setFail(false)
	connect(b) // serf reports a failed; nobody puts
	waitUntil(t, 10*time.Second, "b to insert every row", func() bool { return fake.rowsFrom(1) >= 3 })
	checkTriedAgain(t, fake.snapshot(), 1, first, "{\"id\":1}\n{\"id\":2}")
}

// TestTakeover_restartKeepsTheMark: the backup that took a killed
// dispatcher's queue over, stopped before its drainer sent the tried
// batch (it has no ClickHouse URL), sends the batch as its mark says
// once it starts again on its data dir. The mark of the copy it took over
// was in memory only, and the restart formed a batch of every row.
func TestTakeover_restartKeepsTheMark(t *testing.T) {
	fake, ch := startTokenRecorder(t, false)
	withCH := func(c *Config) {
		c.ClickHouse, c.ClickHouseOptions = ch.get, ch.options
		c.RetryMin, c.RetryMax = time.Minute, time.Minute
	}
	dirB := t.TempDir()
	cl := newCluster(t)
	a, b := cl.start("a", withCH), cl.start("b", withDirCH(dirB, &chURL{db: "default"}))
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("ch:tok"), `{"ack":"replicated","max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the settings on b", func() bool { return b.kv.Get(SettingsKey("ch:tok")) != nil })
	fake.setFail(true)
	first := putBehindFirstInsert(t, ctx, a, fake, 3)
	a.stop()
	connect(b) // serf reports a failed; nobody puts
	waitUntil(t, 5*time.Second, "b to take the queue over", func() bool { return rowsOn(b.mgr, "ch:tok") == 3 })
	b.stop()
	fake.setFail(false)
	restartSendsTriedAgain(t, cl, "b", dirB, ch, fake, 1, first, "{\"id\":1}\n{\"id\":2}")
}

// TestTakeover_newBackupGetsTheMark: a dispatcher whose backup left while
// a batch of its waited to retry gives the new backup the batch's mark
// with its full copy; killed then, the new backup takes the queue over
// and sends the same rows as one batch first, with the same token. The
// full copy carried no marks, and the new backup formed batches of its
// own.
func TestTakeover_newBackupGetsTheMark(t *testing.T) {
	fake, ch := startTokenRecorder(t, false)
	withCH := func(c *Config) {
		c.ClickHouse, c.ClickHouseOptions = ch.get, ch.options
		c.RetryMin, c.RetryMax = time.Minute, time.Minute
	}
	cl := newCluster(t)
	a, b, c := cl.start("a", withCH), cl.start("b", withCH), cl.start("c", withCH)
	connect(a, b, c)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("ch:tok"), `{"ack":"replicated","max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the settings on b and c", func() bool {
		return b.kv.Get(SettingsKey("ch:tok")) != nil && c.kv.Get(SettingsKey("ch:tok")) != nil
	})
	fake.setFail(true)
	first := putBehindFirstInsert(t, ctx, a, fake, 3)
	old, next := b, c
	if a.mgr.queueFor("ch:tok").backupMember.Load() == c.id {
		old, next = c, b
	}
	if backupRowsOf(old, "ch:tok") != 3 || backupRowsOf(next, "ch:tok") != 0 {
		t.Fatalf("copies on the backup %s: %d, on %s: %d; want 3 and 0", old.name, backupRowsOf(old, "ch:tok"), next.name, backupRowsOf(next, "ch:tok"))
	}
	old.stop()
	connect(a, next)
	waitUntil(t, 5*time.Second, "the full copy on "+next.name, func() bool { return backupRowsOf(next, "ch:tok") == 3 })
	a.stop()
	fake.setFail(false)
	connect(next) // serf reports a failed; nobody puts
	waitUntil(t, 10*time.Second, next.name+" to insert every row", func() bool { return fake.rowsFrom(1) >= 3 })
	checkTriedAgain(t, fake.snapshot(), 1, first, "{\"id\":1}\n{\"id\":2}")
}

// TestDrainBatch_triedBatchBehindAFullDrainer: a hand-over's rows, with
// their numbers below the new dispatcher's own, wait while its drainer
// holds all it may of its own rows; their batch's mark waits with them,
// and the batch forms once they are delivered. The mark was dropped as
// if its first row had left, the first time a batch formed.
func TestDrainBatch_triedBatchBehindAFullDrainer(t *testing.T) {
	now := time.Unix(1000, 0)
	set := Config{}.withDefaults().defaults()
	set.BatchRows, set.MaxInflightInserts = 2, 1 // the drainer holds 4 rows at most
	q := newQueue("ch:t", set)
	c := &consumer{id: "clickhouse", prefix: "q", drain: &drainer{ready: make(chan struct{}, 1)}}
	q.mu.Lock()
	q.addConsumerLocked(c, now)
	q.becomeDispatcherLocked(2, now) // its own rows numbered from 1<<32+1
	own := make([]incoming, 6)
	for i := range own {
		own[i] = incoming{id: MsgID{Origin: 1, N: uint64(i + 1)}, tail: "k", value: []byte(`{"a":1}`)}
	}
	q.enqueueLocked(own, now, arrivedLocal, false)
	handed := make([]incoming, 3)
	for i := range handed {
		handed[i] = incoming{id: MsgID{Origin: 9, N: uint64(i + 1)}, tail: "k", value: []byte(`{"b":1}`), seq: uint64(i + 1)}
	}
	handed[0].batch = 3
	q.enqueueLocked(handed, now, arrivedCopy, false)
	q.mu.Unlock()
	var batches [][]uint64
	for range 10 {
		f := q.drainBatch(c, set, nil, nil, now, false)
		if len(f.rows) == 0 {
			break
		}
		if f.tried {
			q.takeTried(f.rows[0].seq)
		}
		batches = append(batches, seqsOf(f.rows))
		q.ackRows(f.rows, now)
	}
	if !slices.ContainsFunc(batches, func(b []uint64) bool { return slices.Equal(b, []uint64{1, 2, 3}) }) {
		t.Fatalf("batches %v: the handed-over tried batch 1..3 never formed", batches)
	}
}

// deposed is a key space whose record of every queue names member 2, as
// a read of the cluster shows it.
type deposed struct{ RecordStore }

func (deposed) Get(string) []byte               { return []byte("2;epoch=3") }
func (deposed) Linearize(context.Context) error { return nil }

// someCluster is a cluster, for a manager that asks only whether it has
// one.
type someCluster struct{ Cluster }

// TestInsert_fencedTriedBatchKeepsItsMark: a batch formed again from a
// mark and fenced before its first attempt here (its queue moved on
// again meanwhile) goes back marked: an attempt elsewhere may have
// landed. It went back unmarked, as a batch never sent.
func TestInsert_fencedTriedBatchKeepsItsMark(t *testing.T) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.records, m.cluster = deposed{}, someCluster{}
	now := time.Unix(1000, 0)
	q, c := triedQueue(5, map[uint64]int{1: 3}, now)
	d := &drainer{m: m, q: q, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	f := q.drainBatch(c, q.set, nil, nil, now, false)
	if !f.tried {
		t.Fatalf("batch %v is not the tried one", seqsOf(f.rows))
	}
	d.insert(&inflight{rows: f.rows, rec: q.takeTried(f.rows[0].seq), again: true}, sink.Endpoint{})
	if got := q.tried[1].rows; got != 3 {
		t.Fatalf("mark of row 1 after the fence gave the batch up: %d rows, want 3", got)
	}
}

// TestRestart_triedBatchOfConcurrentPuts: rows put at once by many
// producers are appended to the queue log in one order and numbered in
// another; a batch of them waiting to retry when its member stops goes
// after the restart as the same rows in the same order, with the same
// token. Its mark named the first row and a count, and the rows came back
// numbered in the log's order: other rows, or another order.
func TestRestart_triedBatchOfConcurrentPuts(t *testing.T) {
	fake, ch := startTokenRecorder(t, true)
	url := ch.url
	ch.url = "" // none yet: the rows wait, all of them
	dir := t.TempDir()
	withDir := func(c *Config) {
		c.DataDir = dir
		c.RetryMin, c.RetryMax = 100*time.Millisecond, 100*time.Millisecond // the same batch, again and again
	}
	ctx := testCtx(t, 60*time.Second)
	n1 := startSinkNode(t, ch, withDir)
	cli := n1.client(t)
	if _, err := cli.Put(ctx, SettingsKey("ch:tok"), `{"max_inflight_inserts":1,"batch_interval":"0s","batch_rows":1000}`); err != nil {
		t.Fatal(err)
	}
	const rows = 64
	var wg sync.WaitGroup
	for i := range rows {
		wg.Go(func() {
			if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:tok/p/%02d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ch.mu.Lock()
	ch.url = url
	ch.mu.Unlock()
	waitUntil(t, 10*time.Second, "the first insert", func() bool { return len(fake.snapshot()) > 0 })
	first := fake.snapshot()[0]
	stopNode(t, ctx, n1)
	fake.mu.Lock()
	fake.fail, fake.inserts = false, nil
	fake.mu.Unlock()
	n2 := startSinkNode(t, ch, withDir)
	waitUntil(t, 10*time.Second, "every row in", func() bool { return n2.depth("ch:tok") == 0 && fake.rowsFrom(0) == rows })
	checkTriedAgain(t, fake.snapshot(), 0, first, "")
}
