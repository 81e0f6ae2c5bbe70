//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// TestMetrics_equalWhatWasDone is acceptance 3 of the OTel issue: after a
// scripted workload, /metrics holds exactly what was done: puts by queue
// and result, rows inserted, dead letters, batches, queue depth, calls by
// method and code.
func TestMetrics_equalWhatWasDone(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.typed (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	cli := clusterClient(t, p.ClientAddr)
	ctx, cancel := rpcCtx()
	defer cancel()

	// 20 unary puts and a txn of 10, every row good.
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:typed/p/%d", i), fmt.Sprintf(`{"id":%d,"n":%d}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	var ops []clientv3.Op
	for i := 20; i < 30; i++ {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:typed/p/%d", i), fmt.Sprintf(`{"id":%d,"n":%d}`, i, i)))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.typed", "30")
	// 3 puts that are not JSON objects: refused at put time.
	for i, v := range []string{"not json", "[1,2]", ""} {
		_, err := cli.Put(ctx, fmt.Sprintf("/q/ch:typed/p/bad%d", i), v)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("put %q: got %v, want InvalidArgument", v, err)
		}
	}
	// 2 rows ClickHouse refuses, in one txn with 3 good ones: 2 dead letters.
	ops = ops[:0]
	for i := 30; i < 35; i++ {
		v := fmt.Sprintf(`{"id":%d,"n":%d}`, i, i)
		if i%2 == 1 {
			v = fmt.Sprintf(`{"id":%d,"n":"x"}`, i)
		}
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:typed/p/%d", i), v))
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.typed", "33")
	testutil.Eventually(t, chLogTimeout, "2 dead letters", func() error {
		if letters, raw := ctlDeadLetters(t, p, "ch:typed"); len(letters) != 2 {
			return fmt.Errorf("got %q", raw)
		}
		return nil
	})
	// 4 messages on an ordinary queue nobody consumes.
	for i := range 4 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%d", i), "job"); err != nil {
			t.Fatal(err)
		}
	}

	want := []struct {
		metric string
		labels []string
		value  float64
	}{
		{"chute_queue_puts_total", []string{`queue="ch:typed"`, `result="OK"`}, 35},
		{"chute_queue_puts_total", []string{`queue="ch:typed"`, `result="InvalidArgument"`}, 3},
		{"chute_queue_puts_total", []string{`queue="jobs"`, `result="OK"`}, 4},
		{"chute_queue_puts_total", nil, 42},
		{"chute_clickhouse_rows_inserted_total", nil, 33},
		{"chute_clickhouse_dead_letters_total", nil, 2},
		{"chute_clickhouse_batches_total", []string{`outcome="dead_letters"`}, 1},
		{"chute_queue_enqueued_total", []string{`queue="ch:typed"`}, 35},
		{"chute_queue_acked_total", []string{`queue="ch:typed"`}, 35},
		{"chute_queue_depth_rows", []string{`queue="ch:typed"`}, 0},
		{"chute_queue_depth_rows", []string{`queue="jobs"`}, 4},
		{"chute_queue_depth_bytes", []string{`queue="jobs"`}, 16}, // value and key tail: 3 + 1 bytes each
		{"chute_queue_forwarded_total", nil, 0},
		{"chute_gossip_members", []string{`state="alive"`}, 1},
		{"rpc_server_call_duration_seconds_count", []string{`rpc_method="Put"`, `rpc_grpc_status_code="OK"`}, 24},
		{"rpc_server_call_duration_seconds_count", []string{`rpc_method="Put"`, `rpc_grpc_status_code="InvalidArgument"`}, 3},
		{"rpc_server_call_duration_seconds_count", []string{`rpc_method="Txn"`, `rpc_grpc_status_code="OK"`}, 2},
	}
	// Batches settle after the rows land; poll for the counters to agree.
	testutil.Eventually(t, chLogTimeout, "every metric to equal what was done", func() error {
		var wrong []string
		for _, w := range want {
			if got := metricSum(t, p, w.metric, w.labels...); got != w.value {
				wrong = append(wrong, fmt.Sprintf("%s{%s} = %v, want %v", w.metric, strings.Join(w.labels, ","), got, w.value))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%s", strings.Join(wrong, "; "))
		}
		return nil
	})
	// Batches with every row inserted: at least one, and each is one
	// successful insert in the duration histogram.
	ok := metricSum(t, p, "chute_clickhouse_batches_total", `outcome="ok"`)
	if hist := metricSum(t, p, "chute_clickhouse_insert_duration_seconds_count", `outcome="ok"`); ok < 1 || hist != ok {
		t.Errorf("batches ok %v, successful inserts in the histogram %v: want equal and >= 1", ok, hist)
	}
}
