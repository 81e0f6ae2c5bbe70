package main

import (
	"log/slog"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
)

// routeOTelLogs sends what the OpenTelemetry SDK reports on its own (a span
// export that failed, a malformed OTEL_EXPORTER_OTLP_* value) through the
// node's logger, in the format of its other lines, instead of the standard
// library's log package. The SDK keeps its error handler and logger in
// process globals, which only the binary's entry point sets.
func routeOTelLogs(logger *slog.Logger) {
	l := logger.With("component", "opentelemetry")
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		l.Warn("telemetry export failed", "err", err)
	}))
	otel.SetLogger(logr.FromSlogHandler(l.Handler()))
}
