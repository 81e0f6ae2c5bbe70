package sink

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"chute/internal/testcerts"
)

// fakeClickHouse is an HTTP server on 127.0.0.1:0 that answers as a test
// tells it and records each request as it came over the wire. It is used
// ONLY for what the real ClickHouse 18.16 of clickhouse_test.go cannot
// produce: a 400 carrying a data code in X-ClickHouse-Exception-Code, an
// exception inside a 200 body, an answer slower than the timeout, a TLS
// endpoint, and a close look at the request bytes.
type fakeClickHouse struct {
	srv *httptest.Server

	mu       sync.Mutex // guards requests and answer
	requests []fakeRequest
	answer   func(w http.ResponseWriter, r *http.Request, body []byte)
}

type fakeRequest struct {
	Method, URI, Host, Auth, ContentType string
	Close                                bool // the client sent Connection: close
	Body                                 []byte
}

func newFakeClickHouse(t *testing.T, tlsServer bool) *fakeClickHouse {
	t.Helper()
	f := &fakeClickHouse{}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	if tlsServer {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeClickHouse) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{
		Method: r.Method, URI: r.RequestURI, Host: r.Host, Auth: r.Header.Get("Authorization"),
		ContentType: r.Header.Get("Content-Type"), Close: r.Close, Body: body,
	})
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return // 200, empty body: what ClickHouse answers an INSERT
	}
	answer(w, r, body)
}

func (f *fakeClickHouse) setAnswer(a func(w http.ResponseWriter, r *http.Request, body []byte)) {
	f.mu.Lock()
	f.answer = a
	f.mu.Unlock()
}

func (f *fakeClickHouse) lastRequest(t *testing.T) fakeRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("the fake ClickHouse got no request")
	}
	return f.requests[len(f.requests)-1]
}

func (f *fakeClickHouse) endpoint(user, password string) Endpoint {
	return Endpoint{Addr: f.srv.Listener.Addr().String(), TLS: f.srv.TLS != nil, User: user, Password: password}
}

func answerWith(status int, code, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if code != "" {
			w.Header().Set(ExceptionCodeHeader, code)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestClient_Insert_request(t *testing.T) {
	f := newFakeClickHouse(t, false)
	c := NewClient(ClientConfig{Timeout: 5 * time.Second})
	ep := f.endpoint("alice", "s3cr3t")
	rows := [][]byte{
		[]byte(`{"id":18446744073709551615,"n":9007199254740993}`),
		[]byte(`{"s":"caf\u00e9 \"q\" \\ é"}`),
		[]byte(` {"x":1.50}	`),
	}
	target := Target("analytics", "events")
	res := c.Insert(context.Background(), ep, target, rows, "")
	if !res.OK() || res.Status != 200 || res.Code != 0 || res.Message != "" || res.Err != nil {
		t.Fatalf("got %+v, want OK", res)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration %v, want > 0", res.Duration)
	}
	req := f.lastRequest(t)
	want := fakeRequest{
		Method: "POST",
		URI:    "/?query=INSERT%20INTO%20%60analytics%60.%60events%60%20FORMAT%20JSONEachRow" + pinnedSettings,
		Host:   ep.Addr,
		Auth:   "Basic YWxpY2U6czNjcjN0",
		Close:  true,
		Body:   bytes.Join(rows, []byte("\n")),
	}
	if req.Method != want.Method || req.URI != want.URI || req.Host != want.Host || req.Auth != want.Auth || req.Close != want.Close {
		t.Errorf("request:\n got %+v\nwant %+v", req, want)
	}
	if !bytes.Equal(req.Body, want.Body) {
		t.Errorf("body:\n got %q\nwant %q", req.Body, want.Body)
	}
	if req.ContentType != "" {
		t.Errorf("Content-Type %q, want none", req.ContentType)
	}

	res = c.Insert(context.Background(), f.endpoint("", ""), target, rows[:1], "ch:events/1/1-1")
	if !res.OK() {
		t.Fatalf("got %+v, want OK", res)
	}
	req = f.lastRequest(t)
	if want := InsertURI(target, "ch:events/1/1-1"); req.URI != want {
		t.Errorf("URI with a token: got %s, want %s", req.URI, want)
	}
	if req.Auth != "" {
		t.Errorf("Authorization %q without user info, want none", req.Auth)
	}
}

func TestClient_Insert_classifies(t *testing.T) {
	f := newFakeClickHouse(t, false)
	c := NewClient(ClientConfig{Timeout: 5 * time.Second})
	ep := f.endpoint("alice", "s3cr3t")
	long := "Code: 27. DB::Exception: Cannot parse input: " + strings.Repeat("row data ", 200) + "(at row 1)"
	tests := []struct {
		name     string
		answer   func(http.ResponseWriter, *http.Request, []byte)
		class    Class
		code     int
		status   int
		inMsg    string
		maxMsg   int
		noSecret bool
	}{
		{name: "400 with a data code in the header", answer: answerWith(400, "27", "Code: 27. DB::Exception: Cannot parse input (at row 1)"),
			class: ClassData, code: 27, status: 400, inMsg: "Cannot parse input"},
		{name: "exception inside a 200", answer: answerWith(200, "", "Code: 241, e.displayText() = DB::Exception: Memory limit exceeded, e.what() = DB::Exception"),
			class: ClassTransient, code: 241, status: 200, inMsg: "Memory limit"},
		{name: "data exception inside a 200", answer: answerWith(200, "", "Code: 27. DB::Exception: Cannot parse input (at row 2)"),
			class: ClassData, code: 27, status: 200},
		{name: "too many parts", answer: answerWith(500, "252", "Code: 252. DB::Exception: Too many parts (300)"),
			class: ClassTransient, code: 252, status: 500},
		{name: "unknown table", answer: answerWith(404, "60", "Code: 60. DB::Exception: Table default.nope doesn't exist"),
			class: ClassConfig, code: 60, status: 404},
		{name: "echoed password", answer: answerWith(401, "516", "Code: 516. DB::Exception: alice: Authentication failed: password s3cr3t, header Basic YWxpY2U6czNjcjN0"),
			class: ClassConfig, code: 516, status: 401, noSecret: true, inMsg: "xxxxx"},
		{name: "long message", answer: answerWith(400, "", long), class: ClassData, code: 27, status: 400, maxMsg: maxMessage + 3},
		{name: "502 empty", answer: answerWith(502, "", ""), class: ClassTransient, status: 502, inMsg: "HTTP 502 with no body"},
	}
	for _, tt := range tests {
		f.setAnswer(tt.answer)
		res := c.Insert(context.Background(), ep, "`d`.`t`", [][]byte{[]byte(`{"a":1}`)}, "")
		if res.OK() || res.Class != tt.class || res.Code != tt.code || res.Status != tt.status || res.Err != nil {
			t.Errorf("%s: got %+v, want class %s code %d status %d", tt.name, res, tt.class, tt.code, tt.status)
		}
		if !strings.Contains(res.Message, tt.inMsg) {
			t.Errorf("%s: message %q, want it to hold %q", tt.name, res.Message, tt.inMsg)
		}
		if tt.maxMsg > 0 && len(res.Message) > tt.maxMsg {
			t.Errorf("%s: message of %d bytes, want at most %d", tt.name, len(res.Message), tt.maxMsg)
		}
		if strings.Contains(res.Message, "s3cr3t") || strings.Contains(res.Message, "YWxpY2U6czNjcjN0") {
			t.Errorf("%s: message %q shows the password", tt.name, res.Message)
		}
	}
}

func TestClient_Insert_noServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := NewClient(ClientConfig{Timeout: 2 * time.Second})
	res := c.Insert(context.Background(), Endpoint{Addr: addr, User: "u", Password: "s3cr3t"}, "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
	if res.OK() || res.Class != ClassTransient || res.Err == nil || res.Status != 0 {
		t.Fatalf("got %+v, want a transient connect error", res)
	}
	if !strings.Contains(res.Message, addr) || strings.Contains(res.Message, "s3cr3t") {
		t.Errorf("message %q: want the address, never the password", res.Message)
	}
}

// A server that closes the connection without answering is transient.
func TestClient_Insert_closedWithoutAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	c := NewClient(ClientConfig{Timeout: 2 * time.Second})
	res := c.Insert(context.Background(), Endpoint{Addr: ln.Addr().String()}, "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
	if res.OK() || res.Class != ClassTransient || res.Err == nil {
		t.Fatalf("got %+v, want a transient error", res)
	}
}

func TestClient_Insert_TLS(t *testing.T) {
	f := newFakeClickHouse(t, true)
	pool := x509.NewCertPool()
	pool.AddCert(f.srv.Certificate())
	c := NewClient(ClientConfig{Timeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: pool}})
	ep := f.endpoint("u", "p")
	if !ep.TLS {
		t.Fatal("endpoint without TLS")
	}
	res := c.Insert(context.Background(), ep, "`d`.`t`", [][]byte{[]byte(`{"a":1}`)}, "")
	if !res.OK() {
		t.Fatalf("got %+v, want OK over TLS", res)
	}
	if req := f.lastRequest(t); string(req.Body) != `{"a":1}` || req.Auth != "Basic dTpw" {
		t.Errorf("request over TLS: %+v", req)
	}
	// Without the test CA the certificate is refused: a config error,
	// which no retry alone cures, saying what to check.
	res = NewClient(ClientConfig{Timeout: 5 * time.Second}).Insert(context.Background(), ep, "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
	var unknownCA x509.UnknownAuthorityError
	if res.OK() || res.Class != ClassConfig || !errors.As(res.Err, &unknownCA) {
		t.Fatalf("got %+v, want a config error wrapping x509.UnknownAuthorityError", res)
	}
	if !strings.Contains(res.Message, "certificate signed by unknown authority") || !strings.Contains(res.Message, "--clickhouse-ca-file") {
		t.Errorf("message %q: want the cause and the flag to check", res.Message)
	}
	// The endpoint's TLS configuration wins over the client's.
	ep.TLSConfig = &tls.Config{RootCAs: pool}
	if res := NewClient(ClientConfig{Timeout: 5 * time.Second}).Insert(context.Background(), ep, "`d`.`t`", [][]byte{[]byte(`{}`)}, ""); !res.OK() {
		t.Fatalf("with Endpoint.TLSConfig: got %+v, want OK", res)
	}
}

// A server that demands a client certificate and gets none refuses the
// connection: in TLS 1.2 during the handshake, in TLS 1.3 at the first
// read after it (which fasthttp alone reports as EOF). Both are config
// errors that point at the client certificate; with one it works.
func TestClient_Insert_TLSClientCertificate(t *testing.T) {
	ca := testcerts.NewCA(t, "test CA")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	serverPair := ca.Issue(t, "server", "127.0.0.1")
	serverCert, err := tls.X509KeyPair(serverPair.CertPEM, serverPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientPair := ca.Issue(t, "chute", "127.0.0.1")
	clientCert, err := tls.X509KeyPair(clientPair.CertPEM, clientPair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			f := &fakeClickHouse{}
			f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
			f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert,
				ClientCAs: pool, MinVersion: version, MaxVersion: version}
			f.srv.StartTLS()
			t.Cleanup(f.srv.Close)
			c := NewClient(ClientConfig{Timeout: 5 * time.Second})
			ep := f.endpoint("", "")
			ep.TLSConfig = &tls.Config{RootCAs: pool}
			res := c.Insert(context.Background(), ep, "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
			if res.Class != ClassConfig || !strings.Contains(res.Message, "--clickhouse-cert-file") {
				t.Fatalf("without a client certificate: got %+v, want a config error naming --clickhouse-cert-file", res)
			}
			t.Logf("without a client certificate: %s", res.Message)
			ep.TLSConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}
			if res := c.Insert(context.Background(), ep, "`d`.`t`", [][]byte{[]byte(`{}`)}, ""); !res.OK() {
				t.Fatalf("with a client certificate: got %+v, want OK", res)
			}
		})
	}
}

// An https URL pointing at a plain HTTP port is a config error.
func TestClient_Insert_TLSToPlainHTTP(t *testing.T) {
	f := newFakeClickHouse(t, false)
	ep := f.endpoint("", "")
	ep.TLS = true
	res := NewClient(ClientConfig{Timeout: 5 * time.Second}).Insert(context.Background(), ep, "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
	if res.Class != ClassConfig || !strings.Contains(res.Message, "https_port") {
		t.Fatalf("got %+v, want a config error saying the port does not speak TLS", res)
	}
}

func TestClient_HasSetting(t *testing.T) {
	f := newFakeClickHouse(t, false)
	f.setAnswer(func(w http.ResponseWriter, _ *http.Request, body []byte) {
		if strings.Contains(string(body), "'"+TokenSetting+"'") {
			io.WriteString(w, "1\n")
			return
		}
		io.WriteString(w, "0\n")
	})
	c := NewClient(ClientConfig{Timeout: 5 * time.Second})
	ep := f.endpoint("", "")
	has, err := c.HasSetting(context.Background(), ep, TokenSetting)
	if err != nil || !has {
		t.Fatalf("HasSetting(%s): got %v, %v; want true", TokenSetting, has, err)
	}
	if req := f.lastRequest(t); req.URI != "/" || string(req.Body) != settingQuery(TokenSetting) || !req.Close {
		t.Errorf("request %+v", req)
	}
	if has, err := c.HasSetting(context.Background(), ep, "nope"); err != nil || has {
		t.Fatalf("HasSetting(nope): got %v, %v; want false", has, err)
	}

	f.setAnswer(answerWith(401, "", "Code: 193, e.displayText() = DB::Exception: Wrong password for user u"))
	_, err = c.HasSetting(context.Background(), ep, TokenSetting)
	var re *ResultError
	if !errors.As(err, &re) || re.Result.Class != ClassConfig || re.Result.Code != 193 {
		t.Fatalf("got %v, want a config *ResultError with code 193", err)
	}
	f.setAnswer(answerWith(200, "", "not a number"))
	if _, err = c.HasSetting(context.Background(), ep, TokenSetting); !errors.As(err, &re) {
		t.Fatalf("got %v, want a *ResultError", err)
	}
}

func TestClientConfig_Validate(t *testing.T) {
	if err := DefaultClientConfig().Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
	if err := (ClientConfig{Timeout: -time.Second}).Validate(); err == nil {
		t.Error("negative timeout: got nil")
	}
	if c := NewClient(ClientConfig{}); c.timeout != DefaultTimeout {
		t.Errorf("zero timeout: got %v, want %v", c.timeout, DefaultTimeout)
	}
}

// ClickHouse answers some errors before it has read the whole body and
// closes the connection; the answer wins over the failed write.
func TestClient_Insert_earlyAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 4096)
		conn.Read(buf) // the request line and headers, a little of the body
		io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\nX-ClickHouse-Exception-Code: 27\r\nContent-Length: 51\r\nConnection: close\r\n\r\n"+
			"Code: 27. DB::Exception: Cannot parse (at row 1)\n\n\n")
	}()
	big := []byte(`{"s":"` + strings.Repeat("x", 8<<20) + `"}`)
	c := NewClient(ClientConfig{Timeout: 10 * time.Second})
	res := c.Insert(context.Background(), Endpoint{Addr: ln.Addr().String()}, "`d`.`t`", [][]byte{big}, "")
	<-done
	if res.Class != ClassData || res.Code != 27 || res.Status != 400 || res.Err != nil {
		t.Fatalf("got %+v, want the early 400 with code 27", res)
	}
}

func TestResult_OK(t *testing.T) {
	tests := []struct {
		r    Result
		want bool
	}{
		{Result{Status: 200, Class: ClassOK}, true},
		{Result{}, false}, // a zero Result never counts as inserted
		{Result{Status: 200, Class: ClassTransient}, false},
		{Result{Status: 200, Class: ClassOK, Err: io.EOF}, false},
	}
	for _, tt := range tests {
		if got := tt.r.OK(); got != tt.want {
			t.Errorf("%+v.OK(): got %v, want %v", tt.r, got, tt.want)
		}
	}
}

func TestResultError_Error(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{Result{Status: 404, Code: 60, Class: ClassConfig, Message: "Code: 60. Table x doesn't exist"},
			"sink: insert: config error, status 404, code 60: Code: 60. Table x doesn't exist"},
		{Result{Class: ClassTransient, Err: io.EOF, Message: "sink: POST to h:1: EOF"},
			"sink: insert: transient: POST to h:1: EOF"},
	}
	for _, tt := range tests {
		if got := (&ResultError{Op: "insert", Result: tt.r}).Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// pieceRecorder is an io.Writer that records the size of each write and
// the bytes it took; the write numbered failAt (from 0) fails, and with
// short set each write takes only that many bytes, without an error.
type pieceRecorder struct {
	pieces []int
	buf    []byte
	failAt int
	short  int
}

var errPieceFailed = errors.New("piece refused")

func (r *pieceRecorder) Write(p []byte) (int, error) {
	r.pieces = append(r.pieces, len(p))
	if len(r.pieces)-1 == r.failAt {
		return 0, errPieceFailed
	}
	if r.short > 0 && r.short < len(p) {
		p = p[:r.short]
	}
	r.buf = append(r.buf, p...)
	return len(p), nil
}

// TestPieceWriter_Write: a body of several pieces reaches the writer
// whole and in order, in writes of at most bodyPiece; a failing piece
// ends it with the bytes written before it, and a writer that takes
// less than a piece without an error is a short write.
func TestPieceWriter_Write(t *testing.T) {
	body := make([]byte, 2*bodyPiece+100)
	for i := range body {
		body[i] = byte(i * 7)
	}

	rec := &pieceRecorder{failAt: -1}
	n, err := pieceWriter{rec}.Write(body)
	if n != len(body) || err != nil {
		t.Fatalf("Write of %d bytes = %d, %v; want all, nil", len(body), n, err)
	}
	if want := []int{bodyPiece, bodyPiece, 100}; !slices.Equal(rec.pieces, want) {
		t.Errorf("pieces %v, want %v", rec.pieces, want)
	}
	if !bytes.Equal(rec.buf, body) {
		t.Error("the bytes written are not the body's, in order")
	}

	rec = &pieceRecorder{failAt: 1}
	n, err = pieceWriter{rec}.Write(body)
	if n != bodyPiece || !errors.Is(err, errPieceFailed) || len(rec.pieces) != 2 {
		t.Errorf("second piece refused: Write = %d, %v after %d writes; want %d, %v after 2",
			n, err, len(rec.pieces), bodyPiece, errPieceFailed)
	}

	rec = &pieceRecorder{failAt: -1, short: 10}
	n, err = pieceWriter{rec}.Write(body)
	if n != 10 || !errors.Is(err, io.ErrShortWrite) || len(rec.pieces) != 1 {
		t.Errorf("a writer taking 10 bytes: Write = %d, %v after %d writes; want 10, %v after 1",
			n, err, len(rec.pieces), io.ErrShortWrite)
	}
}

// TestViewFailed: a view's failure is told by the context ClickHouse
// ends the exception with, not by the words anywhere: a parse error
// quotes the rows after the one it could not read, and a row holding
// them made a refused batch count as inserted (its rows dropped).
func TestViewFailed(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer string
		want   bool
	}{
		// 18.16's answers, as captured from the server the tests run.
		{"view failed", "Code: 6, e.displayText() = DB::Exception: Cannot parse string 'abc' as UInt64: syntax error at begin of string. Note: there are toUInt64OrZero and toUInt64OrNull functions, which returns zero/NULL instead of throwing exception.: while pushing to view default.vmv, e.what() = DB::Exception\n", true},
		{"view of a row quoting the words failed", "Code: 6, e.displayText() = DB::Exception: Cannot parse string 'while pushing to view x' as UInt64: syntax error at begin of string.: while pushing to view `db`.`v`, e.what() = DB::Exception\n", true},
		{"parse error quoting a row with the words", "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \" before: x\",\"s\":\"while pushing to view\"}\n{\"id\":3,\"s\":\"ok\"}: (while read the value of key id): (at row 2)\n, e.what() = DB::Exception\n", false},
		{"parse error quoting a row that ends like a view's", "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \" before: x\",\"s\":\"while pushing to view v, e.what() = DB::Exception\"}: (while read the value of key id): (at row 2)\n, e.what() = DB::Exception\n", false},
		{"unknown field named with the words", "Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing JSONEachRow format: while pushing to view v: (at row 1)\n, e.what() = DB::Exception\n", false},
		{"no view", "Code: 153, e.displayText() = DB::Exception: Division by zero, e.what() = DB::Exception\n", false},
		// Later releases: the view's uuid, the code's name, the version.
		{"view failed, later release", "Code: 6. DB::Exception: Cannot parse string 'abc' as UInt64: syntax error at begin of string: while pushing to view default.vmv (0f6d2c8e-8f2a-4b1e-9c3d-1a2b3c4d5e6f). (CANNOT_PARSE_TEXT) (version 24.3.1.2672 (official build))\n", true},
		{"parse error, later release", "Code: 27. DB::Exception: Cannot parse input: expected '\"' before: 'while pushing to view v': (while reading the value of key id): (at row 2)\n: While executing ParallelParsingBlockInputFormat. (CANNOT_PARSE_INPUT_ASSERTION_FAILED) (version 24.3.1.2672 (official build))\n", false},
	} {
		if got := viewFailed([]byte(c.answer)); got != c.want {
			t.Errorf("%s: viewFailed = %v, want %v", c.name, got, c.want)
		}
	}
}
