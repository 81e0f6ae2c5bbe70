//go:build e2e

package dispatch

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
	"chute/internal/testcerts"
	chuteotel "chute/otel"
)

func (c *chURL) setTLS(cfg *tls.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tls = cfg
}

func (c *chURL) set(url, db string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.url, c.db = url, db
}

func waitCount(t *testing.T, ch *chtest.Server, table string, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	got := -1
	for time.Now().Before(deadline) {
		if got = ch.Count(t, table); got == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: got %d rows, want %d within %v", table, got, want, d)
}

// TestSink_putsBecomeRows checks the main job: puts to /q/ch:events/p/...
// become rows of default.events, byte for byte, and the queue empties.
func TestSink_putsBecomeRows(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, big UInt64, s String) ENGINE = MergeTree ORDER BY id")
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	for i := range 200 {
		v := fmt.Sprintf(`{"id":%d,"big":18446744073709551615,"s":"row %d"}`, i, i)
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	waitCount(t, ch, "default.events", 200, 10*time.Second)
	if got := ch.Query(t, "SELECT max(big), uniqExact(id) FROM default.events"); got != "18446744073709551615\t200" {
		t.Fatalf("rows: got %q", got)
	}
	waitUntil(t, 5*time.Second, "the queue to empty", func() bool { return n.depth("ch:events") == 0 })
}

// TestSink_badRowBecomesDeadLetter checks that one row ClickHouse refuses
// among 1,000 becomes a dead letter with ClickHouse's reason while the
// other 999 are inserted, and that later puts keep flowing.
func TestSink_badRowBecomesDeadLetter(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.typed (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	ops := make([]clientv3.Op, 0, 100)
	for i := range 1000 {
		v := fmt.Sprintf(`{"id":%d,"n":%d}`, i, i)
		if i == 500 {
			v = `{"id":500,"n":"not a number"}`
		}
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:typed/p/%d", i), v))
		if len(ops) == 100 {
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	waitCount(t, ch, "default.typed", 999, 20*time.Second)
	var letters *clientv3.GetResponse
	waitUntil(t, 5*time.Second, "one dead letter", func() bool {
		var err error
		letters, err = cli.Get(ctx, "/q/ch:typed/dlq/", clientv3.WithPrefix())
		return err == nil && len(letters.Kvs) == 1
	})
	var letter struct {
		Table, Key, Error, Row string
		Code                   int
	}
	if err := json.Unmarshal(letters.Kvs[0].Value, &letter); err != nil {
		t.Fatal(err)
	}
	if letter.Key != "500" || letter.Row != `{"id":500,"n":"not a number"}` || letter.Code == 0 || letter.Error == "" {
		t.Fatalf("dead letter: %+v", letter)
	}
	if _, err := cli.Put(ctx, "/q/ch:typed/p/later", `{"id":1000,"n":1}`); err != nil {
		t.Fatal(err)
	}
	waitCount(t, ch, "default.typed", 1000, 10*time.Second)
}

// TestSink_unknownTableThenCreated checks that rows for a table that does
// not exist stay queued, and arrive without another put once it does.
func TestSink_unknownTableThenCreated(t *testing.T) {
	ch := chtest.Start(t)
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	for i := range 10 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:later/p/%d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // a few failed attempts
	if d := n.depth("ch:later"); d != 10 {
		t.Fatalf("depth with no table: got %d, want 10", d)
	}
	ch.Exec(t, "CREATE TABLE default.later (id UInt64) ENGINE = MergeTree ORDER BY id")
	waitCount(t, ch, "default.later", 10, 10*time.Second)
}

// TestSink_TLS drains over https with the TLS configuration read at every
// batch: while the CA is not the one that signed ClickHouse's certificate,
// the rows stay queued and the queue shows a config error; once the right
// CA is handed over, the next batch lands them.
func TestSink_TLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "clickhouse CA")
	cert, key := ca.Issue(t, "clickhouse", "127.0.0.1").Write(t, dir, "server")
	ch := chtest.Start(t, chtest.Options{TLSCertFile: cert, TLSKeyFile: key})
	ch.Exec(t, "CREATE TABLE default.sealed (id UInt64) ENGINE = MergeTree ORDER BY id")
	pool := func(ca *testcerts.CA) *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(ca.Cert)
		return p
	}
	settings := &chURL{url: "https://" + ch.HTTPSAddr(), db: "default", tls: &tls.Config{RootCAs: pool(testcerts.NewCA(t, "other CA"))}}
	n := startSinkNode(t, settings)
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	for i := range 5 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:sealed/p/%d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 10*time.Second, "a config error on ch:sealed", func() bool {
		qs := n.mgr.Status().Queues
		return len(qs) == 1 && qs[0].LastInsertError != nil
	})
	le := n.mgr.Status().Queues[0].LastInsertError
	if le.Class != "config" || !strings.Contains(le.Message, "--clickhouse-ca-file") {
		t.Fatalf("last insert error: got %+v, want class config naming --clickhouse-ca-file", le)
	}
	if d := n.depth("ch:sealed"); d != 5 {
		t.Fatalf("depth with the wrong CA: got %d, want 5", d)
	}
	settings.setTLS(&tls.Config{RootCAs: pool(ca)})
	waitCount(t, ch, "default.sealed", 5, 10*time.Second)
}

// TestSink_clickhouseDownThenBack checks that rows put while ClickHouse is
// down land after it restarts, with no put after the restart, and that the
// failed and the good inserts show in the metrics.
func TestSink_clickhouseDownThenBack(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.outage (id UInt64) ENGINE = MergeTree ORDER BY id")
	providers, err := chuteotel.New(chuteotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	settings := &chURL{url: ch.URL(), db: "default"}
	n := startNode(t, func(c *Config) {
		c.ClickHouse = settings.get
		c.RetryMin, c.RetryMax, c.InsertTimeout = 50*time.Millisecond, 500*time.Millisecond, 5*time.Second
		c.Meter = providers.MeterProvider()
	})
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	ch.Stop(t)
	for i := range 50 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:outage/p/%d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	ch.Restart(t)
	waitCount(t, ch, "default.outage", 50, 20*time.Second)
	// The rows show in the table before chute has read ClickHouse's
	// answer to their insert: the metrics follow a moment later.
	var body string
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec := httptest.NewRecorder()
		providers.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body = rec.Body.String()
		if strings.Contains(body, `chute_clickhouse_rows_inserted_total{table="default.outage"} 50`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{
		`chute_clickhouse_retries_total{outcome="transient",table="default.outage"}`,
		`chute_clickhouse_insert_duration_seconds_count{outcome="ok",table="default.outage"}`,
		`chute_clickhouse_rows_inserted_total{table="default.outage"} 50`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "chute_") {
				t.Log(l)
			}
		}
	}
}

// TestSink_dataDirRowsFromMappedLog checks that rows queued with a data
// dir, whose values are views of the queue log's mapping, reach
// ClickHouse byte for byte, and a refused one its dead letter, while the
// log rolls, compacts and deletes the segments under them (4 KiB
// segments).
func TestSink_dataDirRowsFromMappedLog(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.mapped (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	url := &chURL{} // no ClickHouse yet: the rows stay queued
	n := startSinkNode(t, url, func(c *Config) {
		c.DataDir, c.NoSync, c.QueueLogSegmentBytes = t.TempDir(), true, 4<<10
	})
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	const rows = 300
	var want []string // the table's rows, tab-separated
	for i := range rows {
		s := strings.Repeat(string(rune('a'+i%26)), i%50)
		v := fmt.Sprintf(`{"id":%d,"s":"%s"}`, i, s)
		if i == 150 {
			v = `{"id":"not a number","s":""}`
		} else {
			want = append(want, fmt.Sprintf("%d\t%s", i, s))
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:mapped/p/%d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	q := n.mgr.lookup("ch:mapped")
	q.mu.Lock()
	mapped := 0
	for _, m := range q.msgs.all() {
		if m.region != nil {
			mapped++
		}
	}
	q.mu.Unlock()
	if mapped != rows {
		t.Fatalf("%d of %d queued values in the log's mapping, want all", mapped, rows)
	}

	url.set(ch.URL(), "default")
	waitCount(t, ch, "default.mapped", rows-1, 20*time.Second)
	if got := ch.Query(t, "SELECT id, s FROM default.mapped ORDER BY id"); got != strings.Join(want, "\n") {
		t.Fatalf("rows: got %q, want %q", got, strings.Join(want, "\n"))
	}
	var letters *clientv3.GetResponse
	waitUntil(t, 10*time.Second, "one dead letter", func() bool {
		var err error
		letters, err = cli.Get(ctx, "/q/ch:mapped/dlq/", clientv3.WithPrefix())
		return err == nil && len(letters.Kvs) == 1
	})
	var letter struct{ Key, Row string }
	if err := json.Unmarshal(letters.Kvs[0].Value, &letter); err != nil {
		t.Fatal(err)
	}
	if letter.Key != "150" || letter.Row != `{"id":"not a number","s":""}` {
		t.Fatalf("dead letter: got %+v, want key 150 and its row", letter)
	}
	// Churn until the log deletes segments the rows were in.
	for i := rows; n.mgr.qlog.Stats().Deleted == 0; i++ {
		if i == rows+3000 {
			t.Fatalf("no segment deleted: %+v", n.mgr.qlog.Stats())
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:mapped/p/%d", i), fmt.Sprintf(`{"id":%d,"s":"x"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 10*time.Second, "the queue to empty", func() bool { return n.depth("ch:mapped") == 0 })
}
