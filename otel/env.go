package otel

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// Protocols of the OTLP trace exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// TraceConfig says where spans go. Its zero value traces nothing.
type TraceConfig struct {
	// Endpoint is the OTLP endpoint URL: for gRPC http(s)://host:port, for
	// HTTP the full URL of the traces path (.../v1/traces). Empty: tracing
	// is off and costs nothing but a nil check.
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP. Empty: ProtocolHTTP, the
	// OpenTelemetry specification's default.
	Protocol string
	// Insecure sends gRPC without TLS when Endpoint has no scheme.
	Insecure bool
	// Headers are sent with every export (authentication, tenant).
	Headers map[string]string
	// Timeout bounds one export. Zero: the exporter's 10s.
	Timeout time.Duration
	// Sampler is an OTEL_TRACES_SAMPLER name: always_on, always_off,
	// traceidratio, parentbased_always_on, parentbased_always_off,
	// parentbased_traceidratio. Empty: parentbased_always_on.
	Sampler string
	// SamplerArg is the ratio of the traceidratio samplers (zero samples
	// nothing). FromEnv sets 1 when OTEL_TRACES_SAMPLER_ARG is unset.
	SamplerArg float64
}

// FromEnv fills cfg from the standard OpenTelemetry environment variables,
// read with getenv (os.Getenv in the binary): OTEL_SDK_DISABLED,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_EXPORTER
// (otlp or none), OTEL_EXPORTER_OTLP[_TRACES]_{ENDPOINT,PROTOCOL,HEADERS,
// TIMEOUT,INSECURE}, OTEL_TRACES_SAMPLER[_ARG]. Tracing is on when an
// endpoint is set or OTEL_TRACES_EXPORTER=otlp asks for the default one
// (localhost:4318, or :4317 over gRPC); with neither, nothing is exported:
// a node does not send spans nowhere by default. The batch span processor
// reads OTEL_BSP_* itself.
func FromEnv(getenv func(string) string, cfg Config) (Config, error) {
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		cfg.ServiceName = v
	}
	if v := getenv("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		kvs, err := parsePairs(v)
		if err != nil {
			return cfg, fmt.Errorf("otel: OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
		for k, val := range kvs {
			cfg.Resource = append(cfg.Resource, attribute.String(k, val))
		}
	}
	if off, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); off {
		cfg.Traces = TraceConfig{}
		return cfg, nil
	}
	either := func(name string) string { // the traces-specific variable wins
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return v
		}
		return getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	t := TraceConfig{Protocol: either("PROTOCOL")}
	if t.Protocol == "" {
		t.Protocol = ProtocolHTTP
	}
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "", "otlp", "none":
	default:
		return cfg, fmt.Errorf("otel: OTEL_TRACES_EXPORTER %q: chute exports traces with otlp (or none)", exporter)
	}
	switch {
	case getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		t.Endpoint = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	case getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		t.Endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if t.Protocol == ProtocolHTTP { // the signal path is appended to the base URL
			t.Endpoint = strings.TrimSuffix(t.Endpoint, "/") + "/v1/traces"
		}
	case exporter == "otlp" && t.Protocol == ProtocolGRPC:
		t.Endpoint = "http://localhost:4317"
	case exporter == "otlp":
		t.Endpoint = "http://localhost:4318/v1/traces"
	}
	if exporter == "none" || t.Endpoint == "" {
		cfg.Traces = TraceConfig{}
		return cfg, nil
	}
	if v := either("INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("otel: OTEL_EXPORTER_OTLP_INSECURE %q: %w", v, err)
		}
		t.Insecure = b
	}
	if v := either("HEADERS"); v != "" {
		h, err := parsePairs(v)
		if err != nil {
			return cfg, fmt.Errorf("otel: OTEL_EXPORTER_OTLP_HEADERS: %w", err)
		}
		t.Headers = h
	}
	if v := either("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return cfg, fmt.Errorf("otel: OTEL_EXPORTER_OTLP_TIMEOUT %q: want milliseconds", v)
		}
		t.Timeout = time.Duration(ms) * time.Millisecond
	}
	t.Sampler, t.SamplerArg = getenv("OTEL_TRACES_SAMPLER"), 1
	if v := getenv("OTEL_TRACES_SAMPLER_ARG"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return cfg, fmt.Errorf("otel: OTEL_TRACES_SAMPLER_ARG %q: want a ratio in [0, 1]", v)
		}
		t.SamplerArg = f
	}
	cfg.Traces = t
	return cfg, cfg.Validate()
}

// parsePairs parses "k1=v1,k2=v2" with percent-encoded values, the format of
// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS.
func parsePairs(s string) (map[string]string, error) {
	out := make(map[string]string)
	i := 0
	for item := range strings.SplitSeq(s, ",") {
		i++
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" { // the item is not quoted: it may hold a secret
			return nil, fmt.Errorf("item %d is not key=value", i)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", k, err)
		}
		out[k] = dv
	}
	return out, nil
}
