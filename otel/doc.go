// Package otel builds chute's OpenTelemetry providers explicitly and hands
// them to the packages that record: nothing here touches OTel's global
// providers. Metrics are exported in Prometheus text format on the metrics
// listener's /metrics through a private registry, so two nodes in one test
// process never share instruments.
//
// Tracing (OTLP exporters from the standard OTEL_* variables) comes with the
// OpenTelemetry issue; until then the tracer provider is a no-op.
package otel
