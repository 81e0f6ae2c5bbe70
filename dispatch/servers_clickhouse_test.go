//go:build e2e

package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"chute/internal/chtest"
	chuteotel "chute/otel"
	"chute/sink"
)

// TestSink_queueInsertSettings checks a queue's own ClickHouse settings
// on 18.16: with "settings": {"input_format_skip_unknown_fields": 1} a row
// with a field the table lacks goes in; the same row to a queue without
// the setting is refused (117) and becomes a dead letter.
func TestSink_queueInsertSettings(t *testing.T) {
	ch := chtest.Start(t)
	for _, table := range []string{"loose", "strict"} {
		ch.Exec(t, "CREATE TABLE default."+table+" (id UInt64, msg String) ENGINE = MergeTree ORDER BY id")
	}
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:loose"), `{"settings":{"input_format_skip_unknown_fields":1}}`); err != nil {
		t.Fatal(err)
	}
	row := `{"id":7,"msg":"x","extra":1}`
	for _, q := range []string{"ch:loose", "ch:strict"} {
		if _, err := cli.Put(ctx, "/q/"+q+"/p/r", row); err != nil {
			t.Fatal(err)
		}
	}
	waitCount(t, ch, "default.loose", 1, 10*time.Second)
	if got := ch.Query(t, "SELECT id, msg FROM default.loose"); got != "7\tx" {
		t.Fatalf("default.loose: got %q, want 7 x", got)
	}
	var letters *clientv3.GetResponse
	waitUntil(t, 10*time.Second, "a dead letter of ch:strict", func() bool {
		var err error
		letters, err = cli.Get(ctx, "/q/ch:strict/dlq/", clientv3.WithPrefix())
		return err == nil && len(letters.Kvs) == 1
	})
	var letter struct{ Code int }
	if err := json.Unmarshal(letters.Kvs[0].Value, &letter); err != nil || letter.Code != 117 {
		t.Fatalf("dead letter %s: got code %d (%v), want 117", letters.Kvs[0].Value, letter.Code, err)
	}
	if c := ch.Count(t, "default.strict"); c != 0 {
		t.Fatalf("default.strict: got %d rows, want 0", c)
	}
}

// TestSink_threeServersFailover drives puts through a dispatcher into
// three 18.16 servers (gzip bodies) and kills one under load: no batch
// waits (every insert span ends well within one backoff: the batch went
// to another server at once), every acknowledged row lands exactly once
// across the three, the status shows the killed server down; restarted,
// it takes batches again once its down period ends.
func TestSink_threeServersFailover(t *testing.T) {
	const (
		backoff = 3 * time.Second // retry pause and down period: a batch that waited one shows
		rowsPer = 10              // per txn
	)
	var chs [3]*chtest.Server
	var urls []string
	for i := range chs {
		chs[i] = chtest.Start(t)
		chs[i].Exec(t, "CREATE TABLE default.ev (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
		urls = append(urls, chs[i].URL())
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	providers, err := chuteotel.New(chuteotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	settings := &chURL{url: strings.Join(urls, ","), db: "default", compression: sink.CompressionGzip}
	n := startSinkNode(t, settings, func(c *Config) {
		c.RetryMin, c.RetryMax = backoff, backoff
		c.ServerDownMin, c.ServerDownMax = backoff, 2*backoff
		c.Tracer = tp
		c.Meter = providers.MeterProvider()
	})
	cli := n.client(t)
	ctx := testCtx(t, 90*time.Second)
	// A batch every interval, so that every server takes some soon: not
	// held to the default 2 inserts a second.
	if _, err := cli.Put(ctx, SettingsKey("ch:ev"), `{"max_inserts_per_second":1000}`); err != nil {
		t.Fatal(err)
	}
	killed := chs[1].HTTPAddr()
	serverState := func(addr string) sink.ServerState {
		for _, st := range n.mgr.Status().ClickHouseServers {
			if st.Server == addr {
				return st
			}
		}
		t.Fatalf("status shows no server %s", addr)
		return sink.ServerState{}
	}
	acked := 0
	putTxn := func() {
		t.Helper()
		ops := make([]clientv3.Op, 0, rowsPer)
		for range rowsPer {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:ev/p/%d", acked+len(ops)), fmt.Sprintf(`{"id":%d,"s":"row %d"}`, acked+len(ops), acked+len(ops))))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		acked += rowsPer
		time.Sleep(5 * time.Millisecond) // a steady load: a batch every interval
	}
	for range 50 {
		putTxn()
	}
	waitUntil(t, 10*time.Second, "every server to take batches", func() bool {
		for _, ch := range chs {
			if ch.Count(t, "default.ev") == 0 {
				return false
			}
		}
		return true
	})

	chs[1].Kill(t)
	sawDown := false
	for i := 0; i < 100 && !sawDown; i++ { // under load until the status shows it down
		putTxn()
		st := serverState(killed)
		sawDown = !st.Up && st.Failures >= 1 && !st.DownUntil.IsZero()
	}
	if !sawDown {
		t.Fatalf("status of the killed server: got %+v, want down", serverState(killed))
	}
	for range 50 {
		putTxn()
	}
	chs[1].Restart(t)
	base := chs[1].Count(t, "default.ev")
	grew := false
	for deadline := time.Now().Add(4 * backoff); time.Now().Before(deadline) && !grew; {
		putTxn()
		grew = chs[1].Count(t, "default.ev") > base
	}
	if !grew {
		t.Fatalf("the restarted server took no batch within %v: status %+v", 4*backoff, serverState(killed))
	}

	sum := func() int {
		total := 0
		for _, ch := range chs {
			total += ch.Count(t, "default.ev")
		}
		return total
	}
	waitUntil(t, 20*time.Second, fmt.Sprintf("%d acknowledged rows across the three", acked), func() bool { return sum() >= acked })
	if got := sum(); got != acked {
		t.Fatalf("rows across the three: got %d, want %d", got, acked)
	}
	ids := make(map[string]int)
	for _, ch := range chs {
		for _, id := range strings.Fields(ch.Query(t, "SELECT id FROM default.ev")) {
			ids[id]++
		}
	}
	for id, c := range ids {
		if c != 1 {
			t.Errorf("id %s: stored %d times, want once", id, c)
		}
	}
	if len(ids) != acked {
		t.Fatalf("distinct ids: got %d, want %d", len(ids), acked)
	}

	failovers := 0
	for _, s := range endedSpans(rec, "INSERT ev") {
		if d := s.EndTime().Sub(s.StartTime()); d >= backoff/2 {
			t.Errorf("a batch took %v, want well under one backoff (%v): it waited instead of failing over", d, backoff)
		}
		for _, e := range s.Events() {
			if e.Name == "clickhouse.failover" {
				failovers++
			}
		}
	}
	if failovers == 0 {
		t.Errorf("no span shows a failover, want the killed server's batches sent to another")
	}
	for _, st := range n.mgr.Status().ClickHouseServers {
		if st.Batches["ok"] == 0 || st.WireBytes == 0 {
			t.Errorf("server %s: got %+v, want batches and bytes sent", st.Server, st)
		}
	}
	rw := httptest.NewRecorder()
	providers.MetricsHandler().ServeHTTP(rw, httptest.NewRequest("GET", "/metrics", nil))
	body := rw.Body.String()
	for _, want := range []string{
		`chute_clickhouse_server_up{server="` + chs[0].HTTPAddr() + `"} 1`,
		`chute_clickhouse_server_batches_total{outcome="transient",server="` + killed + `"}`,
		`chute_clickhouse_server_batches_total{outcome="ok",server="` + killed + `"}`,
		`chute_clickhouse_server_sent_bytes_total{server="` + killed + `"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		for l := range strings.SplitSeq(body, "\n") {
			if strings.HasPrefix(l, "chute_clickhouse_server") {
				t.Log(l)
			}
		}
	}
}
