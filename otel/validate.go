package otel

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Validate reports every setting of c that New could not use, joined: an
// unknown sampler or a sampler ratio outside [0, 1]. Where spans go the
// exporter reads from the environment; FromEnv checks those variables.
func (c Config) Validate() error {
	t := c.Traces
	if !t.Enabled {
		return nil
	}
	var errs []error
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
