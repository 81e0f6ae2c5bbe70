package faults

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const statusJSON = `{"name":"a","member_id":"a0fafd8d2ec085b7","version":"x","members":[],
"queues":[{"name":"ch:x","dispatcher":"a0fafd8d2ec085b7","epoch":2,"depth_rows":7,"held_copies":1,"depth_bytes":90,"unacked":3,"stats":{}}],
"backups":[{"queue":"ch:x","dispatcher":"1","rows":2,"bytes":20},{"queue":"ch:y","dispatcher":"1","rows":5,"bytes":50},{"queue":"ch:x","dispatcher":"2","rows":1,"bytes":10}]}`

const metricsText = `# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.51904e+07
chute_queue_depth_bytes{otel_scope_name="chute",queue="ch:x"} 90
chute_queue_depth_bytes{otel_scope_name="chute",queue="a b}c"} 10
chute_queue_depth_bytes_other 5
`

func TestFetchStatusAndMetric(t *testing.T) {
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
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	st, err := FetchStatus(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	q, ok := st.Queue("ch:x")
	want := QueueStatus{Name: "ch:x", Dispatcher: "a0fafd8d2ec085b7", Epoch: 2, Rows: 7, Held: 1, Bytes: 90, Unacked: 3}
	if !ok || q != want || st.Name != "a" || st.MemberID != "a0fafd8d2ec085b7" {
		t.Errorf("FetchStatus: got %+v, queue %+v %v; want queue %+v", st, q, ok, want)
	}
	if rows, bytes := st.Backup("ch:x"); rows != 3 || bytes != 30 {
		t.Errorf("Backup(ch:x): got %d rows, %d bytes; want 3, 30", rows, bytes)
	}
	if _, ok := st.Queue("ch:y"); ok {
		t.Error("Queue of an unknown queue: ok")
	}

	for _, tc := range []struct {
		name   string
		want   float64
		wantOK bool
	}{
		{"process_resident_memory_bytes", 25190400, true},
		{"chute_queue_depth_bytes", 100, true},
		{"chute_queue_depth_rows", 0, false},
	} {
		got, ok, err := FetchMetric(ctx, addr, tc.name)
		if err != nil || got != tc.want || ok != tc.wantOK {
			t.Errorf("FetchMetric(%s): got %v, %v, %v; want %v, %v", tc.name, got, ok, err, tc.want, tc.wantOK)
		}
	}
	if _, err := FetchStatus(ctx, addr+"/nope"); err == nil {
		t.Error("FetchStatus of a 404: got nil error")
	}
}
