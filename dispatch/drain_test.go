package dispatch

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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

// TestDrainer_intervalFromStartToStart checks that the batch interval runs
// from one insert's start to the next's: with inserts of 150 ms and an
// interval of 200 ms, inserts start about 200 ms apart, not 350 (the
// interval after the end of the last insert), and never closer than the
// interval; every row lands.
func TestDrainer_intervalFromStartToStart(t *testing.T) {
	const delay, interval = 150 * time.Millisecond, 200 * time.Millisecond
	fake := &slowClickHouse{delay: delay}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), `{"batch_interval":"200ms"}`); err != nil {
		t.Fatal(err)
	}
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
	if len(starts) < 5 {
		t.Fatalf("%d inserts, want at least 5", len(starts))
	}
	// From the second insert on: the first one's POST starts late, after
	// the drainer asked the server once whether it knows dedup tokens.
	var gaps []time.Duration
	for i := 2; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]))
	}
	slices.Sort(gaps)
	// Measured where the fake receives them, so a gap may look shorter by
	// the jitter of a new connection; no interval at all would make it
	// 150 ms, the inserts' duration.
	if gaps[0] < interval-20*time.Millisecond {
		t.Errorf("two inserts began %v apart, want at least the interval %v (gaps %v)", gaps[0], interval, gaps)
	}
	// The median, so that one insert delayed by a loaded machine does not
	// decide: end to start would make every gap at least 350 ms.
	if med := gaps[len(gaps)/2]; med > interval+delay/2 {
		t.Errorf("median gap between insert starts %v, want about %v (gaps %v)", med, interval, gaps)
	}
}
