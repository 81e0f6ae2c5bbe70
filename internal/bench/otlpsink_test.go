package bench

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// startTestSink starts a sink that the test's cleanup stops.
func startTestSink(t *testing.T) *otlpSink {
	t.Helper()
	s, err := startOTLPSink()
	if err != nil {
		t.Fatalf("startOTLPSink: %v", err)
	}
	t.Cleanup(func() {
		if err := s.stop(5 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

// TestOTLPSink_Export_countsSpans sends spans with the real OTLP/gRPC
// exporter, the way chute does from OTEL_EXPORTER_OTLP_ENDPOINT, in
// several batches.
func TestOTLPSink_Export_countsSpans(t *testing.T) {
	tests := []struct {
		name  string
		spans int
		opts  []otlptracegrpc.Option
	}{
		{"one", 1, nil},
		{"several batches", 1300, nil},
		{"gzip", 700, []otlptracegrpc.Option{otlptracegrpc.WithCompressor("gzip")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := startTestSink(t)
			ctx := testContext(t)
			exp, err := otlptracegrpc.New(ctx, append([]otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(sink.endpoint())}, tt.opts...)...)
			if err != nil {
				t.Fatalf("otlptracegrpc.New: %v", err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(tt.spans)))
			tracer := tp.Tracer("bench-test")
			for range tt.spans {
				_, span := tracer.Start(ctx, "put")
				span.End()
			}
			if err := tp.Shutdown(ctx); err != nil { // flushes
				t.Fatalf("Shutdown: %v", err)
			}
			if got := sink.received(); got != int64(tt.spans) {
				t.Errorf("received: got %d, want %d", got, tt.spans)
			}
		})
	}
}

// exportSpans hands the sink one request of n spans over two scopes. It
// may be called from any goroutine.
func exportSpans(t *testing.T, s *otlpSink, n int) {
	half := make([]*tracepb.Span, n/2)
	rest := make([]*tracepb.Span, n-n/2)
	req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: half}, {Spans: rest}},
	}}}
	if _, err := (sinkService{s: s}).Export(context.Background(), req); err != nil {
		t.Errorf("Export: %v", err)
	}
}

func TestOTLPSink_settle(t *testing.T) {
	tests := []struct {
		name       string
		before     int           // spans received before from is taken
		during     []int         // spans sent 30 ms apart after settle starts
		want       int64         // settle's want
		quiet      time.Duration // settle's quiet
		wantSpans  int64
		minD, maxD time.Duration // bounds on how long settle took
	}{
		{"all in", 5, []int{2, 3, 4}, 9, 10 * time.Second, 9, 60 * time.Millisecond, 5 * time.Second},
		{"quiet before all in", 0, []int{2, 3}, 100, 300 * time.Millisecond, 5, 330 * time.Millisecond, 5 * time.Second},
		{"quiet only", 0, []int{4}, 0, 300 * time.Millisecond, 4, 300 * time.Millisecond, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startTestSink(t)
			exportSpans(t, s, tt.before)
			from := s.received()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for _, n := range tt.during {
					time.Sleep(30 * time.Millisecond)
					exportSpans(t, s, n)
				}
			}()
			start := time.Now()
			got := s.settle(testContext(t), from, tt.want, tt.quiet, 20*time.Second)
			d := time.Since(start)
			<-done
			if got != tt.wantSpans {
				t.Errorf("settle: got %d spans, want %d", got, tt.wantSpans)
			}
			if d < tt.minD || d > tt.maxD {
				t.Errorf("settle took %v, want %v..%v", d, tt.minD, tt.maxD)
			}
		})
	}
}

func TestOTLPSink_settle_limit(t *testing.T) {
	s := startTestSink(t)
	ctx := testContext(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a span every 20 ms: never quiet for a second
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				exportSpans(t, s, 1)
			}
		}
	}()
	start := time.Now()
	got := s.settle(ctx, 0, 0, time.Second, 300*time.Millisecond)
	d := time.Since(start)
	close(stop)
	<-done
	if got == 0 || d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("settle: got %d spans after %v, want some after the 300ms limit", got, d)
	}
}

func TestOTLPSink_stop_idempotent(t *testing.T) {
	s, err := startOTLPSink()
	if err != nil {
		t.Fatalf("startOTLPSink: %v", err)
	}
	for i := range 2 {
		if err := s.stop(time.Second); err != nil {
			t.Errorf("stop %d: got %v, want nil", i, err)
		}
	}
}
