//go:build e2e

package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"chute/internal/chtest"
)

// tracedNode starts a node draining into ClickHouse whose spans go to the
// returned recorder.
func tracedNode(t *testing.T, settings *chURL) (*testNode, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	n := startNode(t, func(c *Config) {
		c.ClickHouse = settings.get
		c.RetryMin = 50 * time.Millisecond
		c.RetryMax = 200 * time.Millisecond
		c.InsertTimeout = 5 * time.Second
		c.Tracer = tp
	})
	return n, rec
}

// tracedClient is a producer whose calls carry the trace context of the
// span in their context, as a client instrumented with otelgrpc sends it.
func tracedClient(t *testing.T, n *testNode) (*clientv3.Client, trace.Tracer) {
	t.Helper()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{n.kv.ClientAddrs()[0].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{})))},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, tp.Tracer("producer")
}

// endedSpans returns the recorded spans called name.
func endedSpans(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// putTraced puts one message inside a new root span of the producer and
// returns that span's trace id.
func putTraced(t *testing.T, cli *clientv3.Client, tr trace.Tracer, key, value string) trace.TraceID {
	t.Helper()
	ctx, span := tr.Start(testCtx(t, 10*time.Second), "produce")
	defer span.End()
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatal(err)
	}
	return span.SpanContext().TraceID()
}

// TestTracing_insertContinuesThePut checks that a traced put and the
// insert of its row are one trace: the server span of the put is the child
// of the producer's span, and the batch's INSERT span the child of the put
// with the semantic-convention attributes of a ClickHouse insert.
func TestTracing_insertContinuesThePut(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64) ENGINE = MergeTree ORDER BY id")
	n, rec := tracedNode(t, &chURL{url: ch.URL(), db: "default"})
	cli, tr := tracedClient(t, n)
	traceID := putTraced(t, cli, tr, "/q/ch:events/p/1", `{"id":1}`)
	waitCount(t, ch, "default.events", 1, 10*time.Second)
	waitUntil(t, 5*time.Second, "the INSERT span", func() bool { return len(endedSpans(rec, "INSERT events")) == 1 })

	puts := endedSpans(rec, "etcdserverpb.KV/Put")
	if len(puts) != 1 || puts[0].SpanContext().TraceID() != traceID || puts[0].SpanKind() != trace.SpanKindServer {
		t.Fatalf("put spans: got %d, want 1 server span in trace %s", len(puts), traceID)
	}
	ins := endedSpans(rec, "INSERT events")[0]
	if ins.SpanContext().TraceID() != traceID || ins.Parent().SpanID() != puts[0].SpanContext().SpanID() {
		t.Fatalf("INSERT span: trace %s parent %s, want trace %s parent %s (the put)",
			ins.SpanContext().TraceID(), ins.Parent().SpanID(), traceID, puts[0].SpanContext().SpanID())
	}
	want := map[string]string{
		"db.system.name": "clickhouse", "db.namespace": "default", "db.collection.name": "events",
		"db.operation.name": "INSERT", "server.address": "127.0.0.1", "messaging.destination.name": "ch:events",
		"chute.batch.rows": "1", "chute.batch.bytes": "9", "chute.insert.attempts": "1", "chute.insert.outcome": "ok",
		"http.response.status_code": "200", "chute.batch.wait": "0", // a lone put: the rate held nothing back
	}
	for k, v := range want {
		if got := attrOf(ins, k).String(); got != v {
			t.Errorf("INSERT span %s: got %q, want %q", k, got, v)
		}
	}
	if ins.SpanKind() != trace.SpanKindClient || ins.Status().Code != codes.Ok {
		t.Errorf("INSERT span: kind %v status %v, want client and ok", ins.SpanKind(), ins.Status())
	}
	if len(ins.Events()) != 0 {
		t.Errorf("INSERT span of a first-time success has events: %v", ins.Events())
	}
}

// TestTracing_retriesShowInTheBatchSpan checks that a batch refused while
// its table is missing, then inserted, is one span holding one event per
// failed attempt, the row count and the final success; and that a batch of
// puts from two traces continues the first and links to the second.
func TestTracing_retriesShowInTheBatchSpan(t *testing.T) {
	ch := chtest.Start(t)
	settings := &chURL{} // no URL yet: both puts wait and form one batch
	n, rec := tracedNode(t, settings)
	cli, tr := tracedClient(t, n)
	first := putTraced(t, cli, tr, "/q/ch:later/p/a", `{"id":1}`)
	second := putTraced(t, cli, tr, "/q/ch:later/p/b", `{"id":2}`)
	settings.set(ch.URL(), "default") // the table does not exist yet: code 60, retried
	waitUntil(t, 10*time.Second, "two failed inserts", func() bool {
		return n.mgr.Status().Queues[0].LastInsertError != nil && n.mgr.inserts != (insertMetrics{}) && retriesOf(rec) >= 2
	})
	ch.Exec(t, "CREATE TABLE default.later (id UInt64) ENGINE = MergeTree ORDER BY id")
	waitCount(t, ch, "default.later", 2, 10*time.Second)
	waitUntil(t, 5*time.Second, "the INSERT span", func() bool { return len(endedSpans(rec, "INSERT later")) == 1 })

	ins := endedSpans(rec, "INSERT later")[0]
	if ins.SpanContext().TraceID() != first {
		t.Errorf("INSERT span in trace %s, want the first put's %s", ins.SpanContext().TraceID(), first)
	}
	if len(ins.Links()) != 1 || ins.Links()[0].SpanContext.TraceID() != second {
		t.Fatalf("INSERT span links: got %v, want one to trace %s", ins.Links(), second)
	}
	if w := ins.Links()[0].Attributes; len(w) != 1 || w[0].Key != "chute.queue.wait" || w[0].Value.AsFloat64() <= 0 {
		t.Errorf("link attributes: got %v, want chute.queue.wait > 0", w)
	}
	attempts := attrOf(ins, "chute.insert.attempts").AsInt64()
	var retries int64
	for _, e := range ins.Events() {
		if e.Name != "clickhouse.retry" {
			t.Errorf("unexpected event %q", e.Name)
			continue
		}
		retries++
		for _, kv := range e.Attributes {
			if kv.Key == "error.type" && kv.Value.AsString() != "60" {
				t.Errorf("retry event error.type: got %q, want 60 (unknown table)", kv.Value.AsString())
			}
		}
	}
	if retries < 2 || attempts != retries+1 || attrOf(ins, "chute.insert.retries").AsInt64() != retries {
		t.Errorf("attempts %d, retry events %d, chute.insert.retries %d: want attempts = events + 1 >= 3",
			attempts, retries, attrOf(ins, "chute.insert.retries").AsInt64())
	}
	if attrOf(ins, "chute.batch.rows").AsInt64() != 2 || ins.Status().Code != codes.Ok {
		t.Errorf("rows %d status %v, want 2 and ok", attrOf(ins, "chute.batch.rows").AsInt64(), ins.Status())
	}
	le := n.mgr.Status().Queues[0].LastInsertError
	if le == nil || le.Code != 60 || le.Table != "`default`.`later`" || le.Class != "config" {
		t.Errorf("last insert error: got %+v, want code 60 on `default`.`later`", le)
	}
}

// retriesOf counts the retry events of INSERT spans still open.
func retriesOf(rec *tracetest.SpanRecorder) int {
	n := 0
	for _, s := range rec.Started() {
		if ro, ok := s.(sdktrace.ReadOnlySpan); ok && ro.Name() == "INSERT later" {
			for _, e := range ro.Events() {
				if e.Name == "clickhouse.retry" {
					n++
				}
			}
		}
	}
	return n
}

// TestTracing_refusedRowsShowBisection checks that a batch with a row
// ClickHouse refuses ends in error with its dead letter counted and the
// bisection steps as events.
func TestTracing_refusedRowsShowBisection(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.typed (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	settings := &chURL{}
	n, rec := tracedNode(t, settings)
	cli, tr := tracedClient(t, n)
	for i := range 4 {
		v := fmt.Sprintf(`{"id":%d,"n":%d}`, i, i)
		if i == 2 {
			v = `{"id":2,"n":"x"}`
		}
		putTraced(t, cli, tr, fmt.Sprintf("/q/ch:typed/p/%d", i), v)
	}
	settings.set(ch.URL(), "default")
	waitCount(t, ch, "default.typed", 3, 10*time.Second)
	waitUntil(t, 5*time.Second, "the INSERT span", func() bool { return len(endedSpans(rec, "INSERT typed")) == 1 })
	ins := endedSpans(rec, "INSERT typed")[0]
	bisects := 0
	for _, e := range ins.Events() {
		if e.Name == "clickhouse.bisect" {
			bisects++
		}
	}
	if ins.Status().Code != codes.Error || attrOf(ins, "chute.batch.dead_letters").AsInt64() != 1 || bisects == 0 ||
		attrOf(ins, "error.type").AsString() != "dead_letters" || ins.Events()[0].Name != "clickhouse.refused" {
		t.Errorf("INSERT span: status %v, dead letters %d, error.type %q, %d bisect events, events %v; want error, 1, dead_letters, > 0",
			ins.Status(), attrOf(ins, "chute.batch.dead_letters").AsInt64(), attrOf(ins, "error.type").AsString(), bisects, ins.Events())
	}
}
