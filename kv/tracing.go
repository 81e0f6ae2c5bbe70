package kv

import (
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"
)

// tracingHandler starts a server span for every KV and Auth call, the
// child of the trace context the client sent; Auth's spans name the call,
// never its passwords (otelgrpc records message sizes, not contents).
// Watch and lease keep-alive streams live for hours and are not traced; otelgrpc's own metrics are off (kv records
// rpc.server.call.duration itself).
func tracingHandler(tp trace.TracerProvider, prop propagation.TextMapPropagator) stats.Handler {
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(prop),
		otelgrpc.WithMeterProvider(noop.NewMeterProvider()),
		otelgrpc.WithMessageEvents(),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
			return strings.HasPrefix(info.FullMethodName, "/etcdserverpb.KV/") ||
				strings.HasPrefix(info.FullMethodName, "/etcdserverpb.Auth/")
		}),
	)
}
