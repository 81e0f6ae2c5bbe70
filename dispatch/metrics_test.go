package dispatch

import (
	"context"
	"fmt"
	"testing"

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
