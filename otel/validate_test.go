package otel

import (
	"strings"
	"testing"
)

func TestConfig_Validate_cases(t *testing.T) {
	tests := []struct {
		name    string
		traces  TraceConfig
		wantErr string // "" for valid
	}{
		{"no tracing", TraceConfig{}, ""},
		{"no tracing ignores the rest", TraceConfig{Sampler: "x", SamplerArg: 7}, ""},
		{"default sampler", TraceConfig{Enabled: true, SamplerArg: 1}, ""},
		{"sampler", TraceConfig{Enabled: true, Sampler: "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{"ratio", TraceConfig{Enabled: true, Sampler: "traceidratio", SamplerArg: 1.5}, "OTEL_TRACES_SAMPLER_ARG"},
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

// TestFromEnv_endpoints checks the endpoint variables, which the exporter
// reads itself: FromEnv refuses at start what it could not use.
func TestFromEnv_endpoints(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // "" for valid
	}{
		{"http", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ""},
		{"grpc without port", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""},
		{"grpc without scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""},
		{"grpc without scheme, port 0", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:0", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "port"},
		{"http without scheme", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "c:4318"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"ftp", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://c:1"}, "scheme"},
		{"port 0", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:0"}, "port"},
		{"no host", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://:4318"}, "host is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromEnv(envOf(tc.env), Config{})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error about %q", err, tc.wantErr)
			}
		})
	}
}

func TestFromEnv_hidesEndpoint(t *testing.T) {
	_, err := FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:s3cret@c:0"}), Config{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got %v, want an error without the password", err)
	}
}

func TestNew_Validate_refusesInvalid(t *testing.T) {
	if _, err := New(Config{Traces: TraceConfig{Enabled: true, Sampler: "sometimes"}}); err == nil {
		t.Fatal("got nil, want an error for an unknown sampler")
	}
}
