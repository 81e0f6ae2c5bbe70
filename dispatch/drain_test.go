package dispatch

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowClickHouse is a fake ClickHouse that takes delay to answer each
// insert and records when each began: slow answers are what the real
// server here cannot be made to give on demand.
type slowClickHouse struct {
	delay  time.Duration
	mu     sync.Mutex
	starts []time.Time
	rows   int
}

func (s *slowClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(r.URL.Query().Get("query"), "system.settings") || strings.Contains(string(body), "system.settings") {
		fmt.Fprintln(w, "0") // no insert_deduplication_token
		return
	}
	start := time.Now()
	time.Sleep(s.delay)
	s.mu.Lock()
	s.starts = append(s.starts, start)
	s.rows += strings.Count(string(body), "\n") + 1
	s.mu.Unlock()
}

func (s *slowClickHouse) inserts() ([]time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.starts...), s.rows
}

// TestDrainer_slowInsertsSpreadOut checks that when ClickHouse answers
// slowly the drainer spaces its inserts by three times their duration, not
// by the batch interval, so the batches grow instead of the inserts
// multiplying; and that every row still lands.
func TestDrainer_slowInsertsSpreadOut(t *testing.T) {
	const delay = 100 * time.Millisecond
	fake := &slowClickHouse{delay: delay}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	const puts = 150
	for i := range puts { // about 1.5 s of a trickle, one put every 10 ms
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitUntil(t, 10*time.Second, "every row to be inserted", func() bool {
		_, rows := fake.inserts()
		return rows == puts
	})
	starts, _ := fake.inserts()
	if len(starts) < 3 {
		t.Fatalf("%d inserts, want at least 3", len(starts))
	}
	// The batch interval is 50 ms; each insert takes 100 ms, so the next
	// starts 300 ms after the last one started (some slack for timers).
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 3*delay-20*time.Millisecond {
			t.Errorf("insert %d began %v after the one before, want at least %v", i, gap, 3*delay)
		}
	}
	if max := 1500*time.Millisecond/(3*delay) + 2; len(starts) > int(max) {
		t.Errorf("%d inserts for 1.5 s of puts, want at most %d", len(starts), max)
	}
}

func TestDrainer_spacing(t *testing.T) {
	set := Settings{BatchInterval: 50 * time.Millisecond}
	for _, tc := range []struct {
		took time.Duration
		want time.Duration
	}{
		{0, 50 * time.Millisecond},                        // first insert, or after a failure or a big batch
		{10 * time.Millisecond, 50 * time.Millisecond},    // fast ClickHouse: the interval
		{40 * time.Millisecond, 120 * time.Millisecond},   // slow: three times the insert
		{400 * time.Millisecond, 1200 * time.Millisecond}, // slower still
	} {
		d := &drainer{lastTook: tc.took}
		if got := d.spacing(set); got != tc.want {
			t.Errorf("spacing after an insert of %v: got %v, want %v", tc.took, got, tc.want)
		}
	}
}
