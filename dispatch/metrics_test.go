package dispatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestInsertMetrics_countPuts counts puts by queue and result through
// the OTel SDK, and checks that counting a seen queue and result
// allocates nothing with the no-op provider: every put counts.
func TestInsertMetrics_countPuts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	im, err := newInsertMetrics(mp, 10)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	im.countPuts(ctx, "ch:a", nil, 128)
	im.countPuts(ctx, "ch:a", nil, 1)
	im.countPuts(ctx, "ch:a", status.Error(codes.ResourceExhausted, "full"), 5)
	im.countPuts(ctx, "jobs", nil, 2)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int64)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				q, okq := dp.Attributes.Value("queue")
				r, okr := dp.Attributes.Value("result")
				if okq && okr {
					got[q.AsString()+" "+r.AsString()] += dp.Value
				}
			}
		}
	}
	want := map[string]int64{"ch:a OK": 129, "ch:a ResourceExhausted": 5, "jobs OK": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("puts by queue and result: got %v, want %v", got, want)
	}

	noop, err := newInsertMetrics(nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	noop.countPuts(ctx, "ch:a", nil, 1)
	if n := testing.AllocsPerRun(100, func() { noop.countPuts(ctx, "ch:a", nil, 1) }); n != 0 {
		t.Errorf("counting a put: got %v allocations, want 0", n)
	}
}

// TestInsertMetrics_putsBounded: queue names come from clients, and a
// refused put names a queue that never was: past the bound on queue
// label values, the others share queue="_other"; a dropped queue's
// series go, and free its place.
func TestInsertMetrics_putsBounded(t *testing.T) {
	im, err := newInsertMetrics(nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad := status.Error(codes.InvalidArgument, "not json")
	for i := range 10 {
		im.countPuts(ctx, fmt.Sprintf("ch:nope%d", i), bad, 1)
	}
	im.countPuts(ctx, "ch:nope0", nil, 1)
	series := func() map[putResult]int64 {
		im.puts.mu.RLock()
		defer im.puts.mu.RUnlock()
		out := make(map[putResult]int64)
		for k, pc := range im.puts.m {
			out[k] = pc.n.Load()
		}
		return out
	}
	want := map[putResult]int64{
		{"ch:nope0", codes.InvalidArgument}: 1, {"ch:nope0", codes.OK}: 1,
		{"ch:nope1", codes.InvalidArgument}: 1, {"ch:nope2", codes.InvalidArgument}: 1,
		{otherTables, codes.InvalidArgument}: 7,
	}
	if got := series(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("series: got %v, want %v", got, want)
	}
	im.puts.drop("ch:nope0")
	im.countPuts(ctx, "ch:new", nil, 1)
	want = map[putResult]int64{
		{"ch:nope1", codes.InvalidArgument}: 1, {"ch:nope2", codes.InvalidArgument}: 1,
		{otherTables, codes.InvalidArgument}: 7, {"ch:new", codes.OK}: 1,
	}
	if got := series(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series after a queue dropped: got %v, want %v", got, want)
	}
}

// TestInsertMetrics_putsSwept: the series of a queue this member does
// not hold (it only forwarded puts to it, or refused them) go once a
// sweep finds their counts unchanged since the one before, and free
// their place under the bound; a queue held here, or put to since the
// last sweep, keeps its series.
func TestInsertMetrics_putsSwept(t *testing.T) {
	im, err := newInsertMetrics(nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, q := range []string{"held", "forwarded", "busy"} {
		im.countPuts(ctx, q, nil, 1)
	}
	held := func(q string) bool { return q == "held" }
	labels := func() []string {
		im.puts.mu.RLock()
		defer im.puts.mu.RUnlock()
		var out []string
		for q := range im.puts.queues {
			out = append(out, q)
		}
		slices.Sort(out)
		return out
	}
	im.puts.sweep(held) // counted since the start: every series kept
	if got, want := labels(), []string{"busy", "forwarded", "held"}; !slices.Equal(got, want) {
		t.Fatalf("after the first sweep: %v, want %v", got, want)
	}
	im.countPuts(ctx, "busy", nil, 1)
	im.puts.sweep(held)
	if got, want := labels(), []string{"busy", "held"}; !slices.Equal(got, want) {
		t.Fatalf("after the second sweep: %v, want %v", got, want)
	}
	// The place "forwarded" held is free: a new queue gets a label of
	// its own, not _other.
	im.countPuts(ctx, "new", status.Error(codes.InvalidArgument, "not json"), 1)
	if got, want := labels(), []string{"busy", "held", "new"}; !slices.Equal(got, want) {
		t.Fatalf("after a put to a new queue: %v, want %v", got, want)
	}
	im.puts.sweep(held)
	im.puts.sweep(held)
	if got, want := labels(), []string{"held"}; !slices.Equal(got, want) {
		t.Fatalf("after two sweeps without puts: %v, want %v", got, want)
	}
}

// TestMetrics_queueLogSpareBytes: segments deleted once their messages
// are acknowledged are kept as spare files to be written over; the
// queue log's bytes count them, and chute.queue_log.spare_bytes says how
// many of those bytes they are, as the log counts them.
func TestMetrics_queueLogSpareBytes(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	n := startNode(t, func(c *Config) {
		c.Meter = mp
		c.DataDir, c.NoSync, c.QueueLogSegmentBytes = t.TempDir(), true, 4<<10
	})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	wc := cli.Watch(ctx, "/q/churn/c/w1")
	gauges := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) == 1 {
					got[m.Name] = g.DataPoints[0].Value
				}
			}
		}
		return got
	}
	for i := 0; ; i++ { // each message acknowledged: the segments they filled are deleted
		if n.mgr.qlog.Stats().Spares > 0 {
			break
		}
		if i == 500 {
			t.Fatalf("no spare file after %d messages: %+v", i, n.mgr.qlog.Stats())
		}
		putAndAck(t, ctx, cli, wc, fmt.Sprintf("/q/churn/p/%d", i), strings.Repeat("c", 200))
	}
	// The gauges and the log's own count, read until they agree: the
	// writer may move on between the two reads.
	for i := 0; ; i++ {
		st, g := n.mgr.qlog.Stats(), gauges()
		if g["chute.queue_log.spare_bytes"] == st.Spares && g["chute.queue_log.bytes"] == st.Size+st.Spares && st.Spares > 0 {
			return
		}
		if i == 100 {
			t.Fatalf("gauges %v, log %+v: want spare_bytes = Spares and bytes = Size + Spares", g, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
