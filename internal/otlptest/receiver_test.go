package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const testService = "otlptest-test"

// exporterFor builds the SDK exporter the way chute's otel package would.
type exporterFor func(ctx context.Context, r *Receiver) (sdktrace.SpanExporter, error)

var exporters = []struct {
	name string
	new  exporterFor
}{
	{"grpc", func(ctx context.Context, r *Receiver) (sdktrace.SpanExporter, error) {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(r.GRPCEndpoint()), otlptracegrpc.WithInsecure())
	}},
	{"grpc_gzip", func(ctx context.Context, r *Receiver) (sdktrace.SpanExporter, error) {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(r.GRPCEndpoint()), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithCompressor("gzip"))
	}},
	{"http", func(ctx context.Context, r *Receiver) (sdktrace.SpanExporter, error) {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(r.HTTPEndpoint()+"/v1/traces"))
	}},
	{"http_gzip", func(ctx context.Context, r *Receiver) (sdktrace.SpanExporter, error) {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(r.HTTPEndpoint()+"/v1/traces"),
			otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}},
	{"http_endpoint_insecure", func(ctx context.Context, r *Receiver) (sdktrace.SpanExporter, error) {
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(strings.TrimPrefix(r.HTTPEndpoint(), "http://")),
			otlptracehttp.WithInsecure())
	}},
}

// newProvider is an SDK TracerProvider batching to exp, shut down when the
// test ends (before the receiver stops).
func newProvider(t *testing.T, r *Receiver, exp exporterFor) *sdktrace.TracerProvider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := exp(ctx, r)
	if err != nil {
		t.Fatalf("new exporter: %v", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(e),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", testService))),
	)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			t.Errorf("provider shutdown: %v", err)
		}
	})
	return tp
}

func flush(t *testing.T, tp *sdktrace.TracerProvider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}
}

// emitted is what emit sent, to compare with what arrived.
type emitted struct {
	parent, child, other trace.SpanContext
	before, after        time.Time
}

// emit sends a server span "parent" with a client child "child" that has
// an event and a link to a separate root span "other".
func emit(tp *sdktrace.TracerProvider, secret string) emitted {
	var e emitted
	e.before = time.Now()
	tr := tp.Tracer("otlptest/test", trace.WithInstrumentationVersion("1.2.3"))

	_, other := tr.Start(context.Background(), "other")
	e.other = other.SpanContext()
	other.End()

	ctx, parent := tr.Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.route", "/x"),
			attribute.Int("n", 7),
			attribute.Float64("ratio", 0.5),
			attribute.Bool("ok", true),
			attribute.StringSlice("tags", []string{"a", "b"}),
			attribute.Int64Slice("ids", []int64{1, 2}),
		))
	e.parent = parent.SpanContext()
	_, child := tr.Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system", "clickhouse"), attribute.String("secret", secret)),
		trace.WithLinks(trace.Link{SpanContext: e.other, Attributes: []attribute.KeyValue{attribute.String("why", "batch")}}))
	e.child = child.SpanContext()
	child.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 2)))
	child.SetStatus(otelcodes.Error, "boom")
	child.End()
	parent.SetStatus(otelcodes.Ok, "")
	parent.End()
	e.after = time.Now()
	return e
}

func byName(t *testing.T, spans []Span, name string) Span {
	t.Helper()
	var found []Span
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("spans named %q: got %d, want 1; received:\n%v", name, len(found), spans)
	}
	return found[0]
}

func TestReceiver_exporters(t *testing.T) {
	t.Parallel()
	for _, tc := range exporters {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Start(t)
			tp := newProvider(t, r, tc.new)
			e := emit(tp, "s3cret")
			flush(t, tp)

			spans := r.Spans()
			if len(spans) != 3 {
				t.Fatalf("Spans: got %d, want 3:\n%v", len(spans), spans)
			}
			if got := r.Requests(); got < 1 {
				t.Errorf("Requests: got %d, want at least 1", got)
			}
			parent, child, other := byName(t, spans, "parent"), byName(t, spans, "child"), byName(t, spans, "other")

			// Ids and the parent/child relation.
			for _, c := range []struct {
				s    Span
				want trace.SpanContext
			}{{parent, e.parent}, {child, e.child}, {other, e.other}} {
				if c.s.TraceID != c.want.TraceID().String() || c.s.SpanID != c.want.SpanID().String() {
					t.Errorf("%s: got trace %s span %s, want %s %s", c.s.Name, c.s.TraceID, c.s.SpanID,
						c.want.TraceID(), c.want.SpanID())
				}
			}
			if parent.ParentSpanID != "" || other.ParentSpanID != "" {
				t.Errorf("root parents: got %q and %q, want empty", parent.ParentSpanID, other.ParentSpanID)
			}
			if child.ParentSpanID != parent.SpanID {
				t.Errorf("child.ParentSpanID: got %q, want %q", child.ParentSpanID, parent.SpanID)
			}
			if child.TraceID != parent.TraceID || other.TraceID == parent.TraceID {
				t.Errorf("trace ids: parent %s child %s other %s, want child = parent != other",
					parent.TraceID, child.TraceID, other.TraceID)
			}

			// Kinds, status, scope, resource, times.
			for _, c := range []struct {
				s                  Span
				kind, code, msgTxt string
			}{{parent, "server", "ok", ""}, {child, "client", "error", "boom"}, {other, "internal", "unset", ""}} {
				if c.s.Kind != c.kind || c.s.StatusCode != c.code || c.s.StatusMessage != c.msgTxt {
					t.Errorf("%s: got kind %q status %q %q, want %q %q %q", c.s.Name, c.s.Kind,
						c.s.StatusCode, c.s.StatusMessage, c.kind, c.code, c.msgTxt)
				}
				if c.s.Scope != "otlptest/test" || c.s.ScopeVersion != "1.2.3" {
					t.Errorf("%s: got scope %q %q, want otlptest/test 1.2.3", c.s.Name, c.s.Scope, c.s.ScopeVersion)
				}
				if got := c.s.Resource["service.name"]; got != testService {
					t.Errorf("%s: got service.name %v, want %q", c.s.Name, got, testService)
				}
				if c.s.Start.Before(e.before.Add(-time.Millisecond)) || c.s.End.After(e.after.Add(time.Millisecond)) ||
					c.s.End.Before(c.s.Start) {
					t.Errorf("%s: got %v .. %v, want within %v .. %v", c.s.Name, c.s.Start, c.s.End, e.before, e.after)
				}
			}

			// Attributes of every type.
			wantAttrs := map[string]any{
				"http.route": "/x",
				"n":          int64(7),
				"ratio":      0.5,
				"ok":         true,
				"tags":       []any{"a", "b"},
				"ids":        []any{int64(1), int64(2)},
			}
			if !reflect.DeepEqual(parent.Attrs, wantAttrs) {
				t.Errorf("parent.Attrs: got %#v, want %#v", parent.Attrs, wantAttrs)
			}
			if got := child.Attr("db.system"); got != "clickhouse" {
				t.Errorf(`child.Attr("db.system"): got %v, want "clickhouse"`, got)
			}
			if got := child.Attr("absent"); got != nil {
				t.Errorf(`child.Attr("absent"): got %v, want nil`, got)
			}

			// Event and link.
			ev, ok := child.Event("retry")
			if !ok || len(child.Events) != 1 {
				t.Fatalf("child.Events: got %+v, want one named retry", child.Events)
			}
			if want := map[string]any{"attempt": int64(2)}; !reflect.DeepEqual(ev.Attrs, want) {
				t.Errorf("event attrs: got %v, want %v", ev.Attrs, want)
			}
			if ev.Time.Before(child.Start) || ev.Time.After(child.End) {
				t.Errorf("event time: got %v, want within %v .. %v", ev.Time, child.Start, child.End)
			}
			wantLinks := []Link{{TraceID: other.TraceID, SpanID: other.SpanID, Attrs: map[string]any{"why": "batch"}}}
			if !reflect.DeepEqual(child.Links, wantLinks) {
				t.Errorf("child.Links: got %+v, want %+v", child.Links, wantLinks)
			}

			// Trace groups by trace id, in either case.
			if got := r.Trace(strings.ToUpper(parent.TraceID)); len(got) != 2 {
				t.Errorf("Trace(parent): got %d spans, want 2: %v", len(got), got)
			}
			if got := r.Trace(other.TraceID); len(got) != 1 || got[0].Name != "other" {
				t.Errorf("Trace(other): got %v, want [other]", got)
			}
			if got := r.Trace("00000000000000000000000000000001"); got != nil {
				t.Errorf("Trace(unknown): got %v, want nil", got)
			}

			if !r.Contains("s3cret") {
				t.Error(`Contains("s3cret"): got false, want true`)
			}
			if r.Contains("never-sent") {
				t.Error(`Contains("never-sent"): got true, want false`)
			}
		})
	}
}

func TestReceiver_Contains_protojson(t *testing.T) {
	t.Parallel()
	r := Start(t)
	req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: bytes.Repeat([]byte{0xab}, 16),
			SpanId:  bytes.Repeat([]byte{0xcd}, 8),
			Name:    "op",
			Kind:    tracepb.Span_SPAN_KIND_CONSUMER,
		}}}},
	}}}
	post(t, r, req, "")
	// Only in the protojson form: the enum's name and the field name.
	for _, s := range []string{"SPAN_KIND_CONSUMER", `"traceId"`} {
		if !r.Contains(s) {
			t.Errorf("Contains(%q): got false, want true", s)
		}
	}
	if r.Contains("SPAN_KIND_SERVER") {
		t.Error(`Contains("SPAN_KIND_SERVER"): got true, want false`)
	}
}

// post sends req as OTLP/HTTP protobuf, gzipped when encoding is "gzip",
// and fails unless the answer is 200 with an empty response message.
func post(t *testing.T, r *Receiver, req *collectortrace.ExportTraceServiceRequest, encoding string) {
	t.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if encoding == "gzip" {
		body = gzipBytes(t, body)
	}
	code, header, respBody := do(t, r, http.MethodPost, "/v1/traces", contentTypeProtobuf, encoding, body)
	if code != http.StatusOK || header.Get("Content-Type") != contentTypeProtobuf {
		t.Fatalf("POST /v1/traces: got %d %q, want 200 %q", code, header.Get("Content-Type"), contentTypeProtobuf)
	}
	var resp collectortrace.ExportTraceServiceResponse
	if err := proto.Unmarshal(respBody, &resp); err != nil || resp.PartialSuccess != nil {
		t.Fatalf("response: got %v (err %v), want an empty ExportTraceServiceResponse", &resp, err)
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func do(t *testing.T, r *Receiver, method, path, contentType, encoding string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.HTTPEndpoint()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, b
}

func TestReceiver_HTTP_gzip(t *testing.T) {
	t.Parallel()
	r := Start(t)
	req := oneSpanRequest("zipped")
	post(t, r, req, "gzip")
	post(t, r, req, "identity")
	if got := r.Requests(); got != 2 {
		t.Fatalf("Requests: got %d, want 2", got)
	}
	spans := r.Spans()
	if len(spans) != 2 || spans[0].Name != "zipped" || spans[1].Name != "zipped" {
		t.Fatalf("Spans: got %v, want two named zipped", spans)
	}
}

func oneSpanRequest(name string) *collectortrace.ExportTraceServiceRequest {
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: bytes.Repeat([]byte{1}, 16),
			SpanId:  bytes.Repeat([]byte{2}, 8),
			Name:    name,
		}}}},
	}}}
}

func TestReceiver_HTTP_refuses(t *testing.T) {
	t.Parallel()
	good, err := proto.Marshal(oneSpanRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                          string
		method, path, ctype, encoding string
		body                          []byte
		wantStatus                    int
		wantStatusMessage             string // in the google.rpc.Status body; empty: no such body
	}{
		{"get", http.MethodGet, "/v1/traces", contentTypeProtobuf, "", nil, http.StatusMethodNotAllowed, ""},
		{"other path", http.MethodPost, "/v1/logs", contentTypeProtobuf, "", good, http.StatusNotFound, ""},
		{"json", http.MethodPost, "/v1/traces", "application/json", "", []byte(`{}`), http.StatusUnsupportedMediaType, "application/json"},
		{"no content type", http.MethodPost, "/v1/traces", "", "", good, http.StatusUnsupportedMediaType, "Content-Type"},
		{"deflate", http.MethodPost, "/v1/traces", contentTypeProtobuf, "deflate", good, http.StatusUnsupportedMediaType, "deflate"},
		{"not gzip", http.MethodPost, "/v1/traces", contentTypeProtobuf, "gzip", good, http.StatusBadRequest, "gzip"},
		{"not protobuf", http.MethodPost, "/v1/traces", contentTypeProtobuf, "", []byte("\xff\xff\xff"), http.StatusBadRequest, "decode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Start(t)
			code, header, body := do(t, r, tc.method, tc.path, tc.ctype, tc.encoding, tc.body)
			if code != tc.wantStatus {
				t.Fatalf("status: got %d, want %d (body %q)", code, tc.wantStatus, body)
			}
			if tc.wantStatusMessage != "" {
				st := status.New(codes.OK, "").Proto() // a google.rpc.Status to decode into
				if ct := header.Get("Content-Type"); ct != contentTypeProtobuf {
					t.Errorf("Content-Type: got %q, want %q", ct, contentTypeProtobuf)
				}
				if err := proto.Unmarshal(body, st); err != nil || !strings.Contains(st.GetMessage(), tc.wantStatusMessage) {
					t.Errorf("status body: got %v (err %v), want a message with %q", st, err, tc.wantStatusMessage)
				}
			}
			if got := r.Requests(); got != 0 {
				t.Errorf("Requests: got %d, want 0", got)
			}
			if got := r.Spans(); len(got) != 0 {
				t.Errorf("Spans: got %v, want none", got)
			}
		})
	}
}

// fatalTB records Fatalf instead of failing the test.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func TestReceiver_WaitFor_timeout(t *testing.T) {
	t.Parallel()
	r := Start(t)
	post(t, r, oneSpanRequest("only-span"), "")

	f := &fatalTB{TB: t}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		r.WaitFor(f, 100*time.Millisecond, "a span named never", func(s []Span) bool { return false })
	}()
	<-done
	if took := time.Since(start); took < 100*time.Millisecond || took > 5*time.Second {
		t.Errorf("WaitFor took %v, want about 100ms", took)
	}
	f.mu.Lock()
	msg := f.msg
	f.mu.Unlock()
	for _, want := range []string{"a span named never", `"only-span"`, "1 spans in 1 requests"} {
		if !strings.Contains(msg, want) {
			t.Errorf("WaitFor failure: got %q, want it to mention %q", msg, want)
		}
	}
}

// TestReceiver_WaitFor_concurrent exports from several providers over
// both protocols while WaitFor, Spans and Contains read.
func TestReceiver_WaitFor_concurrent(t *testing.T) {
	t.Parallel()
	r := Start(t)
	const perExporter = 20
	var wg sync.WaitGroup
	for _, tc := range exporters {
		tp := newProvider(t, r, tc.new)
		wg.Go(func() {
			tr := tp.Tracer("concurrent")
			for i := range perExporter {
				_, s := tr.Start(context.Background(), tc.name, trace.WithAttributes(attribute.Int("i", i)))
				s.End()
				if i%5 == 0 {
					tp.ForceFlush(context.Background())
				}
			}
			tp.ForceFlush(context.Background())
		})
	}
	wg.Go(func() {
		for range 20 {
			r.Contains("nothing")
			r.Trace("00")
			time.Sleep(time.Millisecond)
		}
	})
	want := perExporter * len(exporters)
	spans := r.WaitFor(t, 10*time.Second, fmt.Sprintf("%d spans", want), func(s []Span) bool { return len(s) == want })
	wg.Wait()
	for _, tc := range exporters {
		seen := map[int64]bool{}
		for _, s := range spans {
			if s.Name == tc.name {
				seen[s.Attr("i").(int64)] = true
			}
		}
		if len(seen) != perExporter {
			t.Errorf("%s: got %d distinct spans, want %d", tc.name, len(seen), perExporter)
		}
	}
}

func TestStart_cleanupStops(t *testing.T) {
	t.Parallel()
	var grpcAddr, httpAddr string
	t.Run("receiver", func(t *testing.T) {
		r := Start(t)
		grpcAddr, httpAddr = r.GRPCEndpoint(), strings.TrimPrefix(r.HTTPEndpoint(), "http://")
		for _, a := range []string{grpcAddr, httpAddr} {
			if !strings.HasPrefix(a, "127.0.0.1:") {
				t.Errorf("endpoint %q: want 127.0.0.1:port", a)
			}
		}
		if !strings.HasPrefix(r.HTTPEndpoint(), "http://127.0.0.1:") {
			t.Errorf("HTTPEndpoint: got %q, want http://127.0.0.1:port", r.HTTPEndpoint())
		}
		post(t, r, oneSpanRequest("x"), "")
	})
	for _, a := range []string{grpcAddr, httpAddr} {
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err == nil {
			c.Close()
			t.Errorf("dial %s after cleanup: got a connection, want refused", a)
		}
	}
}

func TestSpans_deepCopy(t *testing.T) {
	t.Parallel()
	r := Start(t)
	req := oneSpanRequest("x")
	sp := req.ResourceSpans[0].ScopeSpans[0].Spans[0]
	sp.Attributes = []*commonpb.KeyValue{{Key: "list", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{
		ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{{Value: &commonpb.AnyValue_StringValue{StringValue: "a"}}}}}}}}
	sp.Events = []*tracepb.Span_Event{{Name: "e", Attributes: []*commonpb.KeyValue{{Key: "k", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}}}}}
	post(t, r, req, "")

	got := r.Spans()
	got[0].Attrs["list"].([]any)[0] = "changed"
	got[0].Attrs["new"] = 1
	got[0].Events[0].Attrs["k"] = false
	got[0].Name = "changed"

	again := r.Spans()[0]
	if again.Name != "x" || again.Attrs["list"].([]any)[0] != "a" || len(again.Attrs) != 1 || again.Events[0].Attrs["k"] != true {
		t.Fatalf("Spans after changing a copy: got %v, want the original", again)
	}
}

func TestFlatten(t *testing.T) {
	t.Parallel()
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: str("a")}}},
			ScopeSpans: []*tracepb.ScopeSpans{{
				Scope: &commonpb.InstrumentationScope{Name: "s1", Version: "v1"},
				Spans: []*tracepb.Span{{
					TraceId:           []byte{0xAB, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
					SpanId:            []byte{0, 0, 0, 0, 0, 0, 0, 2},
					ParentSpanId:      []byte{0, 0, 0, 0, 0, 0, 0, 3},
					TraceState:        "k=v",
					Name:              "first",
					Kind:              tracepb.Span_SPAN_KIND_PRODUCER,
					StartTimeUnixNano: 1_700_000_000_000_000_000,
					EndTimeUnixNano:   1_700_000_000_500_000_000,
					Attributes: []*commonpb.KeyValue{
						{Key: "bytes", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{1, 2}}}},
						{Key: "kv", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
							Values: []*commonpb.KeyValue{{Key: "inner", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}}}}}}},
						{Key: "nested", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{
							Values: []*commonpb.AnyValue{{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{str("x")}}}}}}}}},
						{Key: "empty", Value: &commonpb.AnyValue{}},
						{Key: "nil"},
					},
					Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "bad"},
				}},
			}},
		},
		{
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "second"}}}},
		},
	}}
	got := flatten(req)
	want := []Span{
		{
			TraceID:      "ab000000000000000000000000000001",
			SpanID:       "0000000000000002",
			ParentSpanID: "0000000000000003",
			TraceState:   "k=v",
			Name:         "first",
			Kind:         "producer",
			Start:        time.Unix(1_700_000_000, 0).UTC(),
			End:          time.Unix(1_700_000_000, 500_000_000).UTC(),
			Attrs: map[string]any{
				"bytes":  []byte{1, 2},
				"kv":     map[string]any{"inner": 1.5},
				"nested": []any{[]any{"x"}},
				"empty":  nil,
				"nil":    nil,
			},
			Resource:      map[string]any{"service.name": "a"},
			Scope:         "s1",
			ScopeVersion:  "v1",
			StatusCode:    "error",
			StatusMessage: "bad",
		},
		{Name: "second", Kind: "unspecified", StatusCode: "unset"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("flatten:\ngot  %#v\nwant %#v", got, want)
	}
}

func TestSpan_String(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0).UTC()
	s := Span{
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		Name: "GET /x", Kind: "server", Start: start, End: start.Add(12 * time.Millisecond),
		Attrs:      map[string]any{"z": int64(1), "a": "v"},
		Resource:   map[string]any{"service.name": "api"},
		StatusCode: "error", StatusMessage: "boom",
		Events: []Event{{Name: "exception"}, {Name: "retry"}},
		Links:  []Link{{}},
	}
	want := `"GET /x" server trace=4bf92f3577b34da6a3ce929d0e0e4736 span=00f067aa0ba902b7 parent=- 12ms status=error "boom" attrs={a="v", z=1} events=[exception retry] links=1 service="api"`
	if got := s.String(); got != want {
		t.Fatalf("String:\ngot  %s\nwant %s", got, want)
	}
}
