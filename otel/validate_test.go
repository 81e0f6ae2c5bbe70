package otel

import (
	"strings"
	"testing"
	"time"
)

func TestConfig_Validate_cases(t *testing.T) {
	tests := []struct {
		name    string
		traces  TraceConfig
		wantErr string // "" for valid
	}{
		{"no tracing", TraceConfig{}, ""},
		{"no tracing ignores the rest", TraceConfig{Protocol: "x", Timeout: -1}, ""},
		{"http", TraceConfig{Endpoint: "http://c:4318/v1/traces", Protocol: ProtocolHTTP, SamplerArg: 1}, ""},
		{"grpc without port", TraceConfig{Endpoint: "https://c", Protocol: ProtocolGRPC}, ""},
		{"grpc without scheme", TraceConfig{Endpoint: "c:4317", Protocol: ProtocolGRPC}, ""},
		{"grpc without scheme, port 0", TraceConfig{Endpoint: "c:0", Protocol: ProtocolGRPC}, "port"},
		{"http without scheme", TraceConfig{Endpoint: "c:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"ftp", TraceConfig{Endpoint: "ftp://c:1"}, "scheme"},
		{"port 0", TraceConfig{Endpoint: "http://c:0"}, "port"},
		{"no host", TraceConfig{Endpoint: "http://:4318"}, "host is empty"},
		{"protocol", TraceConfig{Endpoint: "http://c", Protocol: "http/json"}, "protocol"},
		{"timeout", TraceConfig{Endpoint: "http://c", Timeout: -time.Second}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{"sampler", TraceConfig{Endpoint: "http://c", Sampler: "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{"ratio", TraceConfig{Endpoint: "http://c", SamplerArg: 1.5}, "OTEL_TRACES_SAMPLER_ARG"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{Traces: tc.traces}.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error about %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfig_Validate_hidesEndpoint(t *testing.T) {
	err := Config{Traces: TraceConfig{Endpoint: "http://u:s3cret@c:0"}}.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got %v, want an error without the password", err)
	}
}

func TestNew_Validate_refusesInvalid(t *testing.T) {
	if _, err := New(Config{Traces: TraceConfig{Endpoint: "http://c:0"}}); err == nil {
		t.Fatal("got nil, want an error for port 0")
	}
}
