package dispatch

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"chute/internal/testutil"
)

// TestRehome_clickHouseRowsFreeDeletedSegments: while ClickHouse is down,
// a ClickHouse queue's rows stay queued, views of the segments their
// records were written to. Compaction moves the records and deletes the
// segments, but rows left as views kept every deleted segment on disk
// (a review measured 62 of them past a 64 KiB quota). Rows in no batch
// are copied to the heap now; a batch in flight keeps the segments of
// its rows until it lands (here one batch of one row).
func TestRehome_clickHouseRowsFreeDeletedSegments(t *testing.T) {
	const quota, segment = 64 << 10, 4 << 10
	down := &pickyClickHouse{} // answers 503 to every insert
	srv := httptest.NewServer(down)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	n := startSinkNode(t, &chURL{url: srv.URL, db: "default"}, func(c *Config) {
		c.DataDir, c.NoSync, c.QueueLogSegmentBytes, c.QuotaBytes = dir, true, segment, quota
		c.RetryMin, c.RetryMax = time.Hour, time.Hour // the batches in flight stay as they formed
	})
	cli := n.client(t)
	ctx := testCtx(t, 2*time.Minute)
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), `{"batch_rows":1,"max_inflight_inserts":1}`); err != nil {
		t.Fatal(err)
	}
	wc := cli.Watch(ctx, "/q/churn/c/w1")
	row := `{"kept":"` + strings.Repeat("k", 200) + `"}`
	for i := range 60 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", i), row); err != nil {
			t.Fatal(err)
		}
		for j := range 30 { // about a segment of messages, each acknowledged
			putAndAck(t, ctx, cli, wc, fmt.Sprintf("/q/churn/p/%d-%d", i, j), strings.Repeat("c", 100))
		}
	}
	if d := n.depth("ch:events"); d != 60 {
		t.Fatalf("ClickHouse queue depth %d, want its 60 rows queued", d)
	}
	// The reconcile loop and the drainer copy what they may: at most the
	// row in the batch in flight still reads a deleted segment.
	onDeleted := func() int {
		q := n.mgr.lookup("ch:events")
		q.mu.Lock()
		defer q.mu.Unlock()
		k := 0
		for _, m := range q.msgs.all() {
			if m.region.Deleted() {
				k++
			}
		}
		return k
	}
	waitUntil(t, 20*time.Second, "the rows in no batch copied off the deleted segments", func() bool { return onDeleted() <= 1 })
	// And the files let go: the batch's row keeps one.
	waitUntil(t, 20*time.Second, "the deleted segments' files closed", func() bool {
		runtime.GC()
		return testutil.DeletedOpen(t, dir, ".spare") <= 1
	})
	if st := n.mgr.qlog.Stats(); st.Deleted < 30 {
		t.Fatalf("stats %+v: want most segments deleted", st)
	}
}
