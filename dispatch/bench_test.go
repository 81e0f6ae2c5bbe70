package dispatch

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/internal/testutil"
	"chute/kv"
)

// BenchmarkQueue_rowMemory measures what a queued row of a ClickHouse
// queue costs: 100,000 rows of 256 bytes are put through Produce in
// batches of 128 (as kv hands them over, values in buffers of their own)
// on a member with no ClickHouse URL, so they stay queued and delivered
// to the drainer. It reports the live heap's growth per row less the
// value (overhead-B/row), and the process's resident memory growth per
// row, anonymous and file-backed (rss-B/row, anon-B/row, file-B/row;
// Linux only), once without a data dir and once with one (NoSync, which
// changes no memory), where values stay in the queue log's mapping.
func BenchmarkQueue_rowMemory(b *testing.B) {
	for _, bc := range []struct {
		name string
		disk bool
	}{{"memory", false}, {"datadir", true}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				cfg := Config{MemberID: 1, MaxQueueBytes: 1 << 30}
				if bc.disk {
					cfg.DataDir, cfg.NoSync = b.TempDir(), true
				}
				benchRowMemory(b, cfg)
				b.StartTimer()
			}
		})
	}
}

// benchRowMemory is one run of BenchmarkQueue_rowMemory on a member
// configured as cfg.
func benchRowMemory(b *testing.B, cfg Config) {
	const rows, size, txn = 100_000, 256, 128
	m := benchManagerWith(b, cfg)
	defer func() { _ = m.Shutdown(context.Background()) }()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rss0, rssOK := readRSS()
	b.StartTimer()
	puts := make([]*pb.PutRequest, txn)
	for i := 0; i < rows; i += txn {
		// Fresh requests each time, as gRPC decodes them.
		puts = puts[:min(txn, rows-i)]
		for j := range puts {
			puts[j] = &pb.PutRequest{Key: fmt.Appendf(nil, "/q/ch:events/p/%d", i+j), Value: fmt.Appendf(make([]byte, 0, size), `{"id":"%06d","pad":"%0*d"}`, i+j, size-24, 0)}
		}
		if err := m.Produce(context.Background(), puts); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	rss1, _ := readRSS()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if d := m.Status().Queues[0].Rows; d != rows {
		b.Fatalf("queued %d rows, want %d", d, rows)
	}
	per := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / rows
	b.ReportMetric(per-size, "overhead-B/row")
	if rssOK {
		b.ReportMetric(float64(rss1.total-rss0.total)/rows, "rss-B/row")
		b.ReportMetric(float64(rss1.anon-rss0.anon)/rows, "anon-B/row")
		b.ReportMetric(float64(rss1.file-rss0.file)/rows, "file-B/row")
	}
	runtime.KeepAlive(m)
}

// rss is the resident memory of this process, from /proc/self/status.
type rss struct{ total, anon, file int64 }

// readRSS reads VmRSS, RssAnon and RssFile; false where there is no
// /proc (not Linux).
func readRSS() (rss, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return rss{}, false
	}
	var r rss
	for line := range strings.Lines(string(b)) {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			r.total = kb << 10
		case "RssAnon":
			r.anon = kb << 10
		case "RssFile":
			r.file = kb << 10
		}
	}
	return r, r.total > 0
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
	b.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
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
// ClickHouse URL, so they stay queued): per op is per batch. It runs
// without a data dir and with one (NoSync: the CPU of the path, not the
// disk's waits), and reports the process's CPU time per op (cpu-ns/op,
// user and system, where getrusage exists) and the garbage
// collector's share of it as the runtime estimates it (gc-cpu-ns/op).
func BenchmarkProduce_txn128(b *testing.B) {
	for _, bc := range []struct {
		name string
		disk bool
	}{{"memory", false}, {"datadir", true}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{MemberID: 1, MaxQueueBytes: 1 << 40}
			if bc.disk {
				cfg.DataDir, cfg.NoSync = b.TempDir(), true
			}
			m := benchManagerWith(b, cfg)
			defer func() { _ = m.Shutdown(context.Background()) }()
			val := fmt.Appendf(nil, `{"id":1,"pad":"%0*d"}`, 256-17, 0)
			puts := make([]*pb.PutRequest, 128)
			b.ReportAllocs()
			cpu0, cpuOK := testutil.ProcessCPU()
			gc0 := gcCPU()
			i := 0
			for b.Loop() {
				for j := range puts {
					i++
					// A value of its own, as gRPC decodes it.
					puts[j] = &pb.PutRequest{Key: fmt.Appendf(nil, "/q/ch:events/p/%d", i), Value: slices.Clone(val)}
				}
				if err := m.Produce(context.Background(), puts); err != nil {
					b.Fatal(err)
				}
			}
			if cpu1, _ := testutil.ProcessCPU(); cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			b.ReportMetric((gcCPU()-gc0)*1e9/float64(b.N), "gc-cpu-ns/op")
		})
	}
}

// gcCPU returns the CPU seconds the garbage collector used so far, as
// the runtime estimates them.
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
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
