package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
)

const (
	// sinkMaxRecvMsgSize bounds one export request; the SDK's batches of
	// 512 spans are far smaller.
	sinkMaxRecvMsgSize = 64 << 20
	// sinkPoll is how often settle looks at the span count.
	sinkPoll = 20 * time.Millisecond
)

// otlpSink is an OTLP/gRPC trace receiver on 127.0.0.1 that counts the
// spans exported to it and keeps nothing: the collector the traced node of
// the matrix exports to, so that tracing costs what it costs against a
// collector that answers at once. Its methods may be called from several
// goroutines.
type otlpSink struct {
	addr string
	srv  *grpc.Server
	// spans counts the spans Export accepted.
	spans atomic.Int64

	wg       sync.WaitGroup // the Serve goroutine
	serveErr error          // what Serve returned; read after wg.Wait
	stopOnce sync.Once
}

// startOTLPSink listens on a free port of 127.0.0.1 and serves the OTLP
// TraceService until stop.
func startOTLPSink() (*otlpSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: otlp sink: %w", err)
	}
	s := &otlpSink{
		addr: l.Addr().String(),
		srv:  grpc.NewServer(grpc.MaxRecvMsgSize(sinkMaxRecvMsgSize)),
	}
	collectortrace.RegisterTraceServiceServer(s.srv, sinkService{s: s})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serveErr = s.srv.Serve(l)
	}()
	return s, nil
}

// endpoint is the sink's OTEL_EXPORTER_OTLP_ENDPOINT for
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc: http://127.0.0.1:port (plaintext).
func (s *otlpSink) endpoint() string { return "http://" + s.addr }

// received is the number of spans accepted so far.
func (s *otlpSink) received() int64 { return s.spans.Load() }

// settle waits until the sink has received want spans more than from, or
// no span for quiet (the exporter has flushed what it had: quiet must be
// longer than its batch delay), or limit has passed, or ctx ends. want 0
// waits for quiet only. It returns the spans received beyond from.
func (s *otlpSink) settle(ctx context.Context, from, want int64, quiet, limit time.Duration) int64 {
	deadline := time.Now().Add(limit)
	last, lastChange := s.received(), time.Now()
	tick := time.NewTicker(sinkPoll)
	defer tick.Stop()
	for {
		now := s.received()
		if now != last {
			last, lastChange = now, time.Now()
		}
		switch {
		case want > 0 && now-from >= want,
			time.Since(lastChange) >= quiet,
			time.Now().After(deadline):
			return now - from
		}
		select {
		case <-ctx.Done():
			return s.received() - from
		case <-tick.C:
		}
	}
}

// stop stops the server, gracefully for at most grace, and waits for it.
// It is idempotent; it reports a Serve failure.
func (s *otlpSink) stop(grace time.Duration) error {
	s.stopOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			s.srv.GracefulStop()
			close(done)
		}()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.srv.Stop()
			<-done
		}
	})
	s.wg.Wait()
	if s.serveErr != nil && !errors.Is(s.serveErr, grpc.ErrServerStopped) {
		return fmt.Errorf("bench: otlp sink: %w", s.serveErr)
	}
	return nil
}

// sinkService is the sink's OTLP/gRPC TraceService.
type sinkService struct {
	collectortrace.UnimplementedTraceServiceServer
	s *otlpSink
}

var _ collectortrace.TraceServiceServer = sinkService{}

// Export counts the spans of req and answers that all were accepted.
func (svc sinkService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	var n int64
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += int64(len(ss.GetSpans()))
		}
	}
	svc.s.spans.Add(n)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}
