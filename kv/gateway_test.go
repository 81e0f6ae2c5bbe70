package kv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/internal/testutil"
)

// gatewayPost posts body to path of srv's first client URL and returns
// the status code and the answer's body.
func gatewayPost(t *testing.T, srv *Server, path, token, body string) (int, string) {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", token)
	}
	return postURL(t, "http://"+srv.ClientAddrs()[0].String()+path, h, body)
}

// postURL posts body to url with the headers h and returns the status
// code and the answer's body.
func postURL(t *testing.T, url string, h http.Header, body string) (int, string) {
	t.Helper()
	return doURL(t, http.MethodPost, url, h, body)
}

// getURL gets url and returns the status code and the answer's body.
func getURL(t *testing.T, url string) (int, string) {
	t.Helper()
	return doURL(t, http.MethodGet, url, nil, "")
}

func doURL(t *testing.T, method, url string, h http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t, 10*time.Second), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, h)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}

// openWatch opens a watch of key through srv's gateway, which ends with
// ctx, and returns its answer's lines after the first (created).
func openWatch(t *testing.T, ctx context.Context, srv *Server, key string) *bufio.Scanner {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.ClientAddrs()[0].String()+"/v3/watch",
		strings.NewReader(`{"create_request":{"key":"`+b64(key)+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.Contains(lines.Text(), `"created":true`) {
		t.Fatalf("watch: first line %q (%v), want the created answer", lines.Text(), lines.Err())
	}
	return lines
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestGateway_putRangeWatch: etcd's JSON gateway answers on the gRPC
// client port. A put through it is read by clientv3, a key put by
// clientv3 is read through it with its revisions (under /v3/ and etcd
// 3.3's /v3beta/), and a watch through it streams the event of a
// clientv3 put as a line of JSON.
func TestGateway_putRangeWatch(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := testCtx(t, 20*time.Second)

	code, body := gatewayPost(t, srv, "/v3/kv/put", "", `{"key":"`+b64("from-http")+`","value":"`+b64("v1")+`"}`)
	if code != http.StatusOK || !strings.Contains(body, `"revision":"2"`) {
		t.Fatalf("put: %d %s, want 200 and revision 2 in the header", code, body)
	}
	got, err := cli.Get(ctx, "from-http")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
		t.Fatalf("clientv3 Get of a key put through the gateway: %+v, %v", got, err)
	}

	if _, err := cli.Put(ctx, "from-grpc", "v2"); err != nil {
		t.Fatal(err)
	}
	code, body = gatewayPost(t, srv, "/v3/kv/range", "", `{"key":"`+b64("from-grpc")+`"}`)
	var rr struct {
		Kvs []struct {
			Key, Value     string
			CreateRevision string `json:"create_revision"`
		}
		Count string
	}
	if err := json.Unmarshal([]byte(body), &rr); code != http.StatusOK || err != nil {
		t.Fatalf("range: %d %s (%v)", code, body, err)
	}
	if rr.Count != "1" || len(rr.Kvs) != 1 || rr.Kvs[0].Value != b64("v2") || rr.Kvs[0].CreateRevision != "3" {
		t.Fatalf("range: got %s, want from-grpc=v2 created at revision 3", body)
	}
	// etcd 3.3's path, which etcd 3.4 still served.
	if code, beta := gatewayPost(t, srv, "/v3beta/kv/range", "", `{"key":"`+b64("from-grpc")+`"}`); code != http.StatusOK || !strings.Contains(beta, b64("v2")) {
		t.Fatalf("range under /v3beta/: %d %s", code, beta)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := openWatch(t, wctx, srv, "watched")
	if _, err := cli.Put(ctx, "watched", "w1"); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatalf("watch: no event line: %v", lines.Err())
	}
	if l := lines.Text(); !strings.Contains(l, `"key":"`+b64("watched")+`"`) || !strings.Contains(l, `"value":"`+b64("w1")+`"`) {
		t.Fatalf("watch: event line %q, want watched=w1", l)
	}
}

// TestGateway_errors: the gateway answers bad requests with an HTTP
// error and etcd's gRPC code and message in JSON, and a body past its
// bound is refused without the node's memory holding it; gRPC serves on.
func TestGateway_errors(t *testing.T) {
	srv, cli := startServer(t, func(c *Config) { c.MaxRequestBytes = 64 << 10 })
	if code, body := gatewayPost(t, srv, "/v3/lease/grant", "", `{"ID":"777","TTL":"60"}`); code != http.StatusOK {
		t.Fatalf("grant of lease 777: %d %s", code, body)
	}
	for _, tc := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"not JSON", "/v3/kv/put", `{"key":`, http.StatusBadRequest, `"code":3`},
		{"key not base64", "/v3/kv/put", `{"key":"***"}`, http.StatusBadRequest, `"code":3`},
		{"empty key", "/v3/kv/put", `{"value":"` + b64("v") + `"}`, http.StatusBadRequest, "etcdserver: key is not provided"},
		{"value past max-request-bytes", "/v3/kv/put", `{"key":"` + b64("k") + `","value":"` + b64(strings.Repeat("x", 80<<10)) + `"}`, http.StatusBadRequest, "etcdserver: request is too large"},
		{"no such path", "/v3/kv/nothing", `{}`, http.StatusNotFound, ""},
		// FailedPrecondition is etcd 3.4's 412 (grpc-gateway v1), not v2's
		// 400.
		{"lease granted twice", "/v3/lease/grant", `{"ID":"777","TTL":"60"}`, http.StatusPreconditionFailed, `"code":9`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := gatewayPost(t, srv, tc.path, "", tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("got %d %s, want %d and %q", code, body, tc.code, tc.want)
			}
		})
	}
	// Past the body bound (twice max-request-bytes and gRPC's margin):
	// refused while being read.
	big := bytes.Repeat([]byte("a"), 2*(64<<10)+grpcOverheadBytes+1)
	resp, err := http.Post("http://"+srv.ClientAddrs()[0].String()+"/v3/kv/put", "application/json", bytes.NewReader(big))
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("a body past the bound: got 200")
		}
	}
	if _, err := cli.Put(testCtx(t, 10*time.Second), "still", "serving"); err != nil {
		t.Fatalf("gRPC after the gateway's errors: %v", err)
	}
}

// TestGateway_auth: with auth enabled, a gateway call carries the token
// from /v3/auth/authenticate in its Authorization header, as etcd's
// does; none, or a bogus one, is refused with etcd's error.
func TestGateway_auth(t *testing.T) {
	srv, cli := startServer(t, authConfig)
	enableAuth(t, cli)

	code, body := gatewayPost(t, srv, "/v3/auth/authenticate", "", `{"name":"root","password":"rootpw"}`)
	var tok struct{ Token string }
	if err := json.Unmarshal([]byte(body), &tok); code != http.StatusOK || err != nil || tok.Token == "" {
		t.Fatalf("authenticate: %d %s", code, body)
	}
	put := `{"key":"` + b64("k") + `","value":"` + b64("v") + `"}`
	if code, body := gatewayPost(t, srv, "/v3/kv/put", "", put); code == http.StatusOK || !strings.Contains(body, "etcdserver: user name is empty") {
		t.Errorf("put without a token: %d %s, want etcd's user name is empty", code, body)
	}
	if code, body := gatewayPost(t, srv, "/v3/kv/put", "bogus", put); code != http.StatusUnauthorized || !strings.Contains(body, "etcdserver: invalid auth token") {
		t.Errorf("put with a bogus token: %d %s, want 401 and etcd's invalid auth token", code, body)
	}
	if code, body := gatewayPost(t, srv, "/v3/kv/put", tok.Token, put); code != http.StatusOK {
		t.Errorf("put with the token: %d %s, want 200", code, body)
	}
}

// TestGateway_off: with NoGateway the client port speaks gRPC alone: an
// HTTP/1.1 request gets no HTTP answer, and clientv3 works.
func TestGateway_off(t *testing.T) {
	srv, cli := startServer(t, func(c *Config) { c.NoGateway = true })
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post("http://"+srv.ClientAddrs()[0].String()+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"`+b64("k")+`"}`))
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("HTTP/1.1 with the gateway off: got %s, want no HTTP answer", resp.Status)
	}
	if _, err := cli.Put(testCtx(t, 10*time.Second), "k", "v"); err != nil {
		t.Fatalf("clientv3 with the gateway off: %v", err)
	}
}

// TestIsHTTP2 tells connections apart by their first bytes, peeked: the
// preface split over two writes is still HTTP/2 and its bytes are all
// still there to read; an HTTP/1.1 request line and a connection closed
// at once are not HTTP/2.
func TestIsHTTP2(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name   string
		writes []string
		want   bool
	}{
		{"preface", []string{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, true},
		{"preface in two writes", []string{"PR", "I * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, true},
		{"HTTP/1.1", []string{"POST /v3/kv/put HTTP/1.1\r\n"}, false},
		{"PUT", []string{"PUT / HTTP/1.1\r\n"}, false},
		{"closed at once", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			in, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			go func() {
				for i, w := range tc.writes {
					if i > 0 {
						time.Sleep(50 * time.Millisecond)
					}
					_, _ = out.Write([]byte(w))
				}
				if tc.writes == nil {
					_ = out.Close()
				}
			}()
			start := time.Now()
			if got := isHTTP2(in); got != tc.want {
				t.Fatalf("isHTTP2: got %v, want %v", got, tc.want)
			}
			if d := time.Since(start); d > sniffTimeout/2 {
				t.Errorf("isHTTP2 took %v", d)
			}
			if tc.writes != nil {
				all := strings.Join(tc.writes, "")
				buf := make([]byte, len(all))
				_ = in.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(in, buf); err != nil || string(buf) != all {
					t.Fatalf("read after the peek: %q, %v; want %q", buf, err, all)
				}
			}
		})
	}
}

// TestGateway_silentConnection: a connection that sends nothing holds
// up neither gRPC nor the gateway on the same port, nor the shutdown.
func TestGateway_silentConnection(t *testing.T) {
	srv, _ := startServer(t, nil)
	silent, err := net.Dial("tcp", srv.ClientAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cli := newClient(t, srv) // a connection accepted after the silent one
	if _, err := cli.Put(testCtx(t, 5*time.Second), "k", "v"); err != nil {
		t.Fatalf("clientv3 beside a silent connection: %v", err)
	}
	if code, body := gatewayPost(t, srv, "/v3/kv/range", "", `{"key":"`+b64("k")+`"}`); code != http.StatusOK || !strings.Contains(body, b64("v")) {
		t.Fatalf("gateway beside a silent connection: %d %s", code, body)
	}
	// Nor the server's shutdown, which closes it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*sniffTimeout)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > sniffTimeout/2 {
		t.Errorf("Shutdown beside a silent connection took %v", d)
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Errorf("the silent connection is still open after Shutdown")
	}
}

// TestGateway_traceparent: a gateway call that carries a W3C traceparent
// header is traced as its child, as a gRPC call with it in its metadata.
func TestGateway_traceparent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv, _ := startServer(t, func(c *Config) {
		c.Tracer = tp
		c.Propagator = propagation.TraceContext{}
	})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h := http.Header{}
	h.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
	if code, body := postURL(t, "http://"+srv.ClientAddrs()[0].String()+"/v3/kv/put", h, `{"key":"`+b64("k")+`","value":"`+b64("v")+`"}`); code != http.StatusOK {
		t.Fatalf("put: %d %s", code, body)
	}
	var put sdktrace.ReadOnlySpan
	testutil.EventuallyTrue(t, 5*time.Second, "the span of the put", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "etcdserverpb.KV/Put" {
				put = s
				return true
			}
		}
		return false
	})
	if got := put.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("trace of the put: %s, want the header's %s", got, traceID)
	}
	if got := put.Parent().SpanID().String(); got != parentID {
		t.Errorf("parent of the put: %s, want the header's %s", got, parentID)
	}
}

// TestGateway_shutdownEndsWatch: a server with a watch open through the
// gateway shuts down at once, and the watch's answer ends.
func TestGateway_shutdownEndsWatch(t *testing.T) {
	srv, _ := startServer(t, nil)
	lines := openWatch(t, testCtx(t, 20*time.Second), srv, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown with a gateway watch open took %v", d)
	}
	for lines.Scan() {
	}
}

// TestGateway_httpOnlyURLs: with ListenClientHTTPURLs (etcd's
// --listen-client-http-urls) the gateway answers there, and the client
// URLs serve gRPC alone.
func TestGateway_httpOnlyURLs(t *testing.T) {
	srv, cli := startServer(t, func(c *Config) { c.ListenClientHTTPURLs = []string{"http://127.0.0.1:0"} })
	if code, body := postURL(t, "http://"+srv.HTTPAddrs()[0].String()+"/v3/kv/put", nil, `{"key":"`+b64("k")+`","value":"`+b64("v")+`"}`); code != http.StatusOK {
		t.Fatalf("put on the http URL: %d %s", code, body)
	}
	if got, err := cli.Get(testCtx(t, 10*time.Second), "k"); err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("clientv3 on the client URL: %+v, %v; want k=v", got, err)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Post("http://"+srv.ClientAddrs()[0].String()+"/v3/kv/range", "application/json", strings.NewReader(`{}`)); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("HTTP/1.1 on the client URL: got %s, want no HTTP answer (gRPC alone)", resp.Status)
	}
}

// TestGateway_refusesBrowsers: a request with an Origin header, as a web
// page's form or fetch() sends it, is refused (403) and writes nothing;
// the same request without it is taken.
func TestGateway_refusesBrowsers(t *testing.T) {
	srv, cli := startServer(t, nil)
	put := `{"key":"` + b64("k") + `","value":"` + b64("from a page") + `"}`
	for _, origin := range []string{"http://evil.example", "null", "http://" + srv.ClientAddrs()[0].String()} {
		h := http.Header{}
		h.Set("Origin", origin)
		h.Set("Content-Type", "text/plain")
		code, body := postURL(t, "http://"+srv.ClientAddrs()[0].String()+"/v3/kv/put", h, put)
		if code != http.StatusForbidden || !strings.Contains(body, `"code":7`) {
			t.Errorf("Origin %s: %d %s, want 403 and PermissionDenied", origin, code, body)
		}
	}
	if got, err := cli.Get(testCtx(t, 10*time.Second), "k"); err != nil || len(got.Kvs) != 0 {
		t.Fatalf("after the refused puts: %+v, %v; want no key", got, err)
	}
	if code, body := postURL(t, "http://"+srv.ClientAddrs()[0].String()+"/v3/kv/put", nil, put); code != http.StatusOK {
		t.Fatalf("the same put without Origin: %d %s", code, body)
	}
}

// TestGateway_versionHealth: etcd's GET /version names the API level
// chute answers as; GET /health is true for a member that serves, and
// false (503) with the alarm named once NOSPACE is raised; a POST to
// either is 405.
func TestGateway_versionHealth(t *testing.T) {
	srv, _ := startServer(t, nil)
	base := "http://" + srv.ClientAddrs()[0].String()
	var v map[string]string
	code, body := getURL(t, base+"/version")
	if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil || v["etcdserver"] != APIVersion || v["etcdcluster"] != APIVersion {
		t.Fatalf("/version: %d %s, want etcdserver and etcdcluster %s", code, body, APIVersion)
	}
	if code, body := getURL(t, base+"/health"); code != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
		t.Fatalf("/health: %d %s, want 200 and true", code, body)
	}
	if err := srv.RaiseNoSpace(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if code, body := getURL(t, base+"/health"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"health":"false"`) || !strings.Contains(body, "NOSPACE") {
		t.Fatalf("/health with NOSPACE raised: %d %s, want 503, false and the alarm", code, body)
	}
	for _, p := range []string{"/version", "/health"} {
		if code, _ := postURL(t, base+p, nil, ""); code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d, want 405", p, code)
		}
	}
}

// TestGateway_unknownEnumName: an enum name that is not one is refused,
// as etcd's gateway refuses it, where unknown fields are ignored, as
// there: protojson's DiscardUnknown dropped the name, so a compare with
// a misspelled result became EQUAL and the txn deleted the key it was
// meant to keep.
func TestGateway_unknownEnumName(t *testing.T) {
	srv, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	txn := func(result string) string {
		return `{"compare":[{"key":"` + b64("k") + `","target":"VALUE","result":"` + result + `","value":"` + b64("a") + `"}],` +
			`"success":[{"request_delete_range":{"key":"` + b64("k") + `"}}],"bogus":1}`
	}
	code, body := gatewayPost(t, srv, "/v3/kv/txn", "", txn("NOT_EQUALS"))
	if code != http.StatusBadRequest || !strings.Contains(body, `unknown value \"NOT_EQUALS\"`) || !strings.Contains(body, `"code":3`) {
		t.Errorf("txn with the enum name NOT_EQUALS: %d %s, want 400 naming it", code, body)
	}
	if resp, err := cli.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("k after the refused txn: %v, %v; want it kept", resp, err)
	}
	// A real name, beside an unknown field: the txn runs.
	code, body = gatewayPost(t, srv, "/v3/kv/txn", "", txn("NOT_EQUAL"))
	if code != http.StatusOK || strings.Contains(body, `"succeeded":true`) {
		t.Errorf("txn with NOT_EQUAL: %d %s, want 200, not succeeded", code, body)
	}
	if resp, err := cli.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("k after a txn whose compare failed: %v, %v; want it kept", resp, err)
	}
}

// TestGateway_streamBodies: a stream's first request that does not
// decode is answered at once with the error, as etcd's gateway answers
// it (the stream waited for an answer that never came); and a stream's
// requests are bounded each, not as a whole: a long-lived watch whose
// requests added up past the bound had every later one dropped without
// a word, where etcd answers them.
func TestGateway_streamBodies(t *testing.T) {
	srv, _ := startServer(t, func(c *Config) { c.MaxRequestBytes = 1 << 10 })
	ctx := testCtx(t, 30*time.Second)
	for _, path := range []string{"/v3/watch", "/v3/lease/keepalive"} {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, err := http.NewRequestWithContext(hctx, http.MethodPost, "http://"+srv.ClientAddrs()[0].String()+path, strings.NewReader(`{bad`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s with a body that is no JSON: %v, want an answer", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"code":3`) {
			t.Errorf("%s with a body that is no JSON: %d %s, want 400 and code 3", path, resp.StatusCode, b)
		}
	}

	// Cancels of no watch (no answer each), past the whole-body bound of
	// twice max-request-bytes and gRPC's margin, then a create.
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.ClientAddrs()[0].String()+"/v3/watch", pr)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		cancel := []byte(`{"cancel_request":{"watch_id":"99"}}` + "\n")
		for sent := 0; sent < 2*(1<<10)+grpcOverheadBytes+(64<<10); sent += len(cancel) {
			if _, err := pw.Write(cancel); err != nil {
				return
			}
		}
		_, _ = pw.Write([]byte(`{"create_request":{"key":"` + b64("k") + `"}}` + "\n"))
	}()
	t.Cleanup(func() { _ = pw.Close() })
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.Contains(lines.Text(), `"created":true`) {
		t.Fatalf("a create after %d KiB of requests on one stream: %q (%v), want created", (grpcOverheadBytes+(66<<10))>>10, lines.Text(), lines.Err())
	}
	// Each request is held to the bound: one past it is refused, the
	// requests before it, past it in all, are not.
	js := gatewayJSON{JSONPb: &runtime.JSONPb{}, maxValue: 100}
	small := strings.Repeat(`{"cancel_request":{"watch_id":"99"}}`, 10)
	dec := js.NewDecoder(strings.NewReader(small + `{"create_request":{"key":"` + b64(strings.Repeat("x", 200)) + `"}}`))
	for i := range 10 {
		if err := dec.Decode(&pb.WatchRequest{}); err != nil {
			t.Fatalf("request %d of %d bytes: %v", i, len(small)/10, err)
		}
	}
	if err := dec.Decode(&pb.WatchRequest{}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "too large") {
		t.Errorf("a request past the bound: %v, want InvalidArgument, too large", err)
	}
}
