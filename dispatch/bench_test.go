package dispatch

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/kv"
)

// BenchmarkQueue_rowMemory measures what a queued row of a ClickHouse
// queue costs beyond its value: 100,000 rows of 256 bytes are put through
// Produce (as kv hands them over, values in buffers of their own) on a
// member with no ClickHouse URL, so they stay queued and delivered to the
// drainer; the heap growth per row, less the value, is reported as
// overhead-B/row (the target: at most 128).
func BenchmarkQueue_rowMemory(b *testing.B) {
	const rows, size = 100_000, 256
	for b.Loop() {
		b.StopTimer()
		m := benchManager(b, 1<<30)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		puts := make([]*pb.PutRequest, rows)
		for i := range puts {
			puts[i] = &pb.PutRequest{Key: fmt.Appendf(nil, "/q/ch:events/p/%d", i), Value: fmt.Appendf(make([]byte, 0, size), `{"id":"%06d","pad":"%0*d"}`, i, size-24, 0)}
		}
		b.StartTimer()
		for _, p := range puts {
			if err := m.Produce(context.Background(), []*pb.PutRequest{p}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		puts = nil // what the queue keeps stays reachable through it
		runtime.GC()
		runtime.ReadMemStats(&after)
		if d := m.Status().Queues[0].Rows; d != rows {
			b.Fatalf("queued %d rows, want %d", d, rows)
		}
		per := float64(after.HeapAlloc-before.HeapAlloc) / rows
		b.ReportMetric(per-size, "overhead-B/row")
		_ = m.Shutdown(context.Background())
		runtime.KeepAlive(m)
		b.StartTimer()
	}
}

// benchManager starts a member alone whose records live in a KV store
// that serves no client.
func benchManager(b *testing.B, maxBytes int64) *Manager {
	b.Helper()
	return benchManagerWith(b, Config{MemberID: 1, MaxQueueBytes: maxBytes})
}

// benchManagerWith is benchManager with the manager's config.
func benchManagerWith(b *testing.B, cfg Config) *Manager {
	b.Helper()
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	kcfg := kv.DefaultConfig()
	kcfg.MemberID = 1
	kcfg.Queues = m
	srv, err := kv.New(kcfg)
	if err != nil {
		b.Fatal(err)
	}
	m.Start(srv, nil)
	return m
}

// BenchmarkProduce_local measures one unary put enqueued on this member,
// the dispatcher, with a drainer taking the rows (no ClickHouse URL).
func BenchmarkProduce_local(b *testing.B) {
	m := benchManager(b, 1<<40)
	defer func() { _ = m.Shutdown(context.Background()) }()
	val := fmt.Appendf(nil, `{"id":1,"pad":"%0*d"}`, 256-17, 0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		p := &pb.PutRequest{Key: fmt.Appendf(nil, "/q/ch:events/p/%d", i), Value: val}
		if err := m.Produce(context.Background(), []*pb.PutRequest{p}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProduce_disk measures unary puts from 64 goroutines on a
// dispatcher with a data dir: each put returns after the fsync of the
// queue log that covers it, and concurrent puts share fsyncs
// (records/fsync is reported).
func BenchmarkProduce_disk(b *testing.B) {
	m := benchManagerWith(b, Config{MemberID: 1, MaxQueueBytes: 1 << 40, DataDir: b.TempDir()})
	defer func() { _ = m.Shutdown(context.Background()) }()
	val := fmt.Appendf(nil, `{"id":1,"pad":"%0*d"}`, 256-17, 0)
	var n atomic.Uint64
	before := m.qlog.Stats()
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(tpb *testing.PB) {
		for tpb.Next() {
			p := &pb.PutRequest{Key: fmt.Appendf(nil, "/q/ch:events/p/%d", n.Add(1)), Value: val}
			if err := m.Produce(context.Background(), []*pb.PutRequest{p}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := m.qlog.Stats()
	if f := st.Fsyncs - before.Fsyncs; f > 0 {
		b.ReportMetric(float64(st.Appended-before.Appended)/float64(f), "records/fsync")
	}
}

// BenchmarkProduce_txn128 measures a batch produce of 128 puts enqueued on
// this member, the dispatcher, with a drainer taking the rows (no
// ClickHouse URL): per op is per batch.
func BenchmarkProduce_txn128(b *testing.B) {
	m := benchManager(b, 1<<40)
	defer func() { _ = m.Shutdown(context.Background()) }()
	val := fmt.Appendf(nil, `{"id":1,"pad":"%0*d"}`, 256-17, 0)
	puts := make([]*pb.PutRequest, 128)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range puts {
			i++
			puts[j] = &pb.PutRequest{Key: fmt.Appendf(nil, "/q/ch:events/p/%d", i), Value: val}
		}
		if err := m.Produce(context.Background(), puts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueue_produceAck measures a ClickHouse queue's bookkeeping per
// row on the dispatcher, without the queue log or kv: txns of 128 local
// puts are enqueued, and acknowledged as a drainer acknowledges its
// batches (ackRows, 8192 rows at a time). With step 3 the message ids of
// the queue are every third of the member's, as when three queues share
// its counter. Per op is per row.
func BenchmarkQueue_produceAck(b *testing.B) {
	for _, step := range []uint64{1, 3} {
		b.Run(fmt.Sprintf("step=%d", step), func(b *testing.B) {
			const txn, batch = 128, 8192
			q := newQueue("ch:events", Config{}.withDefaults().defaults())
			val := []byte(`{"id":1}`)
			msgs := make([]incoming, txn)
			rows := make([]row, 0, batch)
			now := time.Unix(0, 0)
			var n uint64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%txn == 0 {
					for j := range msgs {
						n += step
						msgs[j] = incoming{id: MsgID{Origin: 1, N: n}, tail: "k", value: val}
					}
					q.mu.Lock()
					q.enqueueLocked(msgs, now, arrivedLocal, false)
					q.mu.Unlock()
				}
				if (i+1)%batch == 0 {
					rows = rows[:0]
					q.mu.Lock()
					for seq, m := range q.msgs.all() {
						rows = append(rows, row{seq: seq, m: m})
					}
					q.mu.Unlock()
					q.ackRows(rows, now)
				}
			}
		})
	}
}

// BenchmarkQueue_doneAdd measures remembering an acknowledged id, per id:
// runs of consecutive ids (step 1) and every third id (three queues
// sharing a member's counter).
func BenchmarkQueue_doneAdd(b *testing.B) {
	for _, step := range []uint64{1, 3} {
		b.Run(fmt.Sprintf("step=%d", step), func(b *testing.B) {
			s := newDoneSet(doneIDs)
			var n uint64
			for b.Loop() {
				n += step
				s.add(MsgID{Origin: 1, N: n})
			}
		})
	}
}
