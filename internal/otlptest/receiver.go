package otlptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	// stopTimeout bounds each server's graceful stop before it is closed
	// hard.
	stopTimeout = 5 * time.Second
	// pollInterval is how often WaitFor checks its condition.
	pollInterval = 20 * time.Millisecond
	// maxDumpSpans is how many spans a WaitFor failure lists.
	maxDumpSpans = 50
)

// Receiver is one OTLP trace receiver with a gRPC and an HTTP endpoint on
// 127.0.0.1. Its methods may be called from several goroutines.
type Receiver struct {
	grpcAddr, httpAddr string

	grpcServer *grpc.Server
	httpServer *http.Server
	wg         sync.WaitGroup // the two Serve goroutines
	grpcErr    error          // Serve's result; read after wg.Wait
	httpErr    error          // Serve's result; read after wg.Wait

	// mu guards raw, spans and rejected.
	mu       sync.Mutex
	raw      [][]byte // one ExportTraceServiceRequest in protobuf per accepted request
	spans    []Span   // flattened, in arrival order
	rejected []string // why refused requests were refused
}

// Start starts a receiver on two free ports of 127.0.0.1 and stops it when
// the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: listen for gRPC: %v", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		t.Fatalf("otlptest: listen for HTTP: %v", err)
	}
	r := &Receiver{
		grpcAddr:   gl.Addr().String(),
		httpAddr:   hl.Addr().String(),
		grpcServer: grpc.NewServer(grpc.MaxRecvMsgSize(maxRequestBytes)),
	}
	collectortrace.RegisterTraceServiceServer(r.grpcServer, traceService{r: r})
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+tracesPath, r.serveTraces)
	r.httpServer = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		r.grpcErr = r.grpcServer.Serve(gl)
	}()
	go func() {
		defer r.wg.Done()
		r.httpErr = r.httpServer.Serve(hl)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops both servers, each gracefully for at most stopTimeout, and
// reports refused requests and unexpected Serve errors.
func (r *Receiver) stop(t testing.TB) {
	done := make(chan struct{})
	go func() {
		r.grpcServer.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		r.grpcServer.Stop()
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := r.httpServer.Shutdown(ctx); err != nil {
		r.httpServer.Close()
	}
	r.wg.Wait()

	if r.grpcErr != nil && !errors.Is(r.grpcErr, grpc.ErrServerStopped) {
		t.Errorf("otlptest: gRPC server: %v", r.grpcErr)
	}
	if r.httpErr != nil && !errors.Is(r.httpErr, http.ErrServerClosed) {
		t.Errorf("otlptest: HTTP server: %v", r.httpErr)
	}
	r.mu.Lock()
	rejected := r.rejected
	r.mu.Unlock()
	for _, why := range rejected {
		t.Logf("otlptest: refused a request: %s", why)
	}
}

// GRPCEndpoint is the OTLP/gRPC address, "127.0.0.1:port", for
// otlptracegrpc.WithEndpoint.
func (r *Receiver) GRPCEndpoint() string { return r.grpcAddr }

// HTTPEndpoint is the OTLP/HTTP base URL, "http://127.0.0.1:port", without
// the "/v1/traces" path.
func (r *Receiver) HTTPEndpoint() string { return "http://" + r.httpAddr }

// record keeps one accepted request; raw is its protobuf encoding, which
// record keeps and the caller must not change afterwards.
func (r *Receiver) record(raw []byte, req *collectortrace.ExportTraceServiceRequest) {
	spans := flatten(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, raw)
	r.spans = append(r.spans, spans...)
}

// reject notes why a request was refused, for the test's log.
func (r *Receiver) reject(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = append(r.rejected, why)
}

// Spans returns a copy of every span received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Span, len(r.spans))
	for i, s := range r.spans {
		out[i] = s.clone()
	}
	return out
}

// Trace returns a copy of the spans of one trace, hex in either case, in
// arrival order.
func (r *Receiver) Trace(traceID string) []Span {
	traceID = strings.ToLower(traceID)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, s := range r.spans {
		if s.TraceID == traceID {
			out = append(out, s.clone())
		}
	}
	return out
}

// Requests is the number of export requests accepted so far, over both
// protocols, empty ones included.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.raw)
}

// Contains reports whether any accepted request contains s, either in its
// protobuf bytes (where every string is verbatim) or in its protojson
// form. Use it to check that a secret never reached the collector.
func (r *Receiver) Contains(s string) bool {
	r.mu.Lock()
	raw := r.raw[:len(r.raw):len(r.raw)]
	r.mu.Unlock()
	needle := []byte(s)
	for _, b := range raw {
		if bytes.Contains(b, needle) {
			return true
		}
	}
	for _, b := range raw {
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			continue // cannot happen: record only keeps requests that decoded
		}
		js, err := protojson.Marshal(&req)
		if err == nil && bytes.Contains(js, needle) {
			return true
		}
	}
	return false
}

// WaitFor polls every 20 ms until cond holds for the spans received so far
// and returns them. After timeout it fails the test with what and a list
// of the spans received. cond gets its own copy and runs without a lock.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, what string, cond func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if cond(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("otlptest: timed out after %v waiting for %s; %s", timeout, what, r.dump(spans))
		}
		time.Sleep(pollInterval)
	}
}

// dump describes spans for a failure message, at most maxDumpSpans of
// them.
func (r *Receiver) dump(spans []Span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d spans in %d requests", len(spans), r.Requests())
	for i, s := range spans {
		if i == maxDumpSpans {
			fmt.Fprintf(&b, "\n  ... and %d more", len(spans)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s", s)
	}
	return b.String()
}
