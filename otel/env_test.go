package otel

import (
	"context"
	"errors"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"

	"chute/internal/otlptest"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want TraceConfig
	}{
		{"nothing set: no tracing", nil, TraceConfig{}},
		{"an endpoint turns tracing on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"},
			TraceConfig{Enabled: true, SamplerArg: 1}},
		{"a traces endpoint too", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			TraceConfig{Enabled: true, SamplerArg: 1}},
		{"otlp exporter with no endpoint: the default one", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			TraceConfig{Enabled: true, SamplerArg: 1}},
		{"console exporter", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, TraceConfig{Enabled: true, SamplerArg: 1}},
		{"none wins over an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, TraceConfig{}},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, TraceConfig{}},
		{"sampler", map[string]string{
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
		}, TraceConfig{Enabled: true, Sampler: "parentbased_traceidratio", SamplerArg: 0.25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnv(envOf(tt.env), Config{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Traces, tt.want) {
				t.Fatalf("got %+v, want %+v", got.Traces, tt.want)
			}
		})
	}
}

func TestFromEnv_errors(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "secret-token"}, "item 1 is not key=value"},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "a=%zz"}, "OTEL_RESOURCE_ATTRIBUTES"},
	}
	for _, tt := range tests {
		_, err := FromEnv(envOf(tt.env), Config{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want an error about %s", tt.env, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-token") {
			t.Errorf("the error repeats a value: %v", err)
		}
	}
}

func TestFromEnv_resource(t *testing.T) {
	got, err := FromEnv(envOf(map[string]string{"OTEL_SERVICE_NAME": "ingest", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.instance.id=x"}), Config{})
	if err != nil {
		t.Fatal(err)
	}
	got.InstanceID = "node-1"
	attrs := resourceAttrs(got)
	want := []attribute.KeyValue{attribute.String("service.name", "ingest"), attribute.String("service.instance.id", "node-1"),
		attribute.String("deployment.environment", "prod")}
	if !reflect.DeepEqual(attrs, want) {
		t.Fatalf("got %v, want %v", attrs, want)
	}
}

// TestNew_exportsOverOTLP checks both protocols against a real OTLP
// receiver: a span started with the provider arrives, with the resource,
// once Shutdown has flushed it.
func TestNew_exportsOverOTLP(t *testing.T) {
	for _, proto := range []string{ProtocolGRPC, ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			// The exporter reads the process environment itself.
			r := otlptest.Start(t)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			if proto == ProtocolGRPC {
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.GRPCEndpoint())
			} else {
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.HTTPEndpoint())
			}
			cfg, err := FromEnv(os.Getenv, Config{InstanceID: "n1", Version: "v9"})
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "hello")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			spans := r.Spans()
			if len(spans) != 1 || spans[0].Name != "hello" || spans[0].Resource["service.name"] != "chute" ||
				spans[0].Resource["service.instance.id"] != "n1" || spans[0].Resource["service.version"] != "v9" {
				t.Fatalf("got %v, want one span hello from chute n1 v9", spans)
			}
		})
	}
}

// TestShutdown_collectorDown checks that a node whose collector is down
// stops within the flush bound, saying the spans were lost, instead of
// retrying until its whole shutdown deadline. Over gRPC the exporter keeps
// trying to connect; over HTTP a refused connection fails at once.
func TestShutdown_collectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: every export is refused
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+down)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", ProtocolGRPC)
	// The export Shutdown gives up on keeps retrying in the background
	// until its own timeout, longer than flushTimeout; the test waits for
	// it to end.
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", strconv.Itoa(int((flushTimeout + time.Second).Milliseconds())))
	before := goleak.IgnoreCurrent()
	cfg, err := FromEnv(os.Getenv, Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "lost")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err = p.Shutdown(ctx)
	if !errors.Is(err, ErrSpansLost) {
		t.Fatalf("got %v, want ErrSpansLost", err)
	}
	if took := time.Since(start); took > flushTimeout+5*time.Second {
		t.Fatalf("Shutdown took %v with the collector down, want about %v", took, flushTimeout)
	}
	var leak error
	for range 10 { // goleak.Find itself retries for about a second
		if leak = goleak.Find(before); leak == nil {
			break
		}
	}
	if leak != nil {
		t.Fatalf("the abandoned export still runs: %v", leak)
	}
}

func TestNew_noEndpointNoTracer(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	if p.TracerProvider() != nil {
		t.Fatal("a tracer provider with no endpoint configured")
	}
}

func TestTraceParent_roundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := ParseTraceParent(tp)
	if !sc.IsValid() || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("parse %s: %+v", tp, sc)
	}
	if got := TraceParent(sc); got != tp {
		t.Fatalf("got %s, want %s", got, tp)
	}
	if ParseTraceParent("garbage").IsValid() || TraceParent(ParseTraceParent("")) != "" {
		t.Fatal("a malformed traceparent gave a valid context")
	}
}
