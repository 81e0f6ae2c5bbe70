package otel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newTracerProvider builds a tracer provider exporting in batches over
// OTLP as t says. The exporter connects lazily: a collector that is down
// costs dropped spans, never a failed start.
func newTracerProvider(t TraceConfig, res *resource.Resource) (*sdktrace.TracerProvider, error) {
	s, err := sampler(t)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch t.Protocol {
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(t.Endpoint)}
		if t.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(t.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(t.Headers))
		}
		if t.Timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(t.Timeout))
		}
		exp, err = otlptracegrpc.New(context.Background(), opts...)
	case ProtocolHTTP, "":
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(t.Endpoint)}
		if t.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(t.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(t.Headers))
		}
		if t.Timeout > 0 {
			opts = append(opts, otlptracehttp.WithTimeout(t.Timeout))
		}
		exp, err = otlptracehttp.New(context.Background(), opts...)
	default:
		return nil, fmt.Errorf("otel: OTLP protocol %q: want grpc or http/protobuf", t.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("otel: OTLP trace exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(s),
		sdktrace.WithResource(res),
	), nil
}

// sampler returns the sampler an OTEL_TRACES_SAMPLER name stands for.
func sampler(t TraceConfig) (sdktrace.Sampler, error) {
	ratio := t.SamplerArg
	switch t.Sampler {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("otel: OTEL_TRACES_SAMPLER %q is not a sampler chute knows", t.Sampler)
}
