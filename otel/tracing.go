package otel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newTracerProvider builds a tracer provider exporting in batches through
// the exporter OTEL_TRACES_EXPORTER names (OTLP when unset), which reads its
// endpoint, protocol, headers, timeout and TLS settings from the process
// environment. The OTLP exporters connect lazily: a collector that is down
// costs dropped spans, never a failed start.
func newTracerProvider(t TraceConfig, res *resource.Resource) (*sdktrace.TracerProvider, error) {
	s, err := sampler(t)
	if err != nil {
		return nil, err
	}
	exp, err := autoexport.NewSpanExporter(context.Background())
	if err != nil {
		return nil, fmt.Errorf("otel: trace exporter: %w", err)
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
