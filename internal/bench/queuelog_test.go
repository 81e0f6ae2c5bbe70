package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"chute/internal/nodeprobe"
)

// queueLogMetrics is a node's /metrics as the Prometheus exporter writes
// the queue log counters, among others.
const queueLogMetrics = `# HELP chute_queue_log_fsyncs_total Fsyncs of the queue log; appended/fsyncs is the group commit's batch.
# TYPE chute_queue_log_fsyncs_total counter
chute_queue_log_fsyncs_total 1234
# HELP chute_queue_log_appended_total Records appended to the queue log.
# TYPE chute_queue_log_appended_total counter
chute_queue_log_appended_total 4.0096e+06
# HELP chute_queue_log_records Live records of the queue log: messages this member keeps on disk.
# TYPE chute_queue_log_records gauge
chute_queue_log_records 5000
# TYPE chute_queue_puts_total counter
chute_queue_puts_total{queue="ch:x",result="OK"} 35
`

func TestParseQueueLog(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    queueLogCounters
		wantErr bool
	}{
		{"both", queueLogMetrics, queueLogCounters{fsyncs: 1234, records: 4009600}, false},
		{"zero", "# TYPE chute_queue_log_fsyncs_total counter\nchute_queue_log_fsyncs_total 0\n" +
			"# TYPE chute_queue_log_appended_total counter\nchute_queue_log_appended_total 0\n", queueLogCounters{}, false},
		{"no records", "# TYPE chute_queue_log_fsyncs_total counter\nchute_queue_log_fsyncs_total 3\n", queueLogCounters{}, true},
		{"neither", "# TYPE chute_queue_puts_total counter\nchute_queue_puts_total{queue=\"a\"} 1\n", queueLogCounters{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := nodeprobe.ParseMetrics([]byte(tt.text))
			if err != nil {
				t.Fatalf("ParseMetrics: %v", err)
			}
			got, err := parseQueueLog(m)
			if tt.wantErr {
				if !errors.Is(err, errQueueLog) {
					t.Errorf("parseQueueLog: got %+v, %v; want errQueueLog", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseQueueLog: got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestQueueLogCount(t *testing.T) {
	before := queueLogCounters{fsyncs: 100, records: 1000}
	r := Result{Elapsed: 2 * time.Second}
	tests := []struct {
		name    string
		after   queueLogCounters
		noFsync bool
		want    QueueLogCount
		wantErr bool
	}{
		{"fsync", queueLogCounters{fsyncs: 300, records: 7000}, false, QueueLogCount{Fsyncs: 200, Records: 6000, FsyncsPerSec: 100, RecordsPerFsync: 30}, false},
		{"no fsync", queueLogCounters{fsyncs: 100, records: 9000}, true, QueueLogCount{Records: 8000}, false},
		{"nothing put", before, false, QueueLogCount{}, false},
		{"no fsync fsynced", queueLogCounters{fsyncs: 101, records: 9000}, true, QueueLogCount{}, true},
		{"fsync never fsynced", queueLogCounters{fsyncs: 100, records: 9000}, false, QueueLogCount{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := queueLogCount(before, tt.after, r, tt.noFsync)
			if tt.wantErr {
				if !errors.Is(err, errQueueLog) {
					t.Errorf("queueLogCount: got %+v, %v; want errQueueLog", got, err)
				}
				return
			}
			if err != nil || *got != tt.want {
				t.Errorf("queueLogCount: got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestRun_measureHook_queueLog reads a fake node's queue log counters
// around the measured phase: they hold its puts and calls, not the
// warmup's.
func TestRun_measureHook_queueLog(t *testing.T) {
	for _, tt := range []struct {
		name    string
		txn     int
		noFsync bool
	}{
		{"unary", 0, false},
		{"txn", 10, false},
		{"unary, no fsync", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			node := newFakeNode("n", "")
			node.noFsync = tt.noFsync
			addr := serveFakeMetrics(t, node)
			cfg := smallConfig(startKV(t, node))
			cfg.Puts, cfg.Warmup, cfg.Txn = 400, 40, tt.txn
			cfg.Tables = []string{"t0"}
			var before, after queueLogCounters
			var calls []bool
			cfg.measureHook = func(ctx context.Context, start bool) error {
				calls = append(calls, start)
				n, err := readQueueLog(ctx, addr)
				if start {
					before = n
				} else {
					after = n
				}
				return err
			}
			r, err := Run(testContext(t), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(calls) != 2 || !calls[0] || calls[1] {
				t.Fatalf("hook calls: got %v, want [true false]", calls)
			}
			q, err := queueLogCount(before, after, r, tt.noFsync)
			if err != nil {
				t.Fatalf("queueLogCount: %v", err)
			}
			wantFsyncs := r.Calls
			if tt.noFsync {
				wantFsyncs = 0
			}
			if q.Records != 400 || q.Fsyncs != wantFsyncs {
				t.Errorf("queue log: got %d records, %d fsyncs; want 400, %d", q.Records, q.Fsyncs, wantFsyncs)
			}
		})
	}
}

func TestRun_measureHook_fails(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	boom := errors.New("boom")
	cfg.measureHook = func(_ context.Context, start bool) error {
		if start {
			return nil
		}
		return boom
	}
	if _, err := Run(testContext(t), cfg); !errors.Is(err, boom) {
		t.Errorf("Run: got %v, want the hook's error", err)
	}
}
