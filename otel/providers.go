package otel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config names the process in what it exports and says where spans go.
// Build it in cmd (FromEnv reads the standard OTEL_* variables); New reads
// no environment itself, the trace exporter it builds reads its own.
type Config struct {
	// ServiceName is service.name. Empty: "chute".
	ServiceName string
	// InstanceID is service.instance.id, the node name. Empty: omitted.
	InstanceID string
	// Version is service.version. Empty: omitted.
	Version string
	// Resource holds further resource attributes (OTEL_RESOURCE_ATTRIBUTES).
	// They do not override the three above.
	Resource []attribute.KeyValue
	// Traces says where spans are exported. Zero: nowhere, and the tracer
	// provider is a no-op.
	Traces TraceConfig
}

// Providers are the OTel providers of one node.
type Providers struct {
	meter    *sdkmetric.MeterProvider
	registry *prometheus.Registry
	tracer   *sdktrace.TracerProvider // nil: tracing is off
}

// New builds the providers: a meter provider whose readings are served in
// Prometheus format by MetricsHandler, together with Go runtime and process
// metrics, and a tracer provider exporting spans when cfg.Traces enables
// them. It returns cfg.Validate's error first.
func New(cfg Config) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(resourceAttrs(cfg)...)
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("otel: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("otel: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("otel: prometheus exporter: %w", err)
	}
	p := &Providers{
		// No exemplars: /metrics is served as plain Prometheus text, which
		// has none, and offering each measurement to them costs every put.
		meter: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res),
			sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)),
		registry: reg,
	}
	if cfg.Traces.Enabled {
		if p.tracer, err = newTracerProvider(cfg.Traces, res); err != nil {
			_ = p.meter.Shutdown(context.Background())
			return nil, err
		}
	}
	return p, nil
}

// resourceAttrs describes the process: service.name, service.instance.id
// and service.version first, then the configured extras not naming those.
func resourceAttrs(cfg Config) []attribute.KeyValue {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "chute"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.InstanceID))
	}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	for _, kv := range cfg.Resource {
		switch kv.Key {
		case "service.name", "service.instance.id", "service.version":
		default:
			attrs = append(attrs, kv)
		}
	}
	return attrs
}

// MeterProvider is what packages record metrics with.
func (p *Providers) MeterProvider() metric.MeterProvider { return p.meter }

// TracerProvider is what packages start spans with; nil when tracing is
// off, so callers skip span work entirely.
func (p *Providers) TracerProvider() trace.TracerProvider {
	if p.tracer == nil {
		return nil
	}
	return p.tracer
}

// Propagator reads and writes W3C trace context and baggage in gRPC
// metadata and peer messages.
func (p *Providers) Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// MetricsHandler serves every metric in Prometheus text format.
func (p *Providers) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{})
}

// ErrSpansLost says that Shutdown stopped the tracer provider before the
// spans it held were exported.
var ErrSpansLost = errors.New("otel: spans not exported at shutdown")

// flushTimeout bounds the export of the last spans at shutdown: a
// collector that is down must not hold up a node that is stopping.
const flushTimeout = 2 * time.Second

// Shutdown flushes the spans not yet exported, for at most flushTimeout,
// and stops the providers. Spans it could not export make it return an
// error that wraps ErrSpansLost.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	if p.tracer != nil {
		tctx, cancel := context.WithTimeout(ctx, flushTimeout)
		if err := p.tracer.Shutdown(tctx); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrSpansLost, err))
		}
		cancel()
	}
	errs = append(errs, p.meter.Shutdown(ctx))
	return errors.Join(errs...)
}
