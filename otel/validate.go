package otel

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Validate reports every setting of c that New could not use, joined:
// an OTLP endpoint that is not an http or https URL with a host (and a
// port from 1 to 65535 when it names one), an unknown protocol or
// sampler, a negative timeout, a sampler ratio outside [0, 1]. Errors
// name the OTEL_* variable the setting comes from, and never quote the
// endpoint, which may hold credentials.
func (c Config) Validate() error {
	t := c.Traces
	if t.Endpoint == "" {
		return nil
	}
	var errs []error
	if err := checkEndpoint(t.Endpoint, t.Protocol == ProtocolGRPC); err != nil {
		errs = append(errs, fmt.Errorf("otel: OTEL_EXPORTER_OTLP_ENDPOINT: %w", err))
	}
	switch t.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		errs = append(errs, fmt.Errorf("otel: OTLP protocol %q: want grpc or http/protobuf", t.Protocol))
	}
	if t.Timeout < 0 {
		errs = append(errs, fmt.Errorf("otel: OTEL_EXPORTER_OTLP_TIMEOUT: %v is negative", t.Timeout))
	}
	if t.SamplerArg < 0 || t.SamplerArg > 1 {
		errs = append(errs, fmt.Errorf("otel: OTEL_TRACES_SAMPLER_ARG %v: want a ratio in [0, 1]", t.SamplerArg))
	}
	if _, err := sampler(t); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkEndpoint accepts http[s]://host[:port][/path], and host:port
// when bare is set (gRPC, which the specification lets go without a
// scheme).
func checkEndpoint(raw string, bare bool) error {
	if bare && !strings.Contains(raw, "://") {
		host, port, err := net.SplitHostPort(raw)
		switch {
		case err != nil:
			return errors.New("want http[s]://host:port or host:port")
		case host == "":
			return errors.New("host is empty")
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("port %q: want 1-65535", port)
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("scheme must be http or https")
	}
	if u.Hostname() == "" {
		return errors.New("host is empty")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("port %q: want 1-65535", p)
		}
	}
	return nil
}
