package sink

import (
	"encoding/base64"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		raw  string
		want Endpoint
		auth string
		err  error
	}{
		{raw: "http://127.0.0.1:8123", want: Endpoint{Addr: "127.0.0.1:8123"}},
		{raw: "ch.lan", want: Endpoint{Addr: "ch.lan:8123"}},
		{raw: "ch.lan:9123", want: Endpoint{Addr: "ch.lan:9123"}},
		{raw: "", err: ErrNoURL},
		{raw: "   ", err: ErrNoURL},
		{raw: "http://user:pw@ch.lan:8123", want: Endpoint{Addr: "ch.lan:8123", User: "user", Password: "pw"}, auth: "Basic dXNlcjpwdw=="},
		{raw: "http://h:8123/path?x=1", want: Endpoint{Addr: "h:8123"}},
		{raw: "http://h?x=1", want: Endpoint{Addr: "h:8123"}},
		{raw: "http://h#frag", want: Endpoint{Addr: "h:8123"}},
		{raw: "u:p@ss@h", want: Endpoint{Addr: "h:8123", User: "u", Password: "p@ss"}, auth: "Basic dTpwQHNz"},
		{raw: "https://h", want: Endpoint{Addr: "h:8443", TLS: true}},
		{raw: "https://h:9443", want: Endpoint{Addr: "h:9443", TLS: true}},
		{raw: "HTTPS://h", want: Endpoint{Addr: "h:8443", TLS: true}},
		{raw: "  http://h:1  ", want: Endpoint{Addr: "h:1"}},
		{raw: "http://user@h", want: Endpoint{Addr: "h:8123", User: "user"}, auth: "Basic dXNlcjo="},
		{raw: "http://@h", want: Endpoint{Addr: "h:8123"}},
		{raw: "http://u:p%2Fq%40r@h", want: Endpoint{Addr: "h:8123", User: "u", Password: "p/q@r"}},
		{raw: "http://u:50%off@h", want: Endpoint{Addr: "h:8123", User: "u", Password: "50%off"}},
		{raw: "http://[::1]:9000", want: Endpoint{Addr: "[::1]:9000"}},
		{raw: "http://[::1]", want: Endpoint{Addr: "[::1]:8123"}},
		{raw: "::1", want: Endpoint{Addr: "[::1]:8123"}},
		{raw: "http://h:", want: Endpoint{Addr: "h:8123"}},
		{raw: "http://", err: ErrBadURL},
		{raw: "http://u:p@", err: ErrBadURL},
		{raw: "http://h:0", err: ErrBadURL},
		{raw: "http://h:65536", err: ErrBadURL},
		{raw: "http://h:port", err: ErrBadURL},
		{raw: "http://h:-1", err: ErrBadURL},
		{raw: "http://h:+80", err: ErrBadURL},
		{raw: "tcp://h:9000", err: ErrBadURL},
		{raw: "clickhouse://h", err: ErrBadURL},
		{raw: "http://[::1", err: ErrBadURL},
		{raw: "http://[::1]x", err: ErrBadURL},
		{raw: "http://h h", err: ErrBadURL},
		{raw: "http://a:b:c", err: ErrBadURL},
		{raw: "http://[h]:1", err: ErrBadURL},
		{raw: "http://[1.2.3.4]:1", err: ErrBadURL},
		{raw: "http://[fe80::1%25eth0]:9000", want: Endpoint{Addr: "[fe80::1%eth0]:9000"}},
	}
	for _, tt := range tests {
		got, err := ParseURL(tt.raw)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("ParseURL(%q): got (%+v, %v), want error %v", tt.raw, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseURL(%q): got (%+v, %v), want %+v", tt.raw, got, err, tt.want)
			continue
		}
		if tt.auth != "" {
			if a := got.AuthHeader(); a != tt.auth {
				t.Errorf("ParseURL(%q).AuthHeader(): got %q, want %q", tt.raw, a, tt.auth)
			}
		}
	}
}

func TestParseURL_errorHasNoPassword(t *testing.T) {
	for _, raw := range []string{"http://u:hunter2@", "tcp://u:hunter2@h", "http://u:hunter2@h:99999", "http://u:hunter2@h h",
		// Unescaped '/', '?', '#' in a password (openssl's base64 has '/'):
		// cutting there took the password's start for a port, and quoted it,
		// or for a host, and went on without credentials.
		"http://default:hunter2/x@ch.lan:8123", "http://default:hunter2?x@ch.lan", "http://default:hunter2#x@ch.lan",
		"http://default:4711/hunter2@ch.lan",
		// The '@' and host lost (a template left them out): the password
		// is in the port's place, or, with a ':' in it, an IPv6 host's.
		"https://default:hunter2", "http://default:hunter2:x", "http://ch1:8123,http://default:hunter2",
		"http://[::1]:hunter2"} {
		_, err := ParseURL(raw)
		if err == nil {
			t.Fatalf("ParseURL(%q): got no error", raw)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURL(%q): error %q shows the password", raw, err)
		}
	}
}

func TestEndpoint_AuthHeader(t *testing.T) {
	tests := []struct {
		ep   Endpoint
		want string
	}{
		{Endpoint{User: "user", Password: "pw"}, "Basic dXNlcjpwdw=="},
		{Endpoint{User: "a"}, "Basic YTo="},
		{Endpoint{Password: "p"}, "Basic OnA="},
		{Endpoint{}, ""},
	}
	for _, tt := range tests {
		if got := tt.ep.AuthHeader(); got != tt.want {
			t.Errorf("%+v.AuthHeader(): got %q, want %q", tt.ep, got, tt.want)
		}
	}
}

func TestEndpoint_String(t *testing.T) {
	tests := []struct {
		ep   Endpoint
		want string
	}{
		{Endpoint{Addr: "h:8123"}, "http://h:8123"},
		{Endpoint{Addr: "h:8443", TLS: true}, "https://h:8443"},
		{Endpoint{Addr: "h:8123", User: "alice", Password: "s3cr3t"}, "http://alice:xxxxx@h:8123"},
		{Endpoint{Addr: "h:8123", User: "alice"}, "http://alice@h:8123"},
		// A password that is also the host name still does not show.
		{Endpoint{Addr: "db:8123", User: "u", Password: "db"}, "http://u:xxxxx@xxxxx:8123"},
	}
	for _, tt := range tests {
		if got := tt.ep.String(); got != tt.want {
			t.Errorf("%+v.String(): got %q, want %q", tt.ep, got, tt.want)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:8123", "ch.lan", "", "http://user:pw@ch.lan:8123", "http://h:8123/path?x=1",
		"u:p@ss@h", "https://h", "http://[::1]:9000", "::1", "http://u:p%2F@h", "http://", "a@b@c:1/x?y#z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ep, err := ParseURL(raw)
		if err != nil {
			if ep != (Endpoint{}) {
				t.Fatalf("ParseURL(%q): error %v with a non-zero endpoint %+v", raw, err, ep)
			}
			if ep.Password != "" && strings.Contains(err.Error(), ep.Password) {
				t.Fatalf("ParseURL(%q): error %q shows the password", raw, err)
			}
			return
		}
		host, port, serr := net.SplitHostPort(ep.Addr)
		if serr != nil || host == "" {
			t.Fatalf("ParseURL(%q): Addr %q is not host:port (%v)", raw, ep.Addr, serr)
		}
		if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
			t.Fatalf("ParseURL(%q): port %q", raw, port)
		}
		if strings.ContainsAny(host, " \t\r\n/?#@") {
			t.Fatalf("ParseURL(%q): host %q", raw, host)
		}
		if a := ep.AuthHeader(); a != "" {
			dec, derr := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
			if derr != nil || string(dec) != ep.User+":"+ep.Password {
				t.Fatalf("ParseURL(%q): AuthHeader %q does not decode to the user info", raw, a)
			}
		}
		if p := ep.Password; p != "" && !strings.Contains(redacted, p) && strings.Contains(ep.String(), p) {
			t.Fatalf("ParseURL(%q): String() %q shows the password %q", raw, ep.String(), p)
		}
		// Parsing is idempotent on what String shows, when no password hides.
		if ep.Password == "" && !strings.ContainsAny(ep.User, "%:") {
			again, err := ParseURL(ep.String())
			if err != nil || again != ep {
				t.Fatalf("ParseURL(%q) = %+v, but ParseURL(%q) = (%+v, %v)", raw, ep, ep.String(), again, err)
			}
		}
	})
}

func TestParseURLs(t *testing.T) {
	tests := []struct {
		raw   string
		addrs []string
		err   error
		msg   string // in the error
	}{
		{raw: "http://a:1", addrs: []string{"a:1"}},
		{raw: "http://a:1,https://b, c:3 ", addrs: []string{"a:1", "b:8443", "c:3"}},
		{raw: "a:1,,b:2,", addrs: []string{"a:1", "b:2"}},
		{raw: "", err: ErrNoURL},
		{raw: " , ,", err: ErrNoURL},
		{raw: "a:1,http://u:pw@a:1", err: ErrBadURL, msg: "a:1 appears twice"},
		{raw: "a,http://a:8123", err: ErrBadURL, msg: "a:8123 appears twice"},
		{raw: "a:1,tcp://u:secret@b", err: ErrBadURL, msg: "url 2 of the list"},
		{raw: "a:1,http://u:secret@b:0", err: ErrBadURL, msg: "url 2 of the list"},
		// A comma in a password not written %2C splits the URL inside its
		// user info: the first part's "host:port" is the user and the
		// password's start, which the error must not quote.
		{raw: "http://default:secret,Tail@127.0.0.1:8123", err: ErrBadURL, msg: "%2C"},
		{raw: "http://u:sec:ret,Tail@h", err: ErrBadURL, msg: "url 1 of the list"},
		{raw: "a:1,http://u:secret,x@h", err: ErrBadURL, msg: "url 2 of the list"},
	}
	for _, tt := range tests {
		eps, err := ParseURLs(tt.raw)
		if tt.err != nil {
			if !errors.Is(err, tt.err) || !strings.Contains(errString(err), tt.msg) {
				t.Errorf("ParseURLs(%q): got %v, want %v containing %q", tt.raw, err, tt.err, tt.msg)
			}
			if err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "sec")) {
				t.Errorf("ParseURLs(%q): error %q holds the password", tt.raw, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURLs(%q): %v", tt.raw, err)
			continue
		}
		var addrs []string
		for _, ep := range eps {
			addrs = append(addrs, ep.Addr)
		}
		if strings.Join(addrs, " ") != strings.Join(tt.addrs, " ") {
			t.Errorf("ParseURLs(%q): got %v, want %v", tt.raw, addrs, tt.addrs)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
