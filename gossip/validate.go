package gossip

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hashicorp/memberlist"
)

// FieldError is a setting of Config or ReplicatorConfig that cannot work.
// Field is the name of the field, so that a caller can say which of its
// own settings is at fault. It wraps ErrInvalidConfig.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return ErrInvalidConfig.Error() + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() []error { return []error{ErrInvalidConfig, e.Err} }

// ConfigField returns Field.
func (e *FieldError) ConfigField() string { return e.Field }

// ConfigErr returns Err, the problem without the package's words around it.
func (e *FieldError) ConfigErr() error { return e.Err }

// Validate reports every problem of c, each a *FieldError, joined. It
// does no I/O: DNS names are resolved by New.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}
	if err := checkNodeName(c.Name); err != nil {
		bad("Name", "name %q: %v", c.Name, err)
	}
	switch {
	case c.Cluster == "":
		bad("Cluster", "cluster must not be empty")
	case len(c.Cluster) > memberlist.LabelMaxSize:
		bad("Cluster", "cluster name is %d bytes, more than %d", len(c.Cluster), memberlist.LabelMaxSize)
	}
	if c.BindAddr == "" {
		bad("BindAddr", "bind address must not be empty")
	} else if _, _, err := splitGossipAddr(c.BindAddr, true); err != nil {
		bad("BindAddr", "bind address %q: %v", c.BindAddr, err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitGossipAddr(c.AdvertiseAddr, false); err != nil {
			bad("AdvertiseAddr", "advertise address %q: %v", c.AdvertiseAddr, err)
		}
	}
	for _, seed := range c.Join {
		if _, _, err := splitGossipAddr(seed, false); err != nil {
			bad("Join", "join seed %q: %v", seed, err)
		}
	}
	switch lo, hi := c.joinBackoff(); {
	case c.JoinBackoffMin < 0 || c.JoinBackoffMax < 0:
		bad("JoinBackoffMin", "join backoff is negative")
	case lo > hi:
		bad("JoinBackoffMin", "join backoff min %v is above max %v", lo, hi)
	}
	if len(c.Key) > 0 {
		if err := memberlist.ValidateKey(c.Key); err != nil {
			bad("Key", "key is %d bytes, want 16, 24 or 32", len(c.Key))
		}
	}
	for _, l := range []struct {
		field string
		urls  []string
	}{{"PeerURLs", c.PeerURLs}, {"ClientURLs", c.ClientURLs}} {
		for _, u := range l.urls {
			if u == "" || strings.Contains(u, ",") {
				bad(l.field, "url %q is empty or holds a comma", u)
			}
		}
	}
	if n := tagsSize(c.tags()); n > memberlist.MetaMaxSize {
		bad("PeerURLs", "tags (urls, version, cluster) take %d bytes, more than serf's %d", n, memberlist.MetaMaxSize)
	}
	return errors.Join(errs...)
}

// Validate reports every problem of c, each a *FieldError, joined. It
// does no I/O.
func (c ReplicatorConfig) Validate() error {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	var plain, secure []string
	for _, u := range c.ListenURLs {
		switch https, err := checkListenURL(u); {
		case err != nil:
			bad("ListenURLs", err)
		case https:
			secure = append(secure, u)
		default:
			plain = append(plain, u)
		}
	}
	if len(plain) > 0 && len(secure) > 0 {
		bad("ListenURLs", errors.New("mixes http:// and https://; the peer link is TLS on every URL or on none"))
	}
	if len(secure) > 0 && c.Credentials == nil {
		bad("Credentials", fmt.Errorf("%q is https: it needs a certificate", secure[0]))
	}
	if c.QueueWrites < 0 {
		bad("QueueWrites", fmt.Errorf("%d is negative", c.QueueWrites))
	}
	if c.BatchWrites < 0 {
		bad("BatchWrites", fmt.Errorf("%d is negative", c.BatchWrites))
	}
	if c.DigestInterval < 0 {
		bad("DigestInterval", fmt.Errorf("%v is negative", c.DigestInterval))
	}
	if c.PeersInterval < 0 {
		bad("PeersInterval", fmt.Errorf("%v is negative", c.PeersInterval))
	}
	return errors.Join(errs...)
}

// checkListenURL accepts an http or https URL with a host and a port
// (0: the kernel picks one) and no user, path, query or fragment, and
// reports whether it is https. Its errors never show a password.
func checkListenURL(raw string) (https bool, err error) {
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
