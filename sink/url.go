package sink

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Default ports of ClickHouse's HTTP interface.
const (
	DefaultHTTPPort  = "8123"
	DefaultHTTPSPort = "8443"
)

var (
	// ErrNoURL is returned by ParseURL for an empty or blank URL: no
	// ClickHouse is configured, and ClickHouse queues keep their rows.
	ErrNoURL = errors.New("sink: no clickhouse url")
	// ErrBadURL is returned (wrapped, with the reason) for a URL ParseURL
	// cannot use. Its message never holds the password.
	ErrBadURL = errors.New("sink: bad clickhouse url")
)

// Endpoint is where and as whom a Client talks to ClickHouse. The zero
// Endpoint is not usable; get one from ParseURL.
type Endpoint struct {
	// Addr is host:port, the port always present ("[::1]:8123" for IPv6).
	Addr string
	// TLS is set for https:// URLs.
	TLS bool
	// User and Password come from the URL's user info; both empty means
	// no Authorization header.
	User, Password string
	// TLSConfig verifies the server of an https endpoint and may hold a
	// client certificate; ServerName is filled from Addr's host when
	// empty. The Client clones it and never changes it. ParseURL leaves
	// it nil, which means the Client's ClientConfig.TLSConfig.
	TLSConfig *tls.Config
	// Settings are sent as URL parameters of every INSERT to this
	// endpoint, and Compression compresses its bodies. The caller
	// attaches both at every batch, as it does TLSConfig, so a queue's
	// settings and a reloaded configuration apply from the next batch;
	// ParseURL leaves them zero: none.
	Settings    Settings
	Compression Compression
}

// ParseURL reads a clickhouse_url:
//
//	http://host:port        plain HTTP
//	host, host:port         plain HTTP, port 8123 when absent
//	https://host[:port]     TLS, port 8443 when absent
//	http://user:pass@host   HTTP Basic auth
//
// Path, query and fragment are ignored. The user info ends at the last '@'
// before the host, so "u:p@ss@h" is user "u", password "p@ss"; the user
// ends at its first ':'. User and password are percent-decoded when they
// hold valid escapes (write '/', '?', '#' or '%' in a password as %2F, %3F,
// %23, %25; a '/', '?' or '#' before the '@' is refused, not taken for
// the end of the host) and taken as written otherwise. Schemes other than http and
// https are refused. A blank URL is ErrNoURL; any other failure wraps
// ErrBadURL and never quotes the password.
func ParseURL(raw string) (Endpoint, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Endpoint{}, ErrNoURL
	}
	var ep Endpoint
	port := DefaultHTTPPort
	rest := raw
	if scheme, after, ok := strings.Cut(raw, "://"); ok {
		switch strings.ToLower(scheme) {
		case "http":
		case "https":
			ep.TLS = true
			port = DefaultHTTPSPort
		default:
			return Endpoint{}, fmt.Errorf("%w: scheme %q: want http or https", ErrBadURL, scheme)
		}
		rest = after
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		if strings.LastIndexByte(rest, '@') > i {
			// A '/', '?' or '#' before the '@': most likely in the
			// password (openssl's base64 has '/'), where cutting at it
			// would take the password's start for the host or the
			// port, and quote it. Said without quoting anything.
			return Endpoint{}, fmt.Errorf("%w: a '/', '?' or '#' before the '@': in a user name or password, write them as %%2F, %%3F and %%23", ErrBadURL)
		}
		rest = rest[:i]
	}
	hostport, hasUser := rest, false
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		hasUser = true
		userinfo := rest[:i]
		hostport = rest[i+1:]
		user, pass, _ := strings.Cut(userinfo, ":")
		ep.User, ep.Password = unescapeUserinfo(user), unescapeUserinfo(pass)
	}
	addr, err := hostPort(hostport, port, hasUser)
	if err != nil {
		return Endpoint{}, err
	}
	ep.Addr = addr
	return ep, nil
}

// ParseURLs reads a list of clickhouse_urls separated by commas, each as
// ParseURL reads it (write a comma in a password as %2C). Blank elements
// are skipped; a list with none is ErrNoURL. Two elements naming one
// host:port are refused. Errors wrap ErrBadURL, say which element is at
// fault (from 1) and never quote a password.
func ParseURLs(raw string) ([]Endpoint, error) {
	var eps []Endpoint
	n := 0
	for item := range strings.SplitSeq(raw, ",") {
		n++
		if strings.TrimSpace(item) == "" {
			continue
		}
		ep, err := ParseURL(item)
		if err != nil {
			if !strings.Contains(raw, ",") {
				return nil, err
			}
			if !strings.Contains(item, "@") && strings.Contains(raw, "@") {
				// Maybe a URL split at a comma in its password: what
				// ParseURL took for host and port is then the user and
				// the password's start. Quote nothing of it.
				return nil, fmt.Errorf("%w: url %d of the list does not parse (a comma in a password is written %%2C)", ErrBadURL, n)
			}
			return nil, fmt.Errorf("%w (url %d of the list)", err, n)
		}
		for _, prev := range eps {
			if prev.Addr == ep.Addr {
				return nil, fmt.Errorf("%w: %s appears twice in the list", ErrBadURL, ep.Addr)
			}
		}
		eps = append(eps, ep)
	}
	if len(eps) == 0 {
		return nil, ErrNoURL
	}
	return eps, nil
}

// unescapeUserinfo percent-decodes s when it holds only valid escapes.
func unescapeUserinfo(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// hostPort returns hostport with defPort added when it has no port.
// Without a user before it (hasUser), its errors quote nothing after a
// ':': in a URL whose '@' was lost ("http://user:pass"), that part is a
// password, and errors reach stderr and the log.
func hostPort(hostport, defPort string, hasUser bool) (string, error) {
	userHint, shown := " (a user and password go before an '@': user:password@host:port)", func(string) string { return "" }
	if hasUser {
		userHint, shown = "", func(s string) string { return fmt.Sprintf(" %q", s) }
	}
	if hostport == "" {
		return "", fmt.Errorf("%w: no host", ErrBadURL)
	}
	var host, port string
	ipv6 := true
	switch {
	case strings.HasPrefix(hostport, "["):
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", fmt.Errorf("%w: an IPv6 host without its ']'", ErrBadURL)
		}
		host = strings.Replace(hostport[1:end], "%25", "%", 1) // a zone, as RFC 6874 writes it
		switch tail := hostport[end+1:]; {
		case tail == "":
		case tail[0] == ':':
			port = tail[1:]
		default:
			return "", fmt.Errorf("%w: junk after the IPv6 host's ']', want ]:port", ErrBadURL)
		}
	case strings.Count(hostport, ":") > 1:
		host = hostport // a bare IPv6 address
	default:
		host, port, _ = strings.Cut(hostport, ":")
		ipv6 = false
	}
	if ipv6 {
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
			return "", fmt.Errorf("%w: the host%s is neither host:port nor an IPv6 address%s", ErrBadURL, shown(host), userHint)
		}
	}
	if host == "" {
		return "", fmt.Errorf("%w: no host", ErrBadURL)
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"<>\^{|}[]@`+"`", c) >= 0 {
			return "", fmt.Errorf("%w: host %q: invalid character %q", ErrBadURL, host, c)
		}
	}
	if port == "" {
		port = defPort
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("%w: port%s: want 1-65535%s", ErrBadURL, shown(port), userHint)
	}
	return net.JoinHostPort(host, port), nil
}

// AuthHeader returns the value of the Authorization header for e, "Basic "
// and the base64 of "user:password", or "" when e has neither.
func (e Endpoint) AuthHeader() string {
	if e.User == "" && e.Password == "" {
		return ""
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(e.User+":"+e.Password))
}

// Host returns the host part of e.Addr, without brackets; TLS checks the
// server's certificate against it.
func (e Endpoint) Host() string {
	host, _, err := net.SplitHostPort(e.Addr)
	if err != nil {
		return e.Addr
	}
	return host
}

// Port returns the port of e.Addr, 0 if it has none.
func (e Endpoint) Port() int {
	_, port, err := net.SplitHostPort(e.Addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// String returns e as a URL fit for logs: the password, when there is one,
// is "xxxxx", and goes through Redact, so it never shows.
func (e Endpoint) String() string {
	var b strings.Builder
	if e.TLS {
		b.WriteString("https://")
	} else {
		b.WriteString("http://")
	}
	if e.User != "" || e.Password != "" {
		b.WriteString(url.PathEscape(e.User))
		if e.Password != "" {
			b.WriteString(":" + redacted)
		}
		b.WriteByte('@')
	}
	b.WriteString(e.Addr)
	return Redact(b.String(), e)
}
