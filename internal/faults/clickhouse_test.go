package faults

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitIDs_countGetsNoAnswer checks that a count whose query gets no
// answer is given up after CountTimeout and asked again, rather than
// holding WaitIDs until its context ends. The server is a stand-in for
// ClickHouse (18.16 cannot be made to stall one query on demand): it
// never answers its first request and answers the others.
func TestWaitIDs_countGetsNoAnswer(t *testing.T) {
	var requests atomic.Int32
	srv := stallingServer(t, func() bool { return requests.Add(1) == 1 }, "1\t1\n2\t1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	found, err := WaitIDs(ctx, srv.URL, "t", []uint64{1, 2}, WaitConfig{Quiet: time.Hour, Poll: 10 * time.Millisecond, CountTimeout: 200 * time.Millisecond})
	if err != nil || len(found) != 2 {
		t.Fatalf("WaitIDs: got %v, %v; want ids 1 and 2", found, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("WaitIDs took %v with a count timeout of 200ms", took)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("requests: got %d, want 2 (the lost one, then one answered)", n)
	}
}

// TestWaitIDs_noAnswerAtAll checks the error of a wait in which no count
// was answered: it names the tries, the first error and the last.
func TestWaitIDs_noAnswerAtAll(t *testing.T) {
	srv := stallingServer(t, func() bool { return true }, "")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := WaitIDs(ctx, srv.URL, "t", []uint64{1}, WaitConfig{Quiet: time.Hour, Poll: 10 * time.Millisecond, CountTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "counts answered (each given 100ms); the first error: ") || !strings.Contains(err.Error(), "; the last: ") {
		t.Fatalf("WaitIDs of a server that never answers: got %v, want an error naming the tries", err)
	}
}

// stallingServer answers body to every request for which stall returns
// false, and nothing to the others until the client gives up or the test
// ends.
func stallingServer(t *testing.T, stall func() bool, body string) *httptest.Server {
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read first: the server notices a client that left only once
		// the request's body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		if stall() {
			select {
			case <-r.Context().Done():
			case <-ended:
			}
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(func() {
		close(ended)
		srv.Close()
	})
	return srv
}
