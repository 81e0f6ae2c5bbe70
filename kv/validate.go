package kv

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FieldError is a setting of Config that cannot work. Field is the name
// of the Config field, so that a caller can say which of its own settings
// is at fault.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return "kv: " + e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// ConfigField returns Field.
func (e *FieldError) ConfigField() string { return e.Field }

// ConfigErr returns Err, the problem without the package's words around it.
func (e *FieldError) ConfigErr() error { return e.Err }

// Validate reports every setting that cannot work, each a *FieldError,
// joined. It does no I/O.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	for _, u := range c.ListenClientURLs {
		secure, err := checkURL(u)
		switch {
		case err != nil:
			bad("ListenClientURLs", err)
		case secure && c.TLS == nil:
			bad("TLS", fmt.Errorf("%q is https: it needs a certificate", u))
		}
	}
	for _, l := range []struct {
		field string
		urls  []string
	}{
		{"AdvertiseClientURLs", c.AdvertiseClientURLs},
		{"AdvertisePeerURLs", c.AdvertisePeerURLs},
	} {
		for _, u := range l.urls {
			if _, err := checkURL(u); err != nil {
				bad(l.field, err)
			}
		}
	}
	for _, n := range []struct {
		field string
		v     int64
	}{
		{"MaxRequestBytes", int64(c.MaxRequestBytes)},
		{"MaxTxnOps", int64(c.MaxTxnOps)},
		{"MaxKeyBytes", int64(c.MaxKeyBytes)},
		{"HistoryRevisions", c.HistoryRevisions},
		{"MinLeaseTTL", c.MinLeaseTTL},
	} {
		if n.v < 0 {
			bad(n.field, fmt.Errorf("%d is negative", n.v))
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"WatchSyncInterval", c.WatchSyncInterval},
		{"WatchProgressInterval", c.WatchProgressInterval},
		{"LeaseCheckInterval", c.LeaseCheckInterval},
		{"TombstoneTTL", c.TombstoneTTL},
	} {
		if d.v < 0 {
			bad(d.field, fmt.Errorf("%v is negative", d.v))
		}
	}
	return errors.Join(errs...)
}

// checkURL accepts an http or https URL with a host and a port and no
// user, path, query or fragment, and reports whether it is https. Port 0
// is allowed: on a listen URL the kernel picks the port, and an advertise
// URL copied from such a listen URL says so. Its errors never show a
// password.
func checkURL(raw string) (secure bool, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") { // it may hold a password
			return false, errors.New("a URL with a user is not a URL")
		}
		return false, fmt.Errorf("%q is not a URL", raw)
	}
	shown := u.Redacted()
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, fmt.Errorf("%q: scheme must be http or https", shown)
	}
	if u.User != nil {
		return false, fmt.Errorf("%q: must not contain a user", shown)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false, fmt.Errorf("%q: must not contain a path, query or fragment", shown)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return false, fmt.Errorf("%q: want host:port", shown)
	}
	if host == "" {
		return false, fmt.Errorf("%q: host is empty", shown)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return false, fmt.Errorf("%q: port %q is not a number from 0 to 65535", shown, port)
	}
	return u.Scheme == "https", nil
}
