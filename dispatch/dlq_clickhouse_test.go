//go:build e2e

package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
	chuteotel "chute/otel"
)

// startTableNode starts a ClickHouse with the tables ddl creates and a
// node draining into it, with a client and a minute for the test.
func startTableNode(t *testing.T, ddl ...string) (*chtest.Server, *testNode, *clientv3.Client, context.Context) {
	t.Helper()
	ch := chtest.Start(t)
	for _, q := range ddl {
		ch.Exec(t, q)
	}
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"})
	return ch, n, n.client(t), testCtx(t, time.Minute)
}

// putRows puts rows to queue's producer keys in txns of 128 puts, key i
// for row i.
func putRows(t *testing.T, ctx context.Context, cli *clientv3.Client, queue string, rows []string) {
	t.Helper()
	ops := make([]clientv3.Op, 0, 128)
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		ops = ops[:0]
	}
	for i, v := range rows {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/%s/p/%d", queue, i), v))
		if len(ops) == cap(ops) {
			flush()
		}
	}
	flush()
}

// letterSeqs returns the numbers of queue's dead letters, ascending.
func letterSeqs(t *testing.T, ctx context.Context, cli *clientv3.Client, queue string) []uint64 {
	t.Helper()
	resp, err := cli.Get(ctx, letterPrefix(queue), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, kv := range resp.Kvs {
		seq, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), letterPrefix(queue)), 10, 64)
		if err != nil {
			t.Fatalf("letter key %s: %v", kv.Key, err)
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs
}

// TestDeadLetters_floodKeepsNewest is the flood of bad rows: 20,000 rows
// ClickHouse refuses, among 10,000 good ones, into a queue with
// dlq_max_rows 1000. Exactly the newest 1000 letters remain, the other
// 19,000 count as dropped, every good row lands once, and the letters
// take a few writes (raft entries), not one per row.
func TestDeadLetters_floodKeepsNewest(t *testing.T) {
	const good, bad = 10_000, 20_000
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.flood (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	providers, err := chuteotel.New(chuteotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"}, func(c *Config) { c.Meter = providers.MeterProvider() })
	cli := n.client(t)
	ctx := testCtx(t, 5*time.Minute)
	if _, err := cli.Put(ctx, SettingsKey("ch:flood"), `{"dlq_max_rows":1000}`); err != nil {
		t.Fatal(err)
	}
	rows := make([]string, 0, good+bad)
	var badSeqs []uint64 // a single member numbers rows from 1 in put order
	for i := range good + bad {
		if i%3 == 0 {
			rows = append(rows, fmt.Sprintf(`{"id":%d,"n":%d}`, i, i))
		} else {
			rows = append(rows, fmt.Sprintf(`{"id":%d,"n":"poison %d"}`, i, i))
			badSeqs = append(badSeqs, uint64(i+1))
		}
	}
	applied := n.kv.StateMachine().Applied()
	start := time.Now()
	putRows(t, ctx, cli, "ch:flood", rows)
	waitCount(t, ch, "default.flood", good, 4*time.Minute)
	waitUntil(t, 30*time.Second, "the queue to empty", func() bool { return n.depth("ch:flood") == 0 })
	elapsed := time.Since(start)
	writes := n.kv.StateMachine().Applied() - applied
	t.Logf("%d bad rows among %d: drained in %v, %d key-space writes", bad, good+bad, elapsed, writes)

	if got := ch.Query(t, "SELECT count(), uniqExact(id) FROM default.flood"); got != fmt.Sprintf("%d\t%d", good, good) {
		t.Fatalf("good rows: got %q (count, distinct ids), want %d of each", got, good)
	}
	got := letterSeqs(t, ctx, cli, "ch:flood")
	if want := badSeqs[len(badSeqs)-1000:]; !slices.Equal(got, want) {
		t.Fatalf("dead letters: got %d from %v to %v, want the newest 1000, %v to %v", len(got), got[:1], got[len(got)-1:], want[0], want[len(want)-1])
	}
	var l letter
	if resp, err := cli.Get(ctx, DeadLetterKey("ch:flood", got[0])); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("letter %d: %v", got[0], err)
	} else if err := json.Unmarshal(resp.Kvs[0].Value, &l); err != nil || l.Code != 27 || l.Time.IsZero() || !strings.HasPrefix(l.Row, `{"id":`) {
		t.Fatalf("letter %d: got %+v, %v; want code 27, a time and the row", got[0], l, err)
	}
	body := metricsText(t, providers)
	if want := `chute_dead_letters_dropped_total{queue="ch:flood",reason="max_rows"} 19000`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "chute_dead_letters") {
				t.Log(line)
			}
		}
	}
	if writes > 100 {
		t.Errorf("%d key-space writes for %d bad rows: want a few per batch", writes, bad)
	}
}

// slowBisection starts a node whose queue ch:slow holds a batch whose
// bisection makes 8 requests that go in, each taking 2 s: ClickHouse's own
// sleep, a MATERIALIZED column, slows every insert that parses. It
// returns the node, the metrics' providers and the number of good rows;
// the node keeps its queue in dir and logs its warnings to logs.
func slowBisection(t *testing.T, ctx context.Context, dir string, logs *logLines) (*chtest.Server, *testNode, *chuteotel.Providers, int) {
	t.Helper()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.slow (id UInt64, n UInt32, pad String, s UInt8 MATERIALIZED sleep(2)) ENGINE = MergeTree ORDER BY id")
	providers, err := chuteotel.New(chuteotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"}, func(c *Config) {
		c.Meter, c.DataDir, c.Logger = providers.MeterProvider(), dir, slog.New(logs.handler())
	})
	cli := n.client(t)
	if _, err := cli.Put(ctx, SettingsKey("ch:slow"), `{"batch_interval":"3s","batch_bytes":16777216}`); err != nil {
		t.Fatal(err)
	}
	// 64 rows of 100 kB, every 8th bad: over MarkerTrustBytes, so
	// bisection halves before it follows the rows ClickHouse names.
	pad := strings.Repeat("x", 100_000)
	const rows, every = 64, 8
	for i := range rows {
		v := fmt.Sprintf(`{"id":%d,"n":%d,"pad":"%s"}`, i, i, pad)
		if i%every == 0 {
			v = fmt.Sprintf(`{"id":%d,"n":"bad","pad":"%s"}`, i, pad)
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:slow/p/%d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	return ch, n, providers, rows - rows/every
}

// TestDeadLetters_longBisectionNotCut checks that a bisection longer
// than an insert's bound (InsertTimeout 5 s, and 5 s more) runs to its
// end, each request with a bound of its own: a deadline for the whole
// bisection cut the request in flight, whose rows ClickHouse wrote all
// the same, and sent them again.
func TestDeadLetters_longBisectionNotCut(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	start := time.Now()
	ch, n, providers, good := slowBisection(t, ctx, t.TempDir(), &logLines{})
	waitUntil(t, time.Minute, "the queue to empty", func() bool { return n.depth("ch:slow") == 0 })
	t.Logf("settled in %v", time.Since(start))
	if got := ch.Query(t, "SELECT count(), uniqExact(id) FROM default.slow"); got != fmt.Sprintf("%d\t%d", good, good) {
		t.Fatalf("good rows: got %q (count, distinct ids), want %d of each", got, good)
	}
	if got, want := len(letterSeqs(t, ctx, n.client(t), "ch:slow")), 64-good; got != want {
		t.Fatalf("dead letters: got %d, want %d", got, want)
	}
	// A bisection that stops leaves rows queued: its batch counts as
	// "retry".
	var batches []string
	for _, line := range strings.Split(metricsText(t, providers), "\n") {
		if strings.HasPrefix(line, "chute_clickhouse_batches_total") {
			batches = append(batches, line)
		}
	}
	if s := strings.Join(batches, "\n"); !strings.Contains(s, `outcome="dead_letters"`) || strings.Contains(s, `outcome="retry"`) {
		t.Fatalf("batches: got\n%s\nwant those with dead letters settled, none retried", s)
	}
}

// TestDeadLetters_shutdownStopsBisection checks that a member shutting
// down ends a bisection after the request in flight, not after the
// bisection; the rows it had not settled stay on disk, and the next
// start inserts them: every good row once.
func TestDeadLetters_shutdownStopsBisection(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	dir, logs := t.TempDir(), &logLines{}
	ch, n, _, good := slowBisection(t, ctx, dir, logs)
	// A request that parsed is sleeping in ClickHouse: the bisection is
	// under way, with more than 10 s of requests to go.
	waitUntil(t, 30*time.Second, "an insert that parsed", func() bool {
		return ch.Query(t, "SELECT count() FROM system.processes WHERE query LIKE 'INSERT INTO `default`.`slow`%'") != "0"
	})
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.mgr.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown during a bisection: %v", err)
	}
	if took := time.Since(start); took > 7*time.Second {
		t.Fatalf("shutdown took %v: want the request in flight (2 s) to end it, not the bisection", took)
	}
	if w := logs.last("isolating refused rows"); w != "" {
		t.Errorf("a stop, not a failure of ClickHouse's, logged at WARN: %s", w)
	}
	want := fmt.Sprintf("%d\t%d", good, good)
	if got := ch.Query(t, "SELECT count(), uniqExact(id) FROM default.slow"); got == want {
		t.Fatalf("every good row was in at shutdown (%q): the bisection ran to its end", got)
	}
	// Recovered rows are held copies until the reconcile loop claims
	// the queue: wait for the rows, then for the queue to empty.
	n2 := startSinkNode(t, &chURL{url: ch.URL(), db: "default"}, func(c *Config) { c.DataDir = dir })
	waitCount(t, ch, "default.slow", good, time.Minute)
	waitUntil(t, 10*time.Second, "the restarted queue to empty", func() bool { return n2.depth("ch:slow") == 0 })
	if got := ch.Query(t, "SELECT count(), uniqExact(id) FROM default.slow"); got != want {
		t.Fatalf("good rows after a restart: got %q (count, distinct ids), want %d of each", got, good)
	}
}

// TestDeadLetters_oneWritePerBatch checks that the dead letters of one
// bisected batch are one write of the key space (one raft entry), not
// one per row.
func TestDeadLetters_oneWritePerBatch(t *testing.T) {
	ch, n, cli, ctx := startTableNode(t, "CREATE TABLE default.batch (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	putRows(t, ctx, cli, "ch:batch", []string{`{"id":1000,"n":1}`}) // claims the queue: a write of its own
	waitCount(t, ch, "default.batch", 1, 10*time.Second)
	applied := n.kv.StateMachine().Applied()
	rows := make([]string, 100) // one txn: one batch
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"id":%d,"n":%d}`, i, i)
		if i%5 == 2 {
			rows[i] = fmt.Sprintf(`{"id":%d,"n":"bad"}`, i)
		}
	}
	putRows(t, ctx, cli, "ch:batch", rows)
	waitCount(t, ch, "default.batch", 81, 20*time.Second)
	waitUntil(t, 10*time.Second, "the queue to empty", func() bool { return n.depth("ch:batch") == 0 })
	if got := len(letterSeqs(t, ctx, cli, "ch:batch")); got != 20 {
		t.Fatalf("dead letters: got %d, want 20", got)
	}
	if got := n.kv.StateMachine().Applied() - applied; got != 1 {
		t.Fatalf("key-space writes for a batch with 20 refused rows: got %d, want 1", got)
	}
}

// TestDeadLetters_userDeleteKeepsBound checks that letters a user deletes
// (as etcdctl del would) are not counted against dlq_max_rows: later
// letters do not push out the ones left while there is room, and past
// the max the oldest by number go, "9" before "10".
func TestDeadLetters_userDeleteKeepsBound(t *testing.T) {
	_, n, cli, ctx := startTableNode(t, "CREATE TABLE default.bound (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	if _, err := cli.Put(ctx, SettingsKey("ch:bound"), `{"dlq_max_rows":10}`); err != nil {
		t.Fatal(err)
	}
	next := 0
	putBad := func(k int) {
		t.Helper()
		ops := make([]clientv3.Op, k)
		for i := range ops {
			ops[i] = clientv3.OpPut(fmt.Sprintf("/q/ch:bound/p/%d", next), fmt.Sprintf(`{"id":%d,"n":"bad"}`, next))
			next++
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 20*time.Second, "the queue to empty", func() bool { return n.depth("ch:bound") == 0 })
	}
	check := func(when string, want []uint64) {
		t.Helper()
		if got := letterSeqs(t, ctx, cli, "ch:bound"); !slices.Equal(got, want) {
			t.Fatalf("%s: got letters %v, want %v", when, got, want)
		}
	}
	putBad(10)
	check("10 refused rows", seqRange(1, 10))
	for _, s := range []uint64{3, 4, 5, 6, 7} {
		if _, err := cli.Delete(ctx, DeadLetterKey("ch:bound", s)); err != nil {
			t.Fatal(err)
		}
	}
	putBad(3)
	check("5 deleted by the user, then 3 more", []uint64{1, 2, 8, 9, 10, 11, 12, 13})
	putBad(4)
	check("4 more, past the max", []uint64{8, 9, 10, 11, 12, 13, 14, 15, 16, 17})
	putBad(1)
	check("1 more", append(seqRange(9, 17), 18))
}

// TestDeadLetters_badSettingBlamesNoRow checks, on the real 18.16, that a
// queue's insert setting the server cannot parse (it answers 400, code
// 72, a parse error, whatever the rows) keeps the rows queued rather than
// sending each to the dead letters, past dlq_max_rows for good; once the
// setting is fixed they land.
func TestDeadLetters_badSettingBlamesNoRow(t *testing.T) {
	ch, n, cli, ctx := startTableNode(t, "CREATE TABLE default.setbad (id UInt64) ENGINE = MergeTree ORDER BY id")
	if _, err := cli.Put(ctx, SettingsKey("ch:setbad"), `{"settings":{"insert_distributed_sync":-1}}`); err != nil {
		t.Fatal(err)
	}
	rows := make([]string, 8)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"id":%d}`, i)
	}
	putRows(t, ctx, cli, "ch:setbad", rows)
	waitUntil(t, 20*time.Second, "an insert refused", func() bool {
		e := n.mgr.lookup("ch:setbad").status().LastInsertError
		return e != nil && e.Code == 72
	})
	time.Sleep(500 * time.Millisecond) // a bisection would have run by now
	if seqs := letterSeqs(t, ctx, cli, "ch:setbad"); len(seqs) != 0 || n.depth("ch:setbad") != len(rows) {
		t.Fatalf("with a setting the server refuses: %d dead letters, %d rows queued; want 0 and %d", len(seqs), n.depth("ch:setbad"), len(rows))
	}
	if _, err := cli.Put(ctx, SettingsKey("ch:setbad"), `{}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the rows in the table", func() bool { return ch.Count(t, "default.setbad") == len(rows) })
}

// TestDeadLetters_viewFailureKeepsRowsOnce checks, on the real 18.16, a
// materialized view that fails on a row: the server answers 400 (code 6,
// "while pushing to view") with the block already in the source table.
// The rows count as inserted, once each, with no dead letter; before,
// the batch was bisected, each part written again, and the row stored as
// a dead letter though it was in the table.
func TestDeadLetters_viewFailureKeepsRowsOnce(t *testing.T) {
	ch, n, cli, ctx := startTableNode(t, "CREATE TABLE default.vsrc (id UInt64, s String) ENGINE = MergeTree ORDER BY id", "CREATE TABLE default.vdst (id UInt64, n UInt64) ENGINE = MergeTree ORDER BY id", "CREATE MATERIALIZED VIEW default.vmv TO default.vdst AS SELECT id, toUInt64(s) AS n FROM default.vsrc")
	rows := make([]string, 8)
	for i := range rows {
		s := fmt.Sprint(i)
		if i == 5 {
			s = "abc" // the view cannot make a UInt64 of it
		}
		rows[i] = fmt.Sprintf(`{"id":%d,"s":"%s"}`, i, s)
	}
	putRows(t, ctx, cli, "ch:vsrc", rows)
	waitUntil(t, 30*time.Second, "the queue to empty", func() bool { return n.depth("ch:vsrc") == 0 })
	if got := ch.Query(t, "SELECT count(), uniqExact(id) FROM default.vsrc"); got != "8\t8" {
		t.Fatalf("source table holds count, distinct ids = %q, want 8 of 8", got)
	}
	if seqs := letterSeqs(t, ctx, cli, "ch:vsrc"); len(seqs) != 0 {
		t.Fatalf("dead letters %v for rows that are in the table", seqs)
	}
	if e := n.mgr.lookup("ch:vsrc").status().LastInsertError; e == nil || e.Code != 6 {
		t.Fatalf("last insert error %+v, want the view's (code 6)", e)
	}
}

// TestDeadLetters_rowQuotingAViewFailure: a good row holding the words
// of a view's failure, after a bad row in one batch: 18.16's parse error
// quotes the rows from the bad one on, and the batch counted as landed,
// its rows acknowledged with none in the table and no dead letter.
func TestDeadLetters_rowQuotingAViewFailure(t *testing.T) {
	ch, n, cli, ctx := startTableNode(t, "CREATE TABLE default.lv (id UInt64, n UInt32, s String) ENGINE = MergeTree ORDER BY id")
	putRows(t, ctx, cli, "ch:lv", []string{
		`{"id":1,"n":1,"s":"a"}`,
		`{"id":2,"n":"bad","s":"b"}`,
		`{"id":3,"n":3,"s":"while pushing to view v, e.what() = DB::Exception"}`,
	})
	waitUntil(t, 30*time.Second, "the queue to empty", func() bool { return n.depth("ch:lv") == 0 })
	if got, letters := ch.Count(t, "default.lv"), letterSeqs(t, ctx, cli, "ch:lv"); got != 2 || len(letters) != 1 {
		t.Fatalf("%d rows in the table and %d dead letters, want 2 and 1", got, len(letters))
	}
}
