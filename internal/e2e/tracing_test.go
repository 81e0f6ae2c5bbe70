//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"chute/internal/chtest"
	"chute/internal/nodeprobe"
	"chute/internal/otlptest"
	"chute/internal/testutil"
)

// traceTimeout bounds the wait for spans to reach the receiver: the nodes
// export every 100ms.
const traceTimeout = 20 * time.Second

// otlpEnv is the environment that makes a node export its spans to r.
func otlpEnv(r *otlptest.Receiver, protocol string) []string {
	env := []string{"OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol, "OTEL_BSP_SCHEDULE_DELAY=100"}
	if protocol == "grpc" {
		return append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+r.GRPCEndpoint())
	}
	return append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+r.HTTPEndpoint())
}

// spanNamed returns the span of spans called name, or false.
func spanNamed(spans []otlptest.Span, name string) (otlptest.Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return otlptest.Span{}, false
}

// TestTracing_putForwardInsertOneTrace: a clientv3 producer instrumented with otelgrpc puts on node a while the
// dispatcher of the queue is node c. The OTLP receiver gets one trace
// holding the producer's call, the put on a, the forward on a and on c,
// and c's clickhouse.insert span with the table, row count and status,
// each the child of the one before.
func TestTracing_putForwardInsertOneTrace(t *testing.T) {
	t.Parallel()
	r := otlptest.Start(t)
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64) ENGINE = MergeTree ORDER BY id")
	cl := newCluster(t)
	cl.env = otlpEnv(r, "grpc")
	a, _, c := cl.startThree(chFlags(ch)...)

	// c produces first, so c dispatches the queue.
	ctlOK(t, c, "", "put", "/q/ch:events/p/first", `{"id":1}`)
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.events", "1")
	if rec, err := ctlRecord(lookTool(t, "etcdctl"), a, "ch:events"); err != nil || rec.member != memberID(t, c) {
		t.Fatalf("dispatcher of ch:events seen from a: %+v, %v; want c (%x)", rec, err, memberID(t, c))
	}

	client := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(client))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{a.ClientAddr}, DialTimeout: rpcTimeout, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{})))},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := rpcCtx()
	defer cancel()
	ctx, root := tp.Tracer("producer").Start(ctx, "produce")
	if _, err := cli.Put(ctx, "/q/ch:events/p/traced", `{"id":2}`); err != nil {
		t.Fatal(err)
	}
	root.End()
	traceID := root.SpanContext().TraceID().String()
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.events", "2")

	names := []string{"etcdserverpb.KV/Put", "chute.forward ch:events", "chute.enqueue ch:events", "INSERT events"}
	r.WaitFor(t, traceTimeout, "the put, both sides of the forward and the insert in the producer's trace", func([]otlptest.Span) bool {
		spans := r.Trace(traceID)
		for _, n := range names {
			if _, ok := spanNamed(spans, n); !ok {
				return false
			}
		}
		return true
	})
	spans := r.Trace(traceID)
	var call string
	for _, s := range client.Ended() {
		if s.Name() == "etcdserverpb.KV/Put" {
			call = s.SpanContext().SpanID().String()
		}
	}
	want := []struct {
		name, kind, node string
	}{
		{names[0], "server", a.Name}, {names[1], "producer", a.Name}, {names[2], "consumer", c.Name}, {names[3], "client", c.Name},
	}
	parent := call
	for _, w := range want {
		s, _ := spanNamed(spans, w.name)
		if s.Kind != w.kind || s.Resource["service.instance.id"] != w.node || s.Resource["service.name"] != "chute" || s.ParentSpanID != parent {
			t.Errorf("span %s: got kind %s on %v, parent %s; want %s on %s, parent %s", s.Name, s.Kind, s.Resource["service.instance.id"], s.ParentSpanID, w.kind, w.node, parent)
		}
		parent = s.SpanID
	}
	ins, _ := spanNamed(spans, "INSERT events")
	for k, v := range map[string]any{
		"db.system.name": "clickhouse", "db.namespace": "default", "db.collection.name": "events", "db.operation.name": "INSERT",
		"chute.batch.rows": int64(1), "chute.insert.outcome": "ok", "http.response.status_code": int64(200),
	} {
		if got := ins.Attr(k); got != v {
			t.Errorf("INSERT span %s: got %v (%T), want %v", k, got, got, v)
		}
	}
	if ins.StatusCode != "ok" {
		t.Errorf("INSERT span status %s, want ok", ins.StatusCode)
	}
}

// TestTracing_retriesOverHTTP, exported over OTLP/HTTP: a batch whose table is missing fails, is retried, and
// lands once the table exists; its one INSERT span holds an event per
// failed attempt and ends ok with the attempt count.
func TestTracing_retriesOverHTTP(t *testing.T) {
	t.Parallel()
	r := otlptest.Start(t)
	ch := chtest.Start(t)
	p := StartChuteEnv(t, otlpEnv(r, "http/protobuf"), append(chFlags(ch), "--name", "traced")...)
	ctlOK(t, p, "", "put", "/q/ch:later/p/1", `{"id":1}`)
	waitLogLine(t, p, "insert failed", "queue=ch:later", "code=60")
	testutil.Eventually(t, chLogTimeout, "a second failed attempt", func() error {
		if n := metricSum(t, p, "chute_clickhouse_retries_total", `table="default.later"`); n < 2 {
			return fmt.Errorf("%v retries", n)
		}
		return nil
	})
	ch.Exec(t, "CREATE TABLE default.later (id UInt64) ENGINE = MergeTree ORDER BY id")
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.later", "1")
	spans := r.WaitFor(t, traceTimeout, "the INSERT span of ch:later", func(spans []otlptest.Span) bool {
		_, ok := spanNamed(spans, "INSERT later")
		return ok
	})
	ins, _ := spanNamed(spans, "INSERT later")
	retries := 0
	for _, e := range ins.Events {
		if e.Name == "clickhouse.retry" && e.Attrs["error.type"] == "60" {
			retries++
		}
	}
	attempts, _ := ins.Attr("chute.insert.attempts").(int64)
	if retries < 1 || attempts != int64(retries)+1 || ins.StatusCode != "ok" {
		t.Errorf("INSERT span: %d retry events with error.type 60, %d attempts, status %s; want >= 1, events+1, ok\n%s", retries, attempts, ins.StatusCode, ins)
	}
	put, ok := spanNamed(spans, "etcdserverpb.KV/Put")
	if !ok || put.TraceID != ins.TraceID || ins.ParentSpanID != put.SpanID {
		t.Errorf("INSERT span is not the child of the put: put %v, insert %s", put, ins)
	}
	if put.Resource["service.instance.id"] != "traced" || put.Resource["service.version"] == nil {
		t.Errorf("resource: got %v, want service.instance.id=traced and a service.version", put.Resource)
	}
}

// metricSum adds up the samples of metric on p's /metrics whose labels
// match every one of labels (label="value").
func metricSum(t testing.TB, p *Proc, metric string, labels ...string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	m, err := nodeprobe.ReadMetrics(ctx, nil, p.MetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := m.Sum(metric, labels...)
	return sum
}

// TestTracing_collectorDown runs a node whose OTLP collector is down. The
// exporter's errors reach the node's log as its own key=value lines, not
// in the standard library's log format, and SIGTERM stops the node at
// once, exit 0: the spans it cannot flush cost a warning, not the whole
// shutdown deadline.
func TestTracing_collectorDown(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			dead := testutil.FreeAddr(t) // nothing listens there
			p := StartChuteEnv(t, []string{"OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
				"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + dead, "OTEL_BSP_SCHEDULE_DELAY=100"})
			ctlOK(t, p, "", "put", "k", "v")
			if protocol == "http/protobuf" { // a refused connection fails the export at once
				deadline := time.Now().Add(traceTimeout)
				for !strings.Contains(p.Log(), `msg="telemetry export failed" component=opentelemetry`) {
					if time.Now().After(deadline) {
						t.Fatalf("no export error in the node's log within %v:\n%s", traceTimeout, p.Log())
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			start := time.Now()
			if err := p.Stop(); err != nil {
				t.Fatalf("stop: %v\n%s", err, p.Log())
			}
			if took := time.Since(start); took > 6*time.Second {
				t.Fatalf("SIGTERM took %v with the collector down, want a few seconds", took)
			}
			// The standard library's log format: "2026/12/01 13:50:02 traces export: ...".
			stdlogLine := regexp.MustCompile(`^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} `)
			for line := range strings.SplitSeq(p.Log(), "\n") {
				if stdlogLine.MatchString(line) {
					t.Fatalf("a line in the standard library's log format: %q", line)
				}
			}
		})
	}
}
