package bench

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"chute/dispatch"
	"chute/internal/nodestatus"
)

// serveStatus serves st as /status until the test ends and returns the
// listener's host:port.
func serveStatus(t *testing.T, st nodestatus.Node) string {
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

func TestWaitMembers(t *testing.T) {
	three := nodestatus.Node{Members: []nodestatus.Member{{Status: "alive"}, {Status: "alive"}, {Status: "alive"}}}
	two := nodestatus.Node{Members: []nodestatus.Member{{Status: "alive"}, {Status: "failed"}, {Status: "alive"}}}
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

// TestCheckDispatcher_moved serves a /status in which another member
// dispatches a queue of the run.
func TestCheckDispatcher_moved(t *testing.T) {
	addr := serveStatus(t, nodestatus.Node{Member: "a1", Queues: []dispatch.QueueStatus{
		{Name: "ch:t0", Dispatcher: "a1"}, {Name: "ch:t1", Dispatcher: "b2"},
	}})
	node := &target{name: "bench-1", metrics: addr}
	if err := checkDispatcher(testContext(t), node, []string{"t0"}); err != nil {
		t.Errorf("checkDispatcher(t0): got %v, want nil", err)
	}
	for _, tables := range [][]string{{"t0", "t1"}, {"t2"}} {
		if err := checkDispatcher(testContext(t), node, tables); !errors.Is(err, errNotDispatcher) {
			t.Errorf("checkDispatcher(%v): got %v, want errNotDispatcher", tables, err)
		}
	}
}

func TestWaitReadyz(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	t.Cleanup(ready.Close)
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready: key space not caught up", http.StatusServiceUnavailable)
	}))
	t.Cleanup(notReady.Close)
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

	nodes := []*target{{name: "a", metrics: addr(ready)}, {name: "b", metrics: addr(ready)}}
	if err := waitReadyz(testContext(t), nodes, time.Second); err != nil {
		t.Errorf("waitReadyz, all ready: %v", err)
	}
	nodes[1].metrics = addr(notReady)
	err := waitReadyz(testContext(t), nodes, 2*time.Second) // room for one answer on a loaded machine
	if err == nil || !strings.Contains(err.Error(), "b is not ready") || !strings.Contains(err.Error(), "key space not caught up") {
		t.Errorf("waitReadyz, one not ready: got %v, want b not ready with its reason", err)
	}
	// A node that answers once, then not before the deadline (a loaded
	// machine): the error still gives the answer's reason.
	var calls atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			<-r.Context().Done()
			return
		}
		http.Error(w, "not ready: key space not caught up", http.StatusServiceUnavailable)
	}))
	t.Cleanup(slow.Close)
	nodes[1].metrics = addr(slow)
	err = waitReadyz(testContext(t), nodes, time.Second)
	if err == nil || !strings.Contains(err.Error(), "key space not caught up") || calls.Load() < 2 {
		t.Errorf("waitReadyz, one that answered not ready then hung: got %v after %d calls, want b not ready with its reason", err, calls.Load())
	}
}
