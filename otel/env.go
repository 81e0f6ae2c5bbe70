package otel

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Protocols of the OTLP trace exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// TraceConfig says whether spans are exported and how they are sampled.
// Where they go (endpoint, protocol, headers, timeout, TLS, compression)
// the exporter reads itself from the standard OTEL_EXPORTER_OTLP_*
// variables. Its zero value traces nothing.
type TraceConfig struct {
	// Enabled exports spans through the exporter OTEL_TRACES_EXPORTER
	// names (otlp when unset). False: tracing is off and costs nothing but
	// a nil check.
	Enabled bool
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
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_EXPORTER,
// OTEL_TRACES_SAMPLER[_ARG], and it checks the OTLP protocol and endpoint,
// so a bad value stops the node at start. Tracing is on when an OTLP endpoint is set
// or OTEL_TRACES_EXPORTER asks for an exporter; with neither, nothing is
// exported: a node does not send spans nowhere by default. The exporter
// reads OTEL_EXPORTER_OTLP_* and the batch span processor OTEL_BSP_*
// themselves, from the process environment.
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
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch p := getenv(name); p {
		case "", ProtocolGRPC, ProtocolHTTP:
		default:
			return cfg, fmt.Errorf("otel: %s %q: want grpc or http/protobuf", name, p)
		}
	}
	exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "", "otlp", "console", "none":
	default:
		return cfg, fmt.Errorf("otel: OTEL_TRACES_EXPORTER %q: want otlp, console or none", exporter)
	}
	grpc := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") == ProtocolGRPC ||
		(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") == "" && getenv("OTEL_EXPORTER_OTLP_PROTOCOL") == ProtocolGRPC)
	endpoint := false
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := getenv(name); v != "" {
			if err := checkEndpoint(v, grpc); err != nil { // the value is not quoted: it may hold credentials
				return cfg, fmt.Errorf("otel: %s: %w", name, err)
			}
			endpoint = true
		}
	}
	if exporter == "none" || (exporter == "" && !endpoint) {
		cfg.Traces = TraceConfig{}
		return cfg, nil
	}
	t := TraceConfig{Enabled: true, Sampler: getenv("OTEL_TRACES_SAMPLER"), SamplerArg: 1}
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
// OTEL_RESOURCE_ATTRIBUTES.
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
