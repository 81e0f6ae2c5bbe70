package dispatch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"chute/internal/testutil"
	"chute/kv"
)

// BenchmarkPut_grpc measures a unary Put to a producer key as a client
// makes it: through a kv server on loopback (its interceptors, metrics
// recorded to a manual reader), to a member alone that dispatches the
// queue and keeps it in a queue log, from 100 goroutines over 10
// connections, as make bench's unary run does. It runs with fsync and
// without (NoSync). The client is in the process too: cpu-ns/op and
// allocs/op count both ends, so compare them between runs of this
// benchmark, not with make bench's figures.
func BenchmarkPut_grpc(b *testing.B) {
	for _, bc := range []struct {
		name   string
		noSync bool
	}{{"fsync", false}, {"nosync", true}} {
		b.Run(bc.name, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			m, err := New(Config{MemberID: 1, MaxQueueBytes: 1 << 40, DataDir: b.TempDir(), NoSync: bc.noSync, Meter: mp})
			if err != nil {
				b.Fatal(err)
			}
			kcfg := kv.DefaultConfig()
			kcfg.MemberID = 1
			kcfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
			kcfg.Queues = m
			kcfg.Meter = mp
			srv, err := kv.New(kcfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				b.Fatal(err)
			}
			m.Start(srv, nil)
			b.Cleanup(func() {
				_ = srv.Shutdown(context.Background())
				_ = m.Shutdown(context.Background())
			})
			addr := srv.ClientAddrs()[0].String()
			clients := make([]pb.KVClient, 10)
			for i := range clients {
				conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = conn.Close() })
				clients[i] = pb.NewKVClient(conn)
			}
			val := fmt.Appendf(nil, `{"id":1,"pad":"%0*d"}`, 256-17, 0)
			var n, g atomic.Uint64
			before := m.qlog.Stats()
			cpu0, cpuOK := testutil.ProcessCPU()
			b.SetParallelism(50) // 100 goroutines on 2 cores
			b.ReportAllocs()
			b.RunParallel(func(tpb *testing.PB) {
				c := clients[g.Add(1)%uint64(len(clients))]
				for tpb.Next() {
					p := &pb.PutRequest{Key: fmt.Appendf(nil, "/q/ch:events/p/%016d", n.Add(1)), Value: val}
					if _, err := c.Put(context.Background(), p); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if cpu1, _ := testutil.ProcessCPU(); cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			st := m.qlog.Stats()
			if f := st.Fsyncs - before.Fsyncs; f > 0 {
				b.ReportMetric(float64(st.Appended-before.Appended)/float64(f), "records/fsync")
			}
		})
	}
}
