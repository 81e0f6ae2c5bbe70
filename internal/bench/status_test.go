package bench

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serveStatus serves st as /status until the test ends and returns the
// listener's host:port.
func serveStatus(t *testing.T, st nodeStatus) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_gc_duration_seconds A summary.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 1.2e-05
go_gc_duration_seconds_count 19
go_memstats_next_gc_bytes 4.194304e+06
go_gc_gogc_percent 100
chute_queue_depth_rows{queue="ch:x"} 5
broken line
`
	got := parseMetrics(text)
	want := map[string]float64{"go_gc_duration_seconds_count": 19, "go_memstats_next_gc_bytes": 4194304, "go_gc_gogc_percent": 100}
	if len(got) != len(want) {
		t.Fatalf("parseMetrics: got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
}

func TestWaitMembers(t *testing.T) {
	three := nodeStatus{Members: []memberStatus{{Status: "alive"}, {Status: "alive"}, {Status: "alive"}}}
	two := nodeStatus{Members: []memberStatus{{Status: "alive"}, {Status: "failed"}, {Status: "alive"}}}
	nodes := []*target{{name: "a", metrics: serveStatus(t, three)}, {name: "b", metrics: serveStatus(t, three)}, {name: "c", metrics: serveStatus(t, three)}}
	if err := waitMembers(testContext(t), nodes, time.Second); err != nil {
		t.Errorf("waitMembers, all alive: %v", err)
	}
	nodes[2].metrics = serveStatus(t, two)
	start := time.Now()
	err := waitMembers(testContext(t), nodes, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "c does not see 3 members alive") {
		t.Errorf("waitMembers, one failed: got %v, want c not seeing 3", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("waitMembers took %v, want about its timeout", d)
	}
}

func TestHeapGoalAfterGC_fakeNode(t *testing.T) {
	node := newFakeNode("n", "")
	addr := serveFakeMetrics(t, node)
	goal, gogc, err := heapGoalAfterGC(testContext(t), addr)
	if err != nil {
		t.Fatalf("heapGoalAfterGC: %v", err)
	}
	if goal <= 0 || gogc <= 0 {
		t.Errorf("got goal %d, GOGC %d; want both positive", goal, gogc)
	}
}

// serveFakeMetrics serves node's /status and /metrics in this process
// until the test ends.
func serveFakeMetrics(t *testing.T, node *fakeNode) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		node.serveMetrics(ctx, l)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l.Addr().String()
}
