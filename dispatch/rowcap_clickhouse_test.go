//go:build e2e

package dispatch

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
)

// TestDrainer_batchOverQueryLimitGoesInSmaller: a batch a real
// ClickHouse refuses for the queue's max_memory_usage (241 "for query")
// every time it is sent goes in as smaller batches; before, it was sent
// again whole for ever and no row of the queue moved.
func TestDrainer_batchOverQueryLimitGoesInSmaller(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	const rows, limit = 64, "12000000"
	pad := strings.Repeat("x", 256<<10)
	value := func(i int) string { return fmt.Sprintf(`{"id":%d,"s":"%s"}`, i, pad) }

	// The whole batch, 16 MiB, is over the limit on its own.
	var body strings.Builder
	for i := range rows {
		body.WriteString(value(i) + "\n")
	}
	q := url.Values{"query": {"INSERT INTO default.events FORMAT JSONEachRow"}, "max_memory_usage": {limit}}
	resp, err := http.Post(ch.URL()+"/?"+q.Encode(), "text/plain", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(answer), "Code: 241") {
		t.Fatalf("%d rows at once under max_memory_usage %s: %d %.200q, want refused with 241", rows, limit, resp.StatusCode, answer)
	}
	if got := ch.Count(t, "default.events"); got != 0 {
		t.Fatalf("the refused insert left %d rows", got)
	}

	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 90*time.Second)
	settings := func(interval string) {
		t.Helper()
		s := fmt.Sprintf(`{"batch_rows":%d,"batch_interval":%q,"max_inserts_per_second":1000,"max_inflight_inserts":1,"retry_min":"20ms","retry_max":"100ms","settings":{"max_memory_usage":%q}}`,
			rows, interval, limit)
		if _, err := cli.Put(ctx, SettingsKey("ch:events"), s); err != nil {
			t.Fatal(err)
		}
	}
	settings("1s")
	lastError := func() *InsertError {
		q := n.mgr.lookup("ch:events")
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.lastInsertError
	}
	// A first put starts a batch of its own; the next 64 gather behind
	// it for a second, into one batch of them all.
	put := func(from, to int) {
		for lo := from; lo < to; lo += 4 {
			var ops []clientv3.Op
			for i := lo; i < min(lo+4, to); i++ {
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:events/p/%d", i), value(i)))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 1)
	waitCount(t, ch, "default.events", 1, 10*time.Second)
	put(1, rows+1)
	// Once the limit refused the batch, the smaller ones need not wait
	// a second each.
	waitUntil(t, 10*time.Second, "the limit refusing the batch", func() bool { return lastError() != nil })
	settings("10ms")
	waitCount(t, ch, "default.events", rows+1, 60*time.Second)
	if got := ch.Query(t, "SELECT uniqExact(id), min(id), max(id) FROM default.events"); got != fmt.Sprintf("%d\t0\t%d", rows+1, rows) {
		t.Errorf("distinct, least and greatest ids: %q, want %d of 0 to %d", got, rows+1, rows)
	}
	if e := lastError(); e.Code != 241 {
		t.Errorf("the queue's last insert error: %+v, want the limit's 241", e)
	}
}
