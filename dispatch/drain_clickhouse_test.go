//go:build e2e

package dispatch

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"chute/internal/chtest"
)

// holdingProxy passes requests to a real ClickHouse, holding every
// INSERT until released, and counts the inserts in flight: the real
// server answers too fast for two inserts of one queue to be seen
// overlapping otherwise.
type holdingProxy struct {
	next    http.Handler
	release chan struct{} // closed: inserts pass

	mu       sync.Mutex
	inFlight int
	peak     int
	held     int // inserts waiting for release
}

func (p *holdingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Query().Get("query"), "INSERT") {
		p.next.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.inFlight++
	p.held++
	p.peak = max(p.peak, p.inFlight)
	p.mu.Unlock()
	select {
	case <-p.release:
	case <-r.Context().Done():
	}
	p.mu.Lock()
	p.held--
	p.mu.Unlock()
	p.next.ServeHTTP(w, r)
	p.mu.Lock()
	p.inFlight--
	p.mu.Unlock()
}

func (p *holdingProxy) counts() (held, peak int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held, p.peak
}

// TestDrainer_parallelInsertsIntoClickHouse: with max_inflight_inserts 2,
// two batches of one queue are in a real ClickHouse at once and no
// third starts; stopDrainer returns only once both are in the table; and
// every row lands exactly once.
func TestDrainer_parallelInsertsIntoClickHouse(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64) ENGINE = MergeTree ORDER BY id")
	target, err := url.Parse(ch.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := &holdingProxy{next: httputil.NewSingleHostReverseProxy(target), release: make(chan struct{})}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	released := sync.OnceFunc(func() { close(proxy.release) })
	t.Cleanup(released)
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), parallelSettings); err != nil {
		t.Fatal(err)
	}
	putIDs(t, ctx, cli, 0, 15) // three batches of 5
	// Well within the insert timeout (5 s), after which a retry would
	// be a second request of one batch.
	waitUntil(t, 3*time.Second, "two inserts held at the proxy", func() bool {
		held, _ := proxy.counts()
		return held == 2
	})
	time.Sleep(200 * time.Millisecond) // a third would start now if it could
	if held, peak := proxy.counts(); held != 2 || peak != 2 {
		t.Fatalf("got %d inserts held, %d at once, want 2 and 2", held, peak)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n.mgr.stopDrainer("ch:events")
	}()
	select {
	case <-stopped:
		t.Fatal("stopDrainer returned with two inserts in flight")
	case <-time.After(200 * time.Millisecond):
	}
	released()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stopDrainer did not return once both inserts were answered")
	}
	if got := ch.Count(t, "default.events"); got < 10 {
		t.Fatalf("got %d rows when stopDrainer returned, want both batches (10) in", got)
	}
	n.mgr.ensureDrainer(n.mgr.lookup("ch:events")) // as the next put or reconcile round would
	waitCount(t, ch, "default.events", 15, 10*time.Second)
	if got := strings.TrimSpace(ch.Query(t, "SELECT uniqExact(id) FROM default.events")); got != "15" {
		t.Errorf("got %s distinct ids, want 15", got)
	}
	if _, peak := proxy.counts(); peak != 2 {
		t.Errorf("got %d inserts at once, want at most 2", peak)
	}
}

// TestDrainer_insertedRowsLeaveTheQueueLog: with a data dir, the records
// of rows a real ClickHouse took are released from the queue log, every
// one of a batch larger than ackRows releases at a time (600 rows, in
// txns of 120), and nothing is left live once they are in the table.
func TestDrainer_insertedRowsLeaveTheQueueLog(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64) ENGINE = MergeTree ORDER BY id")
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"}, func(c *Config) { c.DataDir = t.TempDir() })
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	// The first txn goes at once; the insert rate gathers the other
	// four into one batch of 480 rows.
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), `{"batch_interval":"1s","max_inserts_per_second":1}`); err != nil {
		t.Fatal(err)
	}
	for from := 0; from < 600; from += 120 {
		putIDs(t, ctx, cli, from, from+120)
	}
	waitCount(t, ch, "default.events", 600, 20*time.Second)
	waitUntil(t, 10*time.Second, "no live record in the queue log", func() bool { return liveRecords(n.mgr) == 0 })
	if got := strings.TrimSpace(ch.Query(t, "SELECT uniqExact(id) FROM default.events")); got != "600" {
		t.Errorf("got %s distinct ids, want 600", got)
	}
}

// TestDrainer_slowInsertGoesInTheEnd: an insert ClickHouse takes longer
// than the insert timeout to answer (a materialized view that sleeps a
// second a block, against 300ms) lands all the same; sent again at each
// timeout with the same timeout, it landed once per attempt, for ever,
// and never left the queue. The queue's timeout doubles at each: the
// batch goes after a few copies (at most one per doubling, and one more).
func TestDrainer_slowInsertGoesInTheEnd(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.slow (id UInt64) ENGINE = MergeTree ORDER BY id")
	ch.Exec(t, "CREATE MATERIALIZED VIEW default.slow_mv ENGINE = Memory AS SELECT id, sleep(1) AS s FROM default.slow")
	const timeout = 300 * time.Millisecond
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"}, func(c *Config) { c.InsertTimeout = timeout })
	ctx := testCtx(t, time.Minute)
	if _, err := n.client(t).Put(ctx, "/q/ch:slow/p/1", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.depth("ch:slow") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the row is still queued, in the table %d times", ch.Count(t, "default.slow"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The inserts whose client left end; then at most a copy per timeout
	// (300ms, 600ms, 1.2s) and one more.
	time.Sleep(3 * time.Second)
	const want = 4
	if got := ch.Count(t, "default.slow"); got < 1 || got > want {
		t.Errorf("the row is in the table %d times, want 1 to %d", got, want)
	}
}
