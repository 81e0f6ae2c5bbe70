// Package otlptest is a real OTLP trace receiver for tests, used in place
// of an OpenTelemetry Collector.
//
// Start listens on two free ports of 127.0.0.1, never on another address:
//   - OTLP/gRPC: the collector's TraceService (Export), for
//     otlptracegrpc with WithEndpoint(r.GRPCEndpoint()) and WithInsecure().
//     gzip-compressed messages are accepted.
//   - OTLP/HTTP: POST /v1/traces with Content-Type application/x-protobuf
//     and Content-Encoding identity or gzip, for otlptracehttp with
//     WithEndpointURL(r.HTTPEndpoint() + "/v1/traces"). It answers 200 and
//     an empty ExportTraceServiceResponse. OTLP/JSON is refused with 415.
//
// Every accepted request is kept whole (its protobuf bytes, for Contains)
// and as flattened Span values, in arrival order, until the test ends; the
// test's cleanup stops both servers (graceful, at most 5 s each). Spans,
// Trace and WaitFor return deep copies, so a test may change what it gets.
// Requests the receiver refuses (wrong content type, malformed body) are
// answered the way OTLP says (4xx with a protobuf google.rpc.Status body)
// and logged by the test's cleanup; they never fail the test by
// themselves.
//
// All Receiver methods may be called from several goroutines. One mutex,
// Receiver.mu, guards what has been received.
package otlptest
