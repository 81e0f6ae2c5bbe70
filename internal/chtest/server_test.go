//go:build e2e

package chtest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"chute/internal/testcerts"
)

const createT = "CREATE TABLE t (id UInt64, s String) ENGINE = MergeTree ORDER BY id"

// reply is one HTTP answer from ClickHouse.
type reply struct {
	status int
	header http.Header
	body   string
}

// insert posts rows to INSERT INTO table FORMAT JSONEachRow the way the
// sink does: the statement in the URL, the rows as the body.
func insert(t *testing.T, s *Server, table, rows string, settings url.Values) reply {
	t.Helper()
	return post(t, s, "INSERT INTO "+table+" FORMAT JSONEachRow", settings, "", "", rows)
}

// post sends body to the server with query (and settings) in the URL, as
// user:pass when user is set.
func post(t *testing.T, s *Server, query string, settings url.Values, user, pass, body string) reply {
	t.Helper()
	v := url.Values{}
	for k, vs := range settings {
		v[k] = vs
	}
	if query != "" {
		v.Set("query", query)
	}
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/?"+v.Encode(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post %q: %v", query, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("post %q: read body: %v", query, err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func TestStart_insertJSONEachRow(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := Start(t)
	t.Logf("clickhouse-server ready on %s in %v", s.HTTPAddr(), time.Since(start))

	s.Exec(t, createT)
	r := insert(t, s, "t", `{"id":1,"s":"a"}`+"\n"+`{"id":2,"s":"b"}`, nil)
	if r.status != http.StatusOK || r.body != "" {
		t.Fatalf("insert: got %d %q, want 200 and an empty body", r.status, r.body)
	}
	if got := s.Count(t, "t"); got != 2 {
		t.Fatalf("Count: got %d, want 2", got)
	}
	if got, want := s.Query(t, "SELECT id, s FROM t ORDER BY id"), "1\ta\n2\tb"; got != want {
		t.Fatalf("Query: got %q, want %q", got, want)
	}
	// Exec takes the rows after the statement too.
	s.Exec(t, "INSERT INTO t FORMAT JSONEachRow\n"+`{"id":3,"s":"c"}`)
	if got := s.Count(t, "t"); got != 3 {
		t.Fatalf("Count after Exec insert: got %d, want 3", got)
	}
}

func TestStart_user(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{User: "sink", Password: "p<&>ss"})

	tests := []struct {
		name, user, pass string
		wantStatus       int
		wantPrefix       string
	}{
		{"right password", "sink", "p<&>ss", 200, "1\n"},
		{"wrong password", "sink", "nope", 401, "Code: 193, e.displayText() = DB::Exception: Wrong password for user sink"},
		{"no password", "sink", "", 401, "Code: 194, e.displayText() = DB::Exception: Password required for user sink"},
		{"unknown user", "ghost", "x", 401, "Code: 192, e.displayText() = DB::Exception: Unknown user ghost"},
		{"default keeps no password", "default", "", 200, "1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, s, "", nil, tt.user, tt.pass, "SELECT 1")
			if r.status != tt.wantStatus || !strings.HasPrefix(r.body, tt.wantPrefix) {
				t.Fatalf("got %d %q, want %d %q...", r.status, r.body, tt.wantStatus, tt.wantPrefix)
			}
		})
	}
}

func TestServer_KillRestart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Exec(t, createT)
	if r := insert(t, s, "t", `{"id":1,"s":"a"}`+"\n"+`{"id":2,"s":"b"}`, nil); r.status != 200 {
		t.Fatalf("insert: got %d %q, want 200", r.status, r.body)
	}
	addr, pid := s.HTTPAddr(), s.Pid()

	s.Kill(t)
	if _, err := http.Get(s.URL() + "/ping"); err == nil {
		t.Fatal("ping after Kill: got an answer, want a refused connection")
	}
	s.Kill(t) // a no-op on a dead server

	start := time.Now()
	s.Restart(t)
	t.Logf("restart after SIGKILL took %v", time.Since(start))
	if s.HTTPAddr() != addr {
		t.Fatalf("HTTPAddr after Restart: got %s, want %s", s.HTTPAddr(), addr)
	}
	if s.Pid() == pid {
		t.Fatalf("Pid after Restart: got the old pid %d", pid)
	}
	if got := s.Count(t, "t"); got != 2 {
		t.Fatalf("Count after Kill and Restart: got %d, want 2", got)
	}

	start = time.Now()
	s.Stop(t)
	t.Logf("graceful stop took %v", time.Since(start))
	s.Restart(t)
	if got := s.Count(t, "t"); got != 2 {
		t.Fatalf("Count after Stop and Restart: got %d, want 2", got)
	}
	s.Restart(t) // restarting a running server stops it first
	if got := s.Count(t, "t"); got != 2 {
		t.Fatalf("Count after Restart of a running server: got %d, want 2", got)
	}
}

// TestServer_RestartNativePortTaken checks that Restart starts the server
// on its HTTP port when another process took its native protocol's port
// while it was down (the port is in the ephemeral range, where the kernel
// picks the local ports of connections).
func TestServer_RestartNativePortTaken(t *testing.T) {
	t.Parallel()
	s := Start(t)
	addr, native := s.HTTPAddr(), s.TCPAddr()
	s.Kill(t)
	l, err := net.Listen("tcp", native)
	if err != nil {
		t.Fatalf("taking the native port %s: %v", native, err)
	}
	defer l.Close()
	s.Restart(t)
	if s.HTTPAddr() != addr {
		t.Fatalf("HTTPAddr after Restart: got %s, want %s", s.HTTPAddr(), addr)
	}
	if s.TCPAddr() == native {
		t.Fatalf("TCPAddr after Restart: still %s, which another process holds", native)
	}
	if got := s.Query(t, "SELECT 1"); got != "1" {
		t.Fatalf("SELECT 1 after Restart: %q", got)
	}
}

func TestStart_two(t *testing.T) {
	t.Parallel()
	s1, s2 := Start(t), Start(t)
	if s1.HTTPAddr() == s2.HTTPAddr() || s1.TCPAddr() == s2.TCPAddr() || s1.Dir() == s2.Dir() {
		t.Fatalf("servers share an address or a directory: %s %s %s, %s %s %s",
			s1.HTTPAddr(), s1.TCPAddr(), s1.Dir(), s2.HTTPAddr(), s2.TCPAddr(), s2.Dir())
	}
	s1.Exec(t, createT)
	s1.Exec(t, "INSERT INTO t FORMAT JSONEachRow\n"+`{"id":1,"s":"a"}`)
	if got := s2.Query(t, "EXISTS TABLE t"); got != "0" {
		t.Fatalf("EXISTS TABLE t on the second server: got %q, want 0", got)
	}
	if got := s1.Count(t, "t"); got != 1 {
		t.Fatalf("Count on the first server: got %d, want 1", got)
	}
}

func TestStart_settings(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{User: "sink", Settings: map[string]string{"max_memory_usage": "1000"}})
	s.Exec(t, createT)
	q := "INSERT INTO t FORMAT JSONEachRow"
	rows := strings.Repeat(`{"id":1,"s":"aaaaaaaaaaaaaaaaaaaaaaaa"}`+"\n", 10000)
	r := post(t, s, q, nil, "sink", "", rows)
	if r.status != 500 || !strings.HasPrefix(r.body, "Code: 241, ") {
		t.Fatalf("insert as sink with max_memory_usage 1000: got %d %q, want 500 Code: 241", r.status, r.body)
	}
	if r := post(t, s, q, nil, "default", "", rows); r.status != 200 {
		t.Fatalf("insert as default: got %d %q, want 200", r.status, r.body)
	}
}

func TestOptions_validate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"user", Options{User: "sink", Password: "x"}, true},
		{"user without password", Options{User: "sink"}, true},
		{"password without user", Options{Password: "x"}, false},
		{"default user", Options{User: "default", Password: "x"}, false},
		{"bad user name", Options{User: "a b"}, false},
		{"settings", Options{User: "sink", Settings: map[string]string{"max_memory_usage": "1"}}, true},
		{"settings without user", Options{Settings: map[string]string{"max_memory_usage": "1"}}, false},
		{"bad setting name", Options{User: "sink", Settings: map[string]string{"<x>": "1"}}, false},
		{"tls", Options{TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}, true},
		{"tls with client ca", Options{TLSCertFile: "c.pem", TLSKeyFile: "k.pem", TLSClientCAFile: "ca.pem"}, true},
		{"tls cert without key", Options{TLSCertFile: "c.pem"}, false},
		{"tls key without cert", Options{TLSKeyFile: "k.pem"}, false},
		{"client ca without tls", Options{TLSClientCAFile: "ca.pem"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.o.validate(); (err == nil) != tt.ok {
				t.Fatalf("validate: got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// fatalRecorder is a testing.TB whose Fatal records the message and ends
// the calling goroutine, so a test can check what a helper fails with.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// failsWith runs f with a fatalRecorder and returns its Fatal message.
func failsWith(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

func TestServer_Exec_error(t *testing.T) {
	t.Parallel()
	s := Start(t)
	msg := failsWith(t, func(tb testing.TB) { s.Exec(tb, "SELECT * FROM missing") })
	want := "chtest: SELECT * FROM missing: HTTP 404: Code: 60, e.displayText() = DB::Exception: Table default.missing doesn't exist."
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("Exec on a missing table: got %q, want prefix %q", msg, want)
	}
	msg = failsWith(t, func(tb testing.TB) { s.Count(tb, "system.one WHERE 0 FORMAT JSON") })
	if !strings.Contains(msg, "want a number") {
		t.Fatalf("Count of JSON: got %q, want a number complaint", msg)
	}
}

// pingTLS GETs /ping on the server's https port with cfg and returns the
// body, or the error of the request.
func pingTLS(s *Server, cfg *tls.Config) (string, error) {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get("https://" + s.HTTPSAddr() + "/ping")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// An https port next to plain HTTP: the certificate given is the one
// served, a client that does not trust its CA is refused, and HTTP still
// answers.
func TestStart_https(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "chtest CA")
	cert, key := ca.Issue(t, "clickhouse", "127.0.0.1").Write(t, dir, "server")
	s := Start(t, Options{TLSCertFile: cert, TLSKeyFile: key})
	if s.HTTPSAddr() == "" || s.HTTPSAddr() == s.HTTPAddr() {
		t.Fatalf("HTTPSAddr: got %q next to HTTP %q", s.HTTPSAddr(), s.HTTPAddr())
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if body, err := pingTLS(s, &tls.Config{RootCAs: roots}); err != nil || body != "Ok.\n" {
		t.Fatalf("ping over https: got %q, %v; want \"Ok.\\n\"", body, err)
	}
	other := x509.NewCertPool()
	other.AddCert(testcerts.NewCA(t, "other CA").Cert)
	if _, err := pingTLS(s, &tls.Config{RootCAs: other}); err == nil {
		t.Fatal("ping over https with another CA: got no error")
	}
	if got := s.Query(t, "SELECT 1"); got != "1" {
		t.Fatalf("Query over http: got %q", got)
	}
	if Start(t).HTTPSAddr() != "" {
		t.Error("a server without a certificate has an https address")
	}
}

// With TLSClientCAFile the https port takes only clients whose
// certificate that CA signed.
func TestStart_httpsClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "chtest CA")
	cert, key := ca.Issue(t, "clickhouse", "127.0.0.1").Write(t, dir, "server")
	s := Start(t, Options{TLSCertFile: cert, TLSKeyFile: key, TLSClientCAFile: ca.WriteCA(t, dir, "ca")})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := pingTLS(s, &tls.Config{RootCAs: roots}); err == nil {
		t.Fatal("ping without a client certificate: got no error")
	}
	pair := ca.Issue(t, "chute", "127.0.0.1")
	client, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := pingTLS(s, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}}); err != nil || body != "Ok.\n" {
		t.Fatalf("ping with a client certificate: got %q, %v", body, err)
	}
}
