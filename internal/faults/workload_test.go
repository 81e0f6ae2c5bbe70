package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"chute/internal/testutil"
	"chute/kv"
)

// startKV starts chute's KV server in this process on a free loopback
// port, without queues (every key is an ordinary key, so a test reads the
// producers' puts back), and returns its address. It stops when the test
// ends.
func startKV(t testing.TB) string {
	t.Helper()
	cfg := kv.DefaultConfig()
	cfg.Name = "faults"
	cfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	srv, err := kv.New(cfg)
	if err != nil {
		t.Fatalf("kv.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("kv Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("kv Shutdown: %v", err)
		}
	})
	return srv.ClientAddrs()[0].String()
}

// row is a value the workload puts.
type row struct {
	ID  uint64 `json:"id"`
	P   int    `json:"p"`
	N   uint64 `json:"n"`
	Pad string `json:"pad"`
}

// readPuts returns the producer keys of queue in the KV at addr, with
// their values.
func readPuts(t testing.TB, addr, queue string) map[string]string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/q/"+queue+"/p/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("get the puts: %v", err)
	}
	m := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m
}

func waitDone(t testing.TB, w *Workload, timeout time.Duration) {
	t.Helper()
	select {
	case <-w.Done():
	case <-time.After(timeout):
		t.Fatalf("workload not done within %v", timeout)
	}
}

func TestWorkload_puts(t *testing.T) {
	addr := startKV(t)
	for _, tc := range []struct {
		name         string
		batch, max   int
		pad          int
		wantRequests int // per producer
	}{
		{"unary", 1, 40, 0, 40},
		{"txn of 8", 8, 40, 0, 5},
		{"txn of 16, last one short", 16, 40, 0, 3},
		{"padded", 4, 8, 100, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue := "ch:" + strings.ReplaceAll(tc.name, " ", "_")
			cfg := DefaultWorkloadConfig()
			cfg.Queue, cfg.Endpoints = queue, []string{addr}
			cfg.Producers, cfg.FirstProducer = 3, 5
			cfg.Batch, cfg.MaxPuts, cfg.Pad = tc.batch, tc.max, tc.pad
			w, err := StartWorkload(cfg)
			if err != nil {
				t.Fatal(err)
			}
			waitDone(t, w, 30*time.Second)
			log := w.Stop()
			if got, want := len(log), 3*tc.max; got != want || log.Count(Acked) != want {
				t.Fatalf("outcomes: got %d, %d acked (first errors %v); want %d, all acked", got, log.Count(Acked), w.FirstErrors(), want)
			}
			if a, f, to := w.Counts(); a != len(log) || f != 0 || to != 0 {
				t.Errorf("Counts: got %d, %d, %d; want %d, 0, 0", a, f, to, len(log))
			}
			requests := make(map[[2]int64]bool) // producer, start
			for _, o := range log {
				requests[[2]int64{int64(o.Producer), o.Start.UnixNano()}] = true
			}
			if got, want := len(requests), 3*tc.wantRequests; got != want {
				t.Errorf("requests: got %d, want %d", got, want)
			}
			puts := readPuts(t, addr, queue)
			if len(puts) != len(log) {
				t.Errorf("keys in the KV: got %d, want %d", len(puts), len(log))
			}
			for _, o := range log {
				p, n := SplitID(o.ID)
				if p != o.Producer || p < 5 || p > 7 || n >= uint64(tc.max) {
					t.Errorf("outcome %+v: id of producer %d, put %d; want producers 5-7, puts below %d", o, p, n, tc.max)
				}
				key := Key(queue, p, n)
				var r row
				if err := json.Unmarshal([]byte(puts[key]), &r); err != nil {
					t.Errorf("%s = %q: %v", key, puts[key], err)
					continue
				}
				if r.ID != o.ID || r.P != p || r.N != n || len(r.Pad) != tc.pad {
					t.Errorf("%s = %q: want id %d, p %d, n %d and %d bytes of pad", key, puts[key], o.ID, p, n, tc.pad)
				}
			}
		})
	}
}

func TestWorkload_rateAndDuration(t *testing.T) {
	addr := startKV(t)
	cfg := DefaultWorkloadConfig()
	cfg.Queue, cfg.Endpoints = "ch:rate", []string{addr}
	cfg.Producers, cfg.Rate, cfg.Duration = 2, 20, 500*time.Millisecond
	start := time.Now()
	w, err := StartWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, w, 10*time.Second)
	took := time.Since(start)
	log := w.Stop()
	// 20/s for 0.5 s: about 10 puts each, first after one tick.
	if n := log.Count(Acked); n < 2*6 || n > 2*11 {
		t.Errorf("acked puts of 2 producers at 20/s for %v: got %d, want about 20", cfg.Duration, n)
	}
	if took > 3*time.Second {
		t.Errorf("a workload of %v ended after %v", cfg.Duration, took)
	}
}

func TestWorkload_Stop(t *testing.T) {
	addr := startKV(t)
	cfg := DefaultWorkloadConfig()
	cfg.Queue, cfg.Endpoints, cfg.Duration = "ch:stop", []string{addr}, time.Hour
	w, err := StartWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if a, _, _ := w.Counts(); a >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("100 puts not acknowledged within 10s: %v", w.FirstErrors())
		}
	}
	log := w.Stop()
	select {
	case <-w.Done():
	default:
		t.Fatal("Done open after Stop")
	}
	if again := w.Stop(); len(again) != len(log) {
		t.Errorf("a second Stop: got %d outcomes, want the same %d", len(again), len(log))
	}
	if got := len(readPuts(t, addr, "ch:stop")); got != log.Count(Acked) || got != len(log) {
		t.Errorf("keys: got %d, want %d acked of %d", got, log.Count(Acked), len(log))
	}
}

func TestWorkload_unreachable(t *testing.T) {
	addr := testutil.FreeAddr(t) // nobody listens there
	cfg := DefaultWorkloadConfig()
	cfg.Queue, cfg.Endpoints = "ch:nowhere", []string{addr}
	cfg.Producers, cfg.MaxPuts, cfg.PutTimeout, cfg.FailurePause = 2, 3, 300*time.Millisecond, time.Millisecond
	w, err := StartWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, w, 20*time.Second)
	log := w.Stop()
	if len(log) != 6 || log.Count(Acked) != 0 {
		t.Fatalf("outcomes: got %d, %d acked; want 6, none acked", len(log), log.Count(Acked))
	}
	for _, o := range log {
		if (o.Result != Failed || o.Code != codes.Unavailable) && (o.Result != TimedOut || o.Code != codes.DeadlineExceeded) {
			t.Errorf("outcome of a put to a closed port: %v %v, want failed Unavailable or timed out", o.Result, o.Code)
		}
	}
}

func TestWorkloadConfig_Validate(t *testing.T) {
	good := DefaultWorkloadConfig()
	good.Queue, good.Endpoints, good.MaxPuts = "ch:t", []string{"127.0.0.1:1"}, 10
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate of a good config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*WorkloadConfig)
		want   string
	}{
		{"no queue", func(c *WorkloadConfig) { c.Queue = "" }, "queue"},
		{"queue with a slash", func(c *WorkloadConfig) { c.Queue = "a/b" }, "queue"},
		{"no endpoints", func(c *WorkloadConfig) { c.Endpoints = nil }, "no endpoints"},
		{"unbounded", func(c *WorkloadConfig) { c.MaxPuts = 0 }, "unbounded"},
		{"batch over the txn limit", func(c *WorkloadConfig) { c.Batch = 129 }, "batch 129"},
		{"negative rate", func(c *WorkloadConfig) { c.Rate = -1 }, "negative"},
		{"counter past 32 bits", func(c *WorkloadConfig) { c.MaxPuts = 1 << 32 }, "max puts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: got %v, want an error with %q", err, tc.want)
			}
			if _, err := StartWorkload(c); err == nil {
				t.Error("StartWorkload accepted it")
			}
		})
	}
}

func ExampleKey() {
	fmt.Println(Key("ch:events", 2, 7), ID(2, 7))
	// Output: /q/ch:events/p/2-7 8589934599
}
