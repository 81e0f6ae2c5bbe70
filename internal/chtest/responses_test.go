//go:build e2e

package chtest

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// These tests pin what ClickHouse 18.16 answers over HTTP, as tabled in
// doc.go; the sink's error classification relies on them.

// exceptionSuffix ends every exception body 18.16 sends.
const exceptionSuffix = ", e.what() = DB::Exception\n"

func TestServer_insertResponses(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{User: "sink", Password: "secret"})
	s.Exec(t, createT)
	s.Exec(t, "CREATE TABLE dt (d Date, t DateTime, e Enum8('a' = 1)) ENGINE = MergeTree ORDER BY d")

	skip := url.Values{"input_format_skip_unknown_fields": {"1"}}
	token := url.Values{"insert_deduplication_token": {"q-1-1-2"}}
	tests := []struct {
		name       string
		table      string
		settings   url.Values
		user, pass string
		rows       string
		wantStatus int
		wantPrefix string // of the body; "" wants an empty body
	}{
		{"ok", "t", nil, "", "", `{"id":1,"s":"a"}` + "\n" + `{"id":2,"s":"b"}`, 200, ""},
		{"ok as user", "t", nil, "sink", "secret", `{"id":3,"s":"c"}`, 200, ""},
		{"empty body", "t", nil, "", "", "", 200, ""},
		{"missing field takes the default", "t", nil, "", "", `{"id":4}`, 200, ""},
		{"unknown field skipped", "t", skip, "", "", `{"id":5,"zz":1}`, 200, ""},
		{"string into UInt64", "t", nil, "", "", `{"id":6,"s":"a"}` + "\n" + `{"id":"x","s":"b"}`, 500,
			`Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected " before: x","s":"b"}: (while read the value of key id): (at row 2)`},
		{"float into UInt64", "t", nil, "", "", `{"id":1.5}`, 500, "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: .5}"},
		{"not JSON", "t", nil, "", "", "hello", 500, "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected { before: hello: (at row 1)"},
		{"JSON array", "t", nil, "", "", "[1]", 500, "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected { before: [1]"},
		{"null into String", "t", nil, "", "", `{"id":7,"s":null}`, 400, "Code: 26, e.displayText() = DB::Exception: Cannot parse JSON string: expected opening quote"},
		{"number into String", "t", nil, "", "", `{"id":7,"s":1}`, 400, "Code: 26, "},
		{"negative into UInt64", "t", nil, "", "", `{"id":-1}`, 400, "Code: 72, e.displayText() = DB::Exception: Unsigned type must not contain '-' symbol"},
		{"unknown field", "t", nil, "", "", `{"id":8,"zz":1}`, 500, "Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing JSONEachRow format: zz"},
		{"duplicate field", "t", nil, "", "", `{"id":8,"id":9}`, 500, "Code: 117, e.displayText() = DB::Exception: Duplicate field found"},
		{"truncated row", "t", nil, "", "", `{"id":9,"s":"x"`, 500, "Code: 33, e.displayText() = DB::Exception: Unexpected end of stream while parsing JSONEachRow format"},
		{"bad DateTime", "dt", nil, "", "", `{"d":"2024-01-02","t":"yesterday"}`, 400, "Code: 41, e.displayText() = DB::Exception: Cannot parse datetime"},
		{"ISO DateTime, basic parsing", "dt", nil, "", "", `{"t":"2024-01-02T03:04:05Z"}`, 500, "Code: 27, "},
		{"ISO DateTime, best_effort", "dt", url.Values{"date_time_input_format": {"best_effort"}}, "", "", `{"t":"2024-01-02T03:04:05Z"}`, 200, ""},
		{"bad Enum", "dt", nil, "", "", `{"e":"zz"}`, 500, "Code: 49, e.displayText() = DB::Exception: Unknown element 'zz' for type Enum8('a' = 1)"},
		{"unknown table", "nope", nil, "", "", `{"id":1}`, 404, "Code: 60, e.displayText() = DB::Exception: Table default.nope doesn't exist."},
		{"unknown database", "nodb.t", nil, "", "", `{"id":1}`, 404, "Code: 81, e.displayText() = DB::Exception: Database nodb doesn't exist"},
		{"insert_deduplication_token", "t", token, "", "", `{"id":1}`, 404, "Code: 115, e.displayText() = DB::Exception: Unknown setting insert_deduplication_token"},
		{"wrong password", "t", nil, "sink", "bad", `{"id":1}`, 401, "Code: 193, e.displayText() = DB::Exception: Wrong password for user sink"},
		{"no password", "t", nil, "sink", "", `{"id":1}`, 401, "Code: 194, e.displayText() = DB::Exception: Password required for user sink"},
		{"unknown user", "t", nil, "ghost", "x", `{"id":1}`, 401, "Code: 192, e.displayText() = DB::Exception: Unknown user ghost"},
		{"unknown format", "t FORMAT JSONEachRoww --", nil, "", "", `{"id":1}`, 404, "Code: 73, e.displayText() = DB::Exception: Unknown format JSONEachRoww"},
		{"syntax error", "t FORMATT --", nil, "", "", `{"id":1}`, 400, "Code: 62, e.displayText() = DB::Exception: Syntax error: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, s, "INSERT INTO "+tt.table+" FORMAT JSONEachRow", tt.settings, tt.user, tt.pass, tt.rows)
			checkReply(t, r, tt.wantStatus, tt.wantPrefix)
			if got, want := r.header.Get("Content-Type"), "text/plain; charset=UTF-8"; got != want {
				t.Errorf("Content-Type: got %q, want %q", got, want)
			}
			if tt.wantStatus == http.StatusUnauthorized {
				if got, want := r.header.Get("WWW-Authenticate"), `Basic realm="ClickHouse server HTTP API"`; got != want {
					t.Errorf("WWW-Authenticate: got %q, want %q", got, want)
				}
			}
		})
	}
	// Only the "ok" rows, the default-filled row and the row whose unknown
	// field was skipped are in; every refused batch left nothing.
	if got, want := s.Query(t, "SELECT id, s FROM t ORDER BY id"), "1\ta\n2\tb\n3\tc\n4\t\n5\t"; got != want {
		t.Fatalf("rows after the table: got %q, want %q", got, want)
	}
}

// checkReply checks status and body prefix, and that 18.16 sends no
// X-ClickHouse-Exception-Code header and ends every exception body alike.
func checkReply(t *testing.T, r reply, wantStatus int, wantPrefix string) {
	t.Helper()
	if r.status != wantStatus {
		t.Fatalf("status: got %d, want %d (body %q)", r.status, wantStatus, r.body)
	}
	if wantPrefix == "" && r.body != "" {
		t.Fatalf("body: got %q, want empty", r.body)
	}
	if !strings.HasPrefix(r.body, wantPrefix) {
		t.Fatalf("body: got %q, want prefix %q", r.body, wantPrefix)
	}
	if wantStatus != http.StatusOK && !strings.HasSuffix(r.body, exceptionSuffix) {
		t.Errorf("body: got %q, want suffix %q", r.body, exceptionSuffix)
	}
	if v, ok := r.header["X-Clickhouse-Exception-Code"]; ok {
		t.Errorf("X-ClickHouse-Exception-Code: got %q, want no such header from 18.16", v)
	}
}

func TestServer_knownSettings(t *testing.T) {
	t.Parallel()
	s := Start(t)
	got := s.Query(t, `SELECT name, value FROM system.settings WHERE name IN
		('insert_deduplication_token', 'input_format_skip_unknown_fields', 'date_time_input_format',
		 'insert_deduplicate', 'max_insert_block_size', 'min_insert_block_size_rows', 'min_insert_block_size_bytes',
		 'send_progress_in_http_headers', 'background_pool_size')
		ORDER BY name`)
	want := strings.Join([]string{
		"background_pool_size\t4", // chtest's config; 16 by default
		"date_time_input_format\tbasic",
		"input_format_skip_unknown_fields\t0",
		"insert_deduplicate\t1",
		"max_insert_block_size\t1048576",
		"min_insert_block_size_bytes\t268435456",
		"min_insert_block_size_rows\t1048576",
		"send_progress_in_http_headers\t0",
	}, "\n")
	if got != want {
		t.Fatalf("settings:\ngot\n%s\nwant\n%s", got, want)
	}
	if got := s.Query(t, "SELECT version()"); got != "18.16.1" {
		t.Logf("version: got %s; the findings in doc.go were taken on 18.16.1", got)
	}
}

func TestServer_insertAtomicity(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Exec(t, createT)
	rows := `{"id":1}` + "\n" + `{"id":2}` + "\n" + `{"id":3}` + "\n" + `{"id":4}` + "\n" + `{"id":"bad"}`

	// Under max_insert_block_size and min_insert_block_size_rows/bytes the
	// batch is one block: a refused row leaves nothing behind.
	checkReply(t, insert(t, s, "t", rows, nil), 500, "Code: 27, ")
	if got := s.Count(t, "t"); got != 0 {
		t.Fatalf("rows after a refused one-block batch: got %d, want 0", got)
	}

	// Past them, blocks parsed before the bad row are committed although
	// the answer is 500.
	small := url.Values{"max_insert_block_size": {"2"}, "min_insert_block_size_rows": {"2"}}
	checkReply(t, insert(t, s, "t", rows, small), 500, "Code: 27, ")
	if got := s.Count(t, "t"); got != 4 {
		t.Fatalf("rows after a refused multi-block batch: got %d, want 4", got)
	}

	// A plain MergeTree does not deduplicate a repeated batch.
	s.Exec(t, "TRUNCATE TABLE t")
	for range 2 {
		checkReply(t, insert(t, s, "t", `{"id":1}`+"\n"+`{"id":2}`, nil), 200, "")
	}
	if got := s.Count(t, "t"); got != 4 {
		t.Fatalf("rows after the same batch twice: got %d, want 4", got)
	}

	// 2^64+ wraps silently, and so does 300 into UInt8.
	s.Exec(t, "TRUNCATE TABLE t")
	checkReply(t, insert(t, s, "t", `{"id":99999999999999999999}`, nil), 200, "")
	if got, want := s.Query(t, "SELECT id FROM t"), "7766279631452241919"; got != want {
		t.Fatalf("UInt64 overflow: got %s, want %s", got, want)
	}
}

func TestServer_tooManyParts(t *testing.T) {
	t.Parallel()
	s := Start(t)
	// 18.16 checks parts_to_delay_insert first and returns below it, so
	// the throw threshold only bites when the delay one is not above it.
	s.Exec(t, "CREATE TABLE p (id UInt64) ENGINE = MergeTree ORDER BY id SETTINGS parts_to_throw_insert = 2, parts_to_delay_insert = 2")
	s.Exec(t, "SYSTEM STOP MERGES")
	for i := range 2 {
		checkReply(t, insert(t, s, "p", fmt.Sprintf(`{"id":%d}`, i), nil), 200, "")
	}
	checkReply(t, insert(t, s, "p", `{"id":3}`, nil), 500,
		"Code: 252, e.displayText() = DB::Exception: Too many parts (2). Merges are processing significantly slower than inserts.")
}

func TestServer_exceptionIn200(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Exec(t, createT)

	// A SELECT that fails after its output filled the send buffer answers
	// 200 and ends the body with the exception.
	q := "SELECT number, throwIf(number = 500000) FROM numbers(1000000)"
	r := post(t, s, q, url.Values{"max_block_size": {"1000"}}, "", "", "")
	if r.status != 200 || !strings.Contains(r.body, "\nCode: 395, e.displayText() = DB::Exception: Value passed to 'throwIf' function is non zero") {
		t.Fatalf("streaming SELECT: got %d and body ending %q, want 200 ending in Code: 395", r.status, tail(r.body))
	}
	// wait_end_of_query=1 buffers the answer and turns that into a 500.
	r = post(t, s, q, url.Values{"max_block_size": {"1000"}, "wait_end_of_query": {"1"}}, "", "", "")
	checkReply(t, r, 500, "Code: 395, ")

	// An INSERT ... FORMAT answers no body, so even with progress headers
	// and a batch of several blocks the error comes as a 500.
	var b strings.Builder
	for i := range 300000 {
		if i == 250000 {
			b.WriteString(`{"id":"bad"}` + "\n")
			continue
		}
		fmt.Fprintf(&b, `{"id":%d}`+"\n", i)
	}
	progress := url.Values{
		"send_progress_in_http_headers": {"1"}, "http_headers_progress_interval_ms": {"0"},
		"max_insert_block_size": {"100000"}, "min_insert_block_size_rows": {"100000"},
	}
	r = insert(t, s, "t", b.String(), progress)
	checkReply(t, r, 500, "Code: 27, ")
	if got := s.Count(t, "t"); got != 200000 {
		t.Fatalf("rows after the refused 3-block batch: got %d, want 200000", got)
	}
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}
