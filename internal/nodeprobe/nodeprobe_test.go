package nodeprobe

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"chute/dispatch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const statusJSON = `{"name":"a","member_id":"a0fafd8d2ec085b7","version":"x",
"members":[{"name":"a","id":"a0","status":"alive"},{"name":"b","id":"b0","status":"failed"},{"name":"c","id":"c0","status":"alive"}],
"queues":[{"name":"ch:x","dispatcher":"a0fafd8d2ec085b7","epoch":2,"depth_rows":7,"held_copies":1,"depth_bytes":90,"unacked":3,"stats":{"enqueued":9}}],
"backups":[{"queue":"ch:x","dispatcher":"1","rows":2,"bytes":20},{"queue":"ch:y","dispatcher":"1","rows":5,"bytes":50},{"queue":"ch:x","dispatcher":"2","rows":1,"bytes":10}]}`

const metricsText = `# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.51904e+07
# TYPE chute_queue_depth_bytes gauge
chute_queue_depth_bytes{otel_scope_name="chute",queue="ch:x"} 90
chute_queue_depth_bytes{otel_scope_name="chute",queue="a b}c"} 10
# TYPE chute_queue_puts_total counter
chute_queue_puts_total{queue="ch:x",result="OK"} 35
chute_queue_puts_total{queue="ch:x",result="InvalidArgument"} 3
chute_queue_puts_total{queue="jobs",result="OK"} 4
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 1.2e-05
go_gc_duration_seconds_sum 0.5
go_gc_duration_seconds_count 19
# TYPE rpc_server_call_duration_seconds histogram
rpc_server_call_duration_seconds_bucket{rpc_method="Put",le="+Inf"} 24
rpc_server_call_duration_seconds_sum{rpc_method="Put"} 1.5
rpc_server_call_duration_seconds_count{rpc_method="Put"} 24
rpc_server_call_duration_seconds_bucket{rpc_method="Txn",le="+Inf"} 2
rpc_server_call_duration_seconds_sum{rpc_method="Txn"} 0.25
rpc_server_call_duration_seconds_count{rpc_method="Txn"} 2
`

// fakeNode serves statusJSON and metricsText until the test ends and
// returns its host:port.
func fakeNode(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			_, _ = io.WriteString(w, statusJSON)
		case "/metrics":
			_, _ = io.WriteString(w, metricsText)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestStatus(t *testing.T) {
	addr := fakeNode(t)
	for _, a := range []string{addr, "http://" + addr, "http://" + addr + "/"} {
		st, err := Status(testContext(t), nil, a)
		if err != nil {
			t.Fatalf("Status(%s): %v", a, err)
		}
		if st.Name != "a" || st.Member != "a0fafd8d2ec085b7" || len(st.Members) != 3 {
			t.Errorf("Status(%s): got %+v", a, st)
		}
		q, ok := Queue(st, "ch:x")
		want := dispatch.QueueStatus{Name: "ch:x", Dispatcher: "a0fafd8d2ec085b7", Epoch: 2, Rows: 7, Held: 1, Bytes: 90, Unacked: 3}
		want.Stats.Enqueued = 9
		if !ok || q != want {
			t.Errorf("Queue(ch:x): got %+v, %v; want %+v", q, ok, want)
		}
		if _, ok := Queue(st, "ch:y"); ok {
			t.Error("Queue(ch:y): got ok, want none")
		}
		if n := Alive(st); n != 2 {
			t.Errorf("Alive: got %d, want 2", n)
		}
		if rows, bytes := Backup(st, "ch:x"); rows != 3 || bytes != 30 {
			t.Errorf("Backup(ch:x): got %d rows, %d bytes; want 3, 30", rows, bytes)
		}
	}
	if _, err := Status(testContext(t), http.DefaultClient, addr+"/nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Status of a 404: got %v, want an error naming 404", err)
	}
}

func TestReadMetrics_sum(t *testing.T) {
	m, err := ReadMetrics(testContext(t), nil, fakeNode(t))
	if err != nil {
		t.Fatalf("ReadMetrics: %v", err)
	}
	tests := []struct {
		name     string
		matchers []string
		want     float64
		found    bool
	}{
		{"process_resident_memory_bytes", nil, 25190400, true},
		{"chute_queue_depth_bytes", nil, 100, true},
		{"chute_queue_depth_bytes", []string{`queue="a b}c"`}, 10, true},
		{"chute_queue_puts_total", []string{`queue="ch:x"`}, 38, true},
		{"chute_queue_puts_total", []string{`queue="ch:x"`, `result="OK"`}, 35, true},
		{"chute_queue_puts_total", []string{`result=OK`}, 39, true},
		{"chute_queue_puts_total", []string{`queue="nope"`}, 0, false},
		{"chute_queue_puts_total", []string{`shard="1"`}, 0, false},
		{"go_gc_duration_seconds_count", nil, 19, true},
		{"go_gc_duration_seconds_sum", nil, 0.5, true},
		{"rpc_server_call_duration_seconds_count", nil, 26, true},
		{"rpc_server_call_duration_seconds_count", []string{`rpc_method="Put"`}, 24, true},
		{"rpc_server_call_duration_seconds_sum", []string{`rpc_method="Txn"`}, 0.25, true},
		{"chute_queue_depth_rows", nil, 0, false},
		{"process_resident_memory_bytes_count", nil, 0, false},
	}
	for _, tt := range tests {
		got, found := m.Sum(tt.name, tt.matchers...)
		if got != tt.want || found != tt.found {
			t.Errorf("Sum(%s, %q): got %v, %v; want %v, %v", tt.name, tt.matchers, got, found, tt.want, tt.found)
		}
	}
}

func TestParseMetrics_malformed(t *testing.T) {
	if _, err := ParseMetrics([]byte("metric_without_value\n")); err == nil {
		t.Error("ParseMetrics of a line without a value: got nil error")
	}
}

func TestSum_badMatcherPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Sum with matcher \"queue\": did not panic")
		}
	}()
	Metrics{}.Sum("x", "queue")
}

func TestReadRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Fatalf("ReadRSS reads Linux's /proc; this test runs on Linux only (GOOS %s)", runtime.GOOS)
	}
	rss, err := ReadRSS(os.Getpid())
	if err != nil || rss < 1<<20 || rss > 1<<40 {
		t.Errorf("ReadRSS(self): got %d, %v; want a size in bytes of at least 1 MiB", rss, err)
	}
	if _, err := ReadRSS(1 << 30); err == nil {
		t.Error("ReadRSS(no such process): got nil error")
	}
}

func TestSampleRSS_peaks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Fatalf("ReadRSS reads Linux's /proc; this test runs on Linux only (GOOS %s)", runtime.GOOS)
	}
	s := SampleRSS(time.Millisecond, os.Getpid(), 1<<30)
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1 // resident now
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Peaks()[0].Bytes < 64<<20 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got := s.Stop()
	runtime.KeepAlive(ballast)
	if len(got) != 2 {
		t.Fatalf("Stop: got %d peaks, want 2", len(got))
	}
	if self := got[0]; self.Pid != os.Getpid() || self.Bytes < 64<<20 || self.Samples < 1 || self.Err != nil {
		t.Errorf("peak of self: got %+v, want 64 MiB or more, samples and no error", self)
	}
	if gone := got[1]; gone.Samples != 0 || gone.Bytes != 0 || gone.Err == nil {
		t.Errorf("peak of a missing process: got %+v, want no samples and an error", gone)
	}
	if again := s.Stop(); again[0] != got[0] {
		t.Errorf("a second Stop: got %+v, want %+v", again[0], got[0])
	}
}

func TestQuery(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/" {
			http.Error(w, "want POST /", http.StatusBadRequest)
			return
		}
		if string(body) == "SELECT 1" {
			_, _ = io.WriteString(w, "1\n")
			return
		}
		http.Error(w, "Code: 62, e.displayText() = DB::Exception: Syntax error", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	for _, u := range []string{srv.URL, srv.URL + "/"} {
		if out, err := Query(testContext(t), nil, u, "SELECT 1"); err != nil || out != "1\n" {
			t.Errorf("Query(%s, SELECT 1): got %q, %v; want \"1\\n\"", u, out, err)
		}
	}
	long := "SELEC " + strings.Repeat("x", 1000)
	_, err := Query(testContext(t), srv.Client(), srv.URL, long)
	if err == nil || !strings.Contains(err.Error(), "HTTP 400: Code: 62") || !strings.Contains(err.Error(), "(1006 bytes)") {
		t.Errorf("Query of a bad statement: got %v, want HTTP 400 with the code and the statement cut", err)
	}
}
