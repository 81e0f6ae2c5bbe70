// Package otel builds chute's OpenTelemetry providers explicitly and hands
// them to the packages that record: nothing here touches OTel's global
// providers or propagators.
//
// Metrics are exported in Prometheus text format on the metrics listener's
// /metrics through a private registry, so two nodes in one test process
// never share instruments.
//
// Traces go over OTLP (gRPC or HTTP/protobuf) to the endpoint the standard
// OTEL_* variables name. FromEnv reads, with the getenv it is given, whether
// tracing is on, the sampler and the resource; the exporter New builds
// (contrib's autoexport) reads its endpoint, protocol, headers and TLS
// settings from the process environment itself. With no endpoint, TracerProvider is nil and the
// packages skip every span: tracing that is off costs a nil check. The
// sampler is OTEL_TRACES_SAMPLER's (default parentbased_always_on: a put
// whose client sent a sampled traceparent is traced, and so is one with
// none). The resource is service.name (chute, or OTEL_SERVICE_NAME),
// service.instance.id (the node name), service.version, and
// OTEL_RESOURCE_ATTRIBUTES.
//
// Spans chute makes (names and parents):
//
//	etcdserverpb.KV/Put, /Txn, ...   server span of each KV call, child of the client's traceparent
//	chute.forward <queue>            producer span on the member that forwards a put to the dispatcher
//	chute.enqueue <queue>            consumer span on the dispatcher, child of the forward
//	INSERT <table>                   client span of one ClickHouse batch, over all its attempts: the
//	                                 child of its first traced put (or of that put's chute.enqueue),
//	                                 linked to up to 128 other puts it carries
//
// Watch and lease keep-alive streams are not traced: they last hours.
// Trace context crosses members in the peer protocol's ForwardBatch; a
// message handed to a new dispatcher or held as a broadcast copy keeps
// it only while it stays on the member that received it.
package otel
