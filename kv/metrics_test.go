package kv

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRPCMetrics_record counts calls by method and code through the OTel
// SDK, and checks that a call whose method and code were seen before
// allocates nothing to be recorded with the no-op provider.
func TestRPCMetrics_record(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := newRPCMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const put, txn = "/etcdserverpb.KV/Put", "/etcdserverpb.KV/Txn"
	for range 3 {
		m.record(ctx, put, time.Now(), nil)
	}
	m.record(ctx, put, time.Now(), status.Error(codes.ResourceExhausted, "full"))
	m.record(ctx, txn, time.Now(), nil)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]uint64)
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != "rpc.server.call.duration" {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Histogram[float64]).DataPoints {
				svc, _ := dp.Attributes.Value("rpc.service")
				meth, _ := dp.Attributes.Value("rpc.method")
				code, _ := dp.Attributes.Value("rpc.grpc.status_code")
				got[fmt.Sprintf("%s/%s %s", svc.AsString(), meth.AsString(), code.AsString())] += dp.Count
			}
		}
	}
	want := map[string]uint64{"etcdserverpb.KV/Put OK": 3, "etcdserverpb.KV/Put ResourceExhausted": 1, "etcdserverpb.KV/Txn OK": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls by method and code: got %v, want %v", got, want)
	}

	noop, err := newRPCMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	noop.record(ctx, put, start, nil)
	if n := testing.AllocsPerRun(100, func() { noop.record(ctx, put, start, nil) }); n != 0 {
		t.Errorf("recording a call: got %v allocations, want 0", n)
	}
}
