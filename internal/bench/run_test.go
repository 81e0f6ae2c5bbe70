package bench

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"chute/internal/testutil"
)

func TestRun_noopServer(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Puts != int64(cfg.Puts) {
		t.Errorf("puts: got %d, want %d", r.Puts, cfg.Puts)
	}
	if r.Errors != 0 || r.FirstError != "" {
		t.Errorf("errors: got %d (%q), want 0", r.Errors, r.FirstError)
	}
	if r.PutsPerSec <= 0 {
		t.Errorf("puts/s: got %v, want > 0", r.PutsPerSec)
	}
	if r.P50 <= 0 || r.P50 > r.P99 {
		t.Errorf("percentiles: got p50 %v p99 %v, want 0 < p50 <= p99", r.P50, r.P99)
	}
	if r.Clients != 4 || r.Conns != 3 || r.KeySize != cfg.KeySize || r.ValSize != cfg.ValSize {
		t.Errorf("shape: got %+v, want 4 clients, 3 conns, sizes %d/%d", r, cfg.KeySize, cfg.ValSize)
	}
	if r.Elapsed <= 0 {
		t.Errorf("elapsed: got %v, want > 0", r.Elapsed)
	}
}

func TestRun_connsCappedAtClients(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	cfg.Clients, cfg.Conns, cfg.Puts, cfg.Warmup = 2, 10, 100, 0
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Conns != 2 {
		t.Errorf("conns: got %d, want 2", r.Conns)
	}
}

// Each connection dials one endpoint: against two servers, four
// connections are two to each, as two are to one server of two.
func TestRun_connectionsSpreadOverEndpoints(t *testing.T) {
	var accepted [2]atomic.Int64
	cfg := smallConfig(startCountedNoop(t, &accepted[0]))
	cfg.Endpoints = append(cfg.Endpoints, startCountedNoop(t, &accepted[1]))
	cfg.Clients, cfg.Conns, cfg.Puts, cfg.Warmup = 8, 4, 400, 0
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Conns != 4 || r.Puts != 400 {
		t.Errorf("run: got %d conns, %d puts; want 4 and 400", r.Conns, r.Puts)
	}
	for i := range accepted {
		if n := accepted[i].Load(); n != 2 {
			t.Errorf("endpoint %d: accepted %d connections, want 2", i, n)
		}
	}
}

func TestRun_refusedServer(t *testing.T) {
	cfg := smallConfig(testutil.FreeAddr(t))
	cfg.DialTimeout = 500 * time.Millisecond
	start := time.Now()
	_, err := Run(testContext(t), cfg)
	if err == nil {
		t.Fatal("Run: got nil error, want one for a refused server")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v, want it to fail within the dial timeout", d)
	}
}

func TestRun_durationCap(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	cfg.Puts = maxPuts
	cfg.Warmup = 0
	cfg.Duration = 200 * time.Millisecond
	start := time.Now()
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v, want about %v", d, cfg.Duration)
	}
	if r.Puts <= 0 || r.Puts >= int64(cfg.Puts) {
		t.Errorf("puts: got %d, want some but not all %d", r.Puts, cfg.Puts)
	}
}

func TestRun_cancelled(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	cfg.Puts = maxPuts
	ctx, cancel := context.WithTimeout(testContext(t), 200*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: got %v, want an error wrapping context.DeadlineExceeded", err)
	}
}

func TestRun_invalidConfig(t *testing.T) {
	_, err := Run(testContext(t), Config{})
	if err == nil {
		t.Fatal("Run: got nil error, want a validation error")
	}
}

func TestConfig_Validate(t *testing.T) {
	valid := smallConfig("127.0.0.1:1")
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"valid", func(*Config) {}, true},
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, false},
		{"empty endpoint", func(c *Config) { c.Endpoints = []string{""} }, false},
		{"zero clients", func(c *Config) { c.Clients = 0 }, false},
		{"zero conns", func(c *Config) { c.Conns = 0 }, false},
		{"a conn for each endpoint", func(c *Config) { c.Endpoints = []string{"a:1", "b:1", "c:1"} }, true},
		{"fewer conns than endpoints", func(c *Config) { c.Endpoints, c.Conns = []string{"a:1", "b:1", "c:1"}, 2 }, false},
		{"fewer clients than endpoints", func(c *Config) { c.Endpoints, c.Clients = []string{"a:1", "b:1", "c:1"}, 2 }, false},
		{"zero puts", func(c *Config) { c.Puts = 0 }, false},
		{"too many puts", func(c *Config) { c.Puts = maxPuts + 1 }, false},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, false},
		{"zero key size", func(c *Config) { c.KeySize = 0 }, false},
		{"empty values", func(c *Config) { c.ValSize = 0 }, true},
		{"negative warmup", func(c *Config) { c.Warmup = -1 }, false},
		{"zero put timeout", func(c *Config) { c.PutTimeout = 0 }, false},
		{"zero dial timeout", func(c *Config) { c.DialTimeout = 0 }, false},
		{"txn 128", func(c *Config) { c.Txn = 128 }, true},
		{"txn 129", func(c *Config) { c.Txn = 129 }, false},
		{"negative txn", func(c *Config) { c.Txn = -1 }, false},
		{"negative rate", func(c *Config) { c.Rate = -1 }, false},
		{"tables", func(c *Config) { c.Tables = []string{"bench_ab_0", "_x9"} }, true},
		{"table name", func(c *Config) { c.Tables = []string{"a-b"} }, false},
		{"table digit", func(c *Config) { c.Tables = []string{"9a"} }, false},
		{"too many tables", func(c *Config) { c.Tables = make([]string, maxQueues+1) }, false},
		{"clickhouse without tables", func(c *Config) { c.ClickHouseURL = "http://ch" }, false},
		{"claim without tables", func(c *Config) { c.Claim = "127.0.0.1:1" }, false},
		{"negative land timeout", func(c *Config) { c.LandTimeout = -time.Second }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.mutate(&cfg)
			err := cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate: got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// recordingKV answers like the no-op server and records every call: the
// size of each txn, and every key and value put.
type recordingKV struct {
	pb.UnimplementedKVServer
	mu     sync.Mutex // guards the fields below
	unary  int
	txns   []int
	keys   []string
	values []string
	tables [][]string // the tables of each txn's puts
}

func (k *recordingKV) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.unary++
	k.keys = append(k.keys, string(r.Key))
	k.values = append(k.values, string(r.Value))
	return &pb.PutResponse{Header: noopHeader()}, nil
}

func (k *recordingKV) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.txns = append(k.txns, len(r.Success))
	var tables []string
	for _, op := range r.Success {
		p := op.GetRequestPut()
		k.keys = append(k.keys, string(p.Key))
		k.values = append(k.values, string(p.Value))
		tables = append(tables, tableOf(string(p.Key)))
	}
	k.tables = append(k.tables, tables)
	return &pb.TxnResponse{Header: noopHeader(), Succeeded: true}, nil
}

// tableOf is the table of a produce key /q/ch:<table>/p/<key>; empty for
// other keys.
func tableOf(key string) string {
	rest, ok := strings.CutPrefix(key, "/q/ch:")
	if !ok {
		return ""
	}
	t, _, _ := strings.Cut(rest, "/p/")
	return t
}

// startKV serves kv's API (and Maintenance) on a random loopback port
// until the test ends and returns its address.
func startKV(t *testing.T, kv pb.KVServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	pb.RegisterKVServer(srv, kv)
	pb.RegisterMaintenanceServer(srv, noopMaintenance{})
	done := make(chan struct{})
	go func() {
		_ = srv.Serve(l)
		close(done)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return l.Addr().String()
}

func TestRun_txn(t *testing.T) {
	rec := &recordingKV{}
	cfg := smallConfig(startKV(t, rec))
	cfg.Puts, cfg.Warmup, cfg.Txn = 1000, 32, 16
	r, err := Run(testContext(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Txn != 16 || r.Puts != 1000 || r.Calls != 63 || r.Errors != 0 {
		t.Errorf("result: got txn %d, %d puts in %d calls, %d errors; want txn 16, 1000 in 63, 0", r.Txn, r.Puts, r.Calls, r.Errors)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.unary != cfg.conns() {
		t.Errorf("unary puts: got %d, want the %d probes only", rec.unary, cfg.conns())
	}
	sizes := map[int]int{}
	total := 0
	for _, n := range rec.txns {
		sizes[n]++
		total += n
	}
	if total != 1032 || sizes[16] != 64 || sizes[8] != 1 || len(sizes) != 2 {
		t.Errorf("txns: got sizes %v (%d puts), want 64 of 16 and 1 of 8 (1032 puts)", sizes, total)
	}
	seen := map[string]bool{}
	for _, k := range rec.keys {
		if seen[k] {
			t.Fatalf("key %q put twice", k)
		}
		seen[k] = true
	}
}

// TestRun_tables checks the shape of queue puts: every table gets its
// share, a txn's puts go to one table, values are JSON rows of ValSize.
func TestRun_tables(t *testing.T) {
	for _, txn := range []int{0, 10} {
		rec := &recordingKV{}
		cfg := smallConfig(startKV(t, rec))
		cfg.Puts, cfg.Warmup, cfg.Txn = 300, 0, txn
		cfg.Tables = []string{"t0", "t1", "t2"}
		if _, err := Run(testContext(t), cfg); err != nil {
			t.Fatalf("txn %d: Run: %v", txn, err)
		}
		rec.mu.Lock()
		perTable := map[string]int{}
		for i, k := range rec.keys {
			tb := tableOf(k)
			if tb == "" {
				continue // a probe
			}
			perTable[tb]++
			if v := rec.values[i]; len(v) != cfg.ValSize || !strings.HasPrefix(v, `{"id":`) || !strings.HasSuffix(v, `"}`) {
				t.Fatalf("txn %d: value of %s: got %d bytes %.40q..., want a %d-byte row", txn, k, len(v), v, cfg.ValSize)
			}
		}
		for _, tables := range rec.tables {
			for _, tb := range tables {
				if tb != tables[0] {
					t.Errorf("txn %d: a txn's puts go to tables %v, want one", txn, tables)
					break
				}
			}
		}
		rec.mu.Unlock()
		if perTable["t0"] != 100 || perTable["t1"] != 100 || perTable["t2"] != 100 {
			t.Errorf("txn %d: puts per table: got %v, want 100 each", txn, perTable)
		}
	}
}

func TestRun_rate(t *testing.T) {
	for _, tt := range []struct {
		txn  int
		puts int
		rate float64
	}{{0, 300, 1500}, {16, 640, 3200}} {
		cfg := smallConfig(startNoop(t))
		cfg.Puts, cfg.Warmup, cfg.Txn, cfg.Rate = tt.puts, 0, tt.txn, tt.rate
		start := time.Now()
		r, err := Run(testContext(t), cfg)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		// The last call starts (calls-1)/calls of puts/rate after the first.
		calls := float64(cfg.calls(tt.puts))
		least := time.Duration(float64(time.Second) * float64(tt.puts) / tt.rate * (calls - 1) / calls)
		if r.Elapsed < least || time.Since(start) < least {
			t.Errorf("txn %d at %v puts/s: took %v, want at least %v", tt.txn, tt.rate, r.Elapsed, least)
		}
		if r.Rate != tt.rate || r.Puts != int64(tt.puts) || r.PutsPerSec > tt.rate*1.1 {
			t.Errorf("txn %d: got rate %v, %d puts at %.0f/s; want %v, %d, at most 10%% over", tt.txn, r.Rate, r.Puts, r.PutsPerSec, tt.rate, tt.puts)
		}
	}
}

// TestRun_claim has node a claim the queues while the puts go to node b.
func TestRun_claim(t *testing.T) {
	a, b := newFakeNode("a", ""), newFakeNode("b", "")
	cfg := smallConfig(startKV(t, b))
	cfg.Puts, cfg.Warmup = 200, 20
	cfg.Tables = []string{"t0", "t1"}
	cfg.Claim = startKV(t, a)
	if _, err := Run(testContext(t), cfg); err != nil {
		t.Fatalf("Run: %v", err)
	}
	a.mu.Lock()
	b.mu.Lock()
	defer a.mu.Unlock()
	defer b.mu.Unlock()
	if a.depth["ch:t0"] != 1 || a.depth["ch:t1"] != 1 || b.depth["ch:t0"] != 110 || b.depth["ch:t1"] != 110 {
		t.Errorf("rows: got claimer %v, producer %v; want one per queue on the claimer, the rest on the other", a.depth, b.depth)
	}
}

// TestRun_claimWithoutRecord: a claim endpoint that shows no dispatcher
// record after a put fails the run.
func TestRun_claimWithoutRecord(t *testing.T) {
	cfg := smallConfig(startNoop(t))
	cfg.Tables = []string{"t0"}
	cfg.Claim = cfg.Endpoints[0]
	_, err := Run(testContext(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "no dispatcher record") {
		t.Errorf("Run: got %v, want no dispatcher record", err)
	}
}
