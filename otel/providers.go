package otel

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Config names the process in what it exports.
type Config struct {
	// ServiceName is service.name. Empty: "chute".
	ServiceName string
	// InstanceID is service.instance.id, the node name. Empty: omitted.
	InstanceID string
	// Version is service.version. Empty: omitted.
	Version string
}

// Providers are the OTel providers of one node.
type Providers struct {
	meter    *sdkmetric.MeterProvider
	registry *prometheus.Registry
}

// New builds the providers: a meter provider whose readings are served in
// Prometheus format by MetricsHandler, together with Go runtime and process
// metrics.
func New(cfg Config) (*Providers, error) {
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
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exp),
		sdkmetric.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Providers{meter: mp, registry: reg}, nil
}

// MeterProvider is what packages record metrics with.
func (p *Providers) MeterProvider() metric.MeterProvider { return p.meter }

// MetricsHandler serves every metric in Prometheus text format.
func (p *Providers) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{})
}

// Shutdown flushes and stops the providers.
func (p *Providers) Shutdown(ctx context.Context) error {
	return errors.Join(p.meter.Shutdown(ctx))
}
