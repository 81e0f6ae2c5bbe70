package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// testMatrix runs the test binary itself as both children (see TestMain).
func testMatrix(t *testing.T, nodeArgs ...string) matrixConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	t.Setenv(fakeChildEnv, "1")
	base := smallConfig("unused")
	base.Puts, base.Warmup = 300, 10
	return matrixConfig{
		chute:        exe,
		self:         exe,
		base:         base,
		clients:      []int{1, 4},
		nodeArgs:     nodeArgs,
		readyTimeout: 15 * time.Second,
		childOutput:  io.Discard,
	}
}

func TestRunMatrix_fakeChildren(t *testing.T) {
	mc := testMatrix(t)
	out, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("runMatrix: %v", err)
	}
	results := out.results
	want := []struct {
		server  string
		clients int
	}{{ServerNoop, 1}, {ServerChute, 1}, {ServerNoop, 4}, {ServerChute, 4}}
	if len(results) != len(want) {
		t.Fatalf("results: got %d, want %d: %+v", len(results), len(want), results)
	}
	for i, w := range want {
		r := results[i]
		if r.Server != w.server || r.Clients != w.clients || r.Puts != 300 || r.Errors != 0 {
			t.Errorf("result %d: got %s/%d clients/%d puts/%d errors, want %s/%d/300/0",
				i, r.Server, r.Clients, r.Puts, r.Errors, w.server, w.clients)
		}
		if len(r.PeakRSS) != 1 || r.PeakRSS[0].Node != w.server || r.PeakRSS[0].Bytes <= 0 {
			t.Errorf("result %d: got peak RSS %+v, want one of %s", i, r.PeakRSS, w.server)
		}
		if len(r.CPU) != 1 || r.CPU[0].Node != w.server || r.CPU[0].Seconds < 0 {
			t.Errorf("result %d: got CPU %+v, want one of %s", i, r.CPU, w.server)
		}
	}
	if got := NewReport(Measured{Results: results}).Ratios; len(got) != 2 {
		t.Errorf("ratios: got %+v, want two", got)
	}
	if out.raw != nil || out.memory != nil {
		t.Errorf("plain matrix: got raw %+v and memory %+v, want neither", out.raw, out.memory)
	}
}

// TestRunMatrix_txn runs the plain matrix in txns of 16 puts.
func TestRunMatrix_txn(t *testing.T) {
	mc := testMatrix(t)
	mc.clients = []int{4}
	mc.base.Txn = 16
	out, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("runMatrix: %v", err)
	}
	for _, r := range out.results {
		if r.Txn != 16 || r.Puts != 300 || r.Calls != 19 {
			t.Errorf("%s: got txn %d, %d puts in %d calls; want txn 16, 300 in 19", r.Server, r.Txn, r.Puts, r.Calls)
		}
	}
	if rs := NewReport(Measured{Results: out.results}).Ratios; len(rs) != 1 || rs[0].Txn != 16 {
		t.Errorf("ratios: got %+v, want one at txn 16", rs)
	}
}

func TestRunMatrix_childExits(t *testing.T) {
	mc := testMatrix(t, "--fail")
	start := time.Now()
	_, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if !errors.Is(err, errChildExited) || !strings.Contains(err.Error(), "chute: exit status 3") {
		t.Fatalf("runMatrix: got %v, want a child-exited error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("runMatrix took %v, want an early failure", d)
	}
}

// TestRunMatrix_traced runs the matrix with --trace while this process's
// environment points OTLP at a stray sink: the traced fake node must send
// one span per call to the matrix's own sink, and no child may send any to
// the stray one.
func TestRunMatrix_traced(t *testing.T) {
	mc := testMatrix(t)
	mc.trace = true
	stray, err := startOTLPSink()
	if err != nil {
		t.Fatalf("startOTLPSink: %v", err)
	}
	t.Cleanup(func() { _ = stray.stop(time.Second) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", stray.endpoint())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")

	out, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("runMatrix: %v", err)
	}
	results := out.results
	want := []struct {
		server  string
		clients int
		calls   int64 // probes (one per connection) + warmup + puts
	}{
		{ServerNoop, 1, 0}, {ServerChute, 1, 0}, {ServerChuteTraced, 1, 1 + 10 + 300},
		{ServerNoop, 4, 0}, {ServerChute, 4, 0}, {ServerChuteTraced, 4, 3 + 10 + 300},
	}
	if len(results) != len(want) {
		t.Fatalf("results: got %d, want %d: %+v", len(results), len(want), results)
	}
	for i, w := range want {
		r := results[i]
		if r.Server != w.server || r.Clients != w.clients || r.Puts != 300 || r.Errors != 0 {
			t.Errorf("result %d: got %s/%d clients/%d puts/%d errors, want %s/%d/300/0",
				i, r.Server, r.Clients, r.Puts, r.Errors, w.server, w.clients)
		}
		switch {
		case w.calls == 0 && r.Trace != nil:
			t.Errorf("result %d (%s): got trace %+v, want none", i, r.Server, *r.Trace)
		case w.calls > 0 && r.Trace == nil:
			t.Errorf("result %d (%s): got no trace, want %d spans", i, r.Server, w.calls)
		case w.calls > 0 && (r.Trace.Spans != w.calls || r.Trace.Calls != w.calls):
			t.Errorf("result %d (%s): got %d spans for %d calls, want %d for %d",
				i, r.Server, r.Trace.Spans, r.Trace.Calls, w.calls, w.calls)
		}
	}
	rep := NewReport(Measured{Results: results})
	if len(rep.Ratios) != 2 || len(rep.Tracing) != 2 {
		t.Errorf("report: got ratios %+v and tracing %+v, want two of each", rep.Ratios, rep.Tracing)
	}
	if n := stray.received(); n != 0 {
		t.Errorf("stray sink named by the bench's own environment: got %d spans, want 0", n)
	}
}

// TestRunMatrix_traceWithoutSpans has the traced node ignore its OTLP
// variables, as a chute without tracing would: the matrix must fail rather
// than report untraced figures under the traced label.
func TestRunMatrix_traceWithoutSpans(t *testing.T) {
	mc := testMatrix(t, "--ignore-otel")
	mc.trace = true
	out, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if !errors.Is(err, errNoSpans) {
		t.Fatalf("runMatrix: got %v, want errNoSpans", err)
	}
	if len(out.results) != 0 {
		t.Errorf("results: got %+v, want none", out.results)
	}
}

func TestMatrixTargets(t *testing.T) {
	sink, err := startOTLPSink()
	if err != nil {
		t.Fatalf("startOTLPSink: %v", err)
	}
	t.Cleanup(func() { _ = sink.stop(time.Second) })
	mc := matrixConfig{chute: "/bin/chute", self: "/bin/chute-bench", nodeArgs: []string{"--x"}, clickhouseURL: "http://ch:8123"}
	environ := []string{"HOME=/h", "OTEL_EXPORTER_OTLP_ENDPOINT=http://elsewhere:4317", "OTEL_TRACES_SAMPLER=always_off"}
	ports := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}

	untraced := matrixTargets(mc, ports, "/d", environ, nil)
	if len(untraced) != 2 {
		t.Fatalf("targets without a sink: got %d, want 2", len(untraced))
	}
	traced := matrixTargets(mc, ports, "/d", environ, sink)
	if len(traced) != 3 {
		t.Fatalf("targets with a sink: got %d, want 3", len(traced))
	}
	tests := []struct {
		name, endpoint, metrics, exe, argv, env string
		sink                                    bool
	}{
		{ServerNoop, "127.0.0.1:5", "", "/bin/chute-bench", "noop-server --listen 127.0.0.1:5", "HOME=/h", false},
		{ServerChute, "http://127.0.0.1:1", "127.0.0.1:4", "/bin/chute",
			"--name bench --listen-client-urls http://127.0.0.1:1 --listen-peer-urls http://127.0.0.1:2" +
				" --gossip-listen 127.0.0.1:3 --metrics-listen 127.0.0.1:4 --log-level warn --data-dir /d/bench.chute --x --clickhouse-url http://ch:8123",
			"HOME=/h", false},
		{ServerChuteTraced, "http://127.0.0.1:6", "127.0.0.1:9", "/bin/chute",
			"--name bench-traced --listen-client-urls http://127.0.0.1:6 --listen-peer-urls http://127.0.0.1:7" +
				" --gossip-listen 127.0.0.1:8 --metrics-listen 127.0.0.1:9 --log-level warn --data-dir /d/bench-traced.chute --x --clickhouse-url http://ch:8123",
			"HOME=/h OTEL_EXPORTER_OTLP_PROTOCOL=grpc OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.endpoint() + " OTEL_TRACES_SAMPLER=always_on",
			true},
	}
	for i, tt := range tests {
		got := traced[i]
		if got.name != tt.name || got.endpoint != tt.endpoint || got.metrics != tt.metrics || (got.sink != nil) != tt.sink {
			t.Errorf("target %d: got %s at %s, metrics %q (sink %v), want %s at %s, metrics %q (sink %v)",
				i, got.name, got.endpoint, got.metrics, got.sink != nil, tt.name, tt.endpoint, tt.metrics, tt.sink)
		}
		if got.exe != tt.exe {
			t.Errorf("%s exe: got %q, want %q", tt.name, got.exe, tt.exe)
		}
		if a := strings.Join(got.argv, " "); a != tt.argv {
			t.Errorf("%s argv: got %q, want %q", tt.name, a, tt.argv)
		}
		if e := strings.Join(got.env, " "); e != tt.env {
			t.Errorf("%s env: got %q, want %q", tt.name, e, tt.env)
		}
		if i < len(untraced) && strings.Join(untraced[i].env, " ") != tt.env {
			t.Errorf("%s env without a sink: got %q, want %q", tt.name, untraced[i].env, tt.env)
		}
	}
}

func TestClusterTargets(t *testing.T) {
	mc := matrixConfig{nodeArgs: []string{"--x"}, clickhouseURL: "http://ch:8123"}
	ports := make([]int, 12)
	for i := range ports {
		ports[i] = 10 + i
	}
	nodes := clusterTargets(mc, ports, "/d", []string{"HOME=/h", "OTEL_X=y"})
	if len(nodes) != 3 {
		t.Fatalf("nodes: got %d, want 3", len(nodes))
	}
	for i, n := range nodes {
		base := 10 + 4*i
		want := fmt.Sprintf("--name bench-%d --listen-client-urls http://127.0.0.1:%d --listen-peer-urls http://127.0.0.1:%d"+
			" --gossip-listen 127.0.0.1:%d --metrics-listen 127.0.0.1:%d --log-level warn --data-dir /d/bench-%d.chute"+
			" --x --clickhouse-url http://ch:8123 --bootstrap-expect 3",
			i+1, base, base+1, base+2, base+3, i+1)
		if i > 0 {
			want += " --join 127.0.0.1:12" // the first node's gossip
		}
		if got := strings.Join(n.argv, " "); got != want {
			t.Errorf("node %d argv: got %q, want %q", i+1, got, want)
		}
		if n.endpoint != fmt.Sprintf("http://127.0.0.1:%d", base) || n.metrics != fmt.Sprintf("127.0.0.1:%d", base+3) {
			t.Errorf("node %d: got endpoint %s, metrics %s", i+1, n.endpoint, n.metrics)
		}
		if e := strings.Join(n.env, " "); e != "HOME=/h" {
			t.Errorf("node %d env: got %q, want HOME=/h", i+1, e)
		}
	}
}

func TestMemoryTarget_unreachableClickHouse(t *testing.T) {
	mc := matrixConfig{clickhouseURL: "http://ch:8123"}
	got := strings.Join(memoryTarget(mc, []int{1, 2, 3, 4}, "/d", nil, "http://127.0.0.1:5").argv, " ")
	if strings.Contains(got, "ch:8123") || !strings.HasSuffix(got, " --clickhouse-url http://127.0.0.1:5") ||
		!strings.HasPrefix(got, "--name bench-mem ") || !strings.Contains(got, " --data-dir /d/bench-mem.chute") {
		t.Errorf("memory node argv: got %q, want bench-mem inserting into the closed port alone", got)
	}
	env := memoryTarget(mc, []int{1, 2, 3, 4}, "/d", []string{"HOME=/h", "GOGC=400"}, "http://127.0.0.1:5").env
	if want := []string{"HOME=/h", "GOGC=100"}; !slices.Equal(env, want) {
		t.Errorf("memory node env: got %q, want %q (the heap floor off)", env, want)
	}
}

func TestChildEnv(t *testing.T) {
	got := childEnv([]string{"A=1", "OTEL_SDK_DISABLED=true", "XOTEL_=2", "OTEL_X=y"}, "OTEL_TRACES_SAMPLER=always_on")
	want := []string{"A=1", "XOTEL_=2", "OTEL_TRACES_SAMPLER=always_on"}
	if !slices.Equal(got, want) {
		t.Errorf("childEnv: got %q, want %q", got, want)
	}
}

func TestChuteCommand(t *testing.T) {
	got := strings.Join(chuteCommand("bench", []int{1, 2, 3, 4}), " ")
	want := "--name bench --listen-client-urls http://127.0.0.1:1 --listen-peer-urls http://127.0.0.1:2" +
		" --gossip-listen 127.0.0.1:3 --metrics-listen 127.0.0.1:4 --log-level warn"
	if got != want {
		t.Errorf("chuteCommand: got %q, want %q", got, want)
	}
}

func TestFreePorts_distinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatalf("freePorts: %v", err)
	}
	seen := make(map[int]bool)
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports: got %v, want 5 distinct positive", ports)
		}
		seen[p] = true
	}
}

// TestRunMatrix_repeat runs every cell of the plain matrix three times:
// one result per cell, the median of three runs.
func TestRunMatrix_repeat(t *testing.T) {
	mc := testMatrix(t)
	mc.clients = []int{2}
	mc.repeat = 3
	out, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("runMatrix: %v", err)
	}
	if len(out.results) != 2 {
		t.Fatalf("results: got %d, want one per server: %+v", len(out.results), out.results)
	}
	for _, r := range out.results {
		sp := r.Spread
		if sp == nil || sp.Runs != 3 || sp.MinPutsPerSec > r.PutsPerSec || r.PutsPerSec > sp.MaxPutsPerSec || r.Puts != 300 {
			t.Errorf("%s: got %.0f puts/s, %d puts, spread %+v; want the median of 3 runs of 300 puts", r.Server, r.PutsPerSec, r.Puts, sp)
		}
	}
}

// The no-op at chute's latency is the bench's own no-op server, holding
// puts and txns for their delays.
func TestLatencyNoopTarget(t *testing.T) {
	mc := matrixConfig{self: "/b/chute-bench"}
	tg := latencyNoopTarget(mc, ServerNoopAtClusterLatency, 17, NoopDelays{Put: 3500 * time.Microsecond, Txn: 21 * time.Millisecond}, []string{"HOME=/h"})
	want := "noop-server --listen 127.0.0.1:17 --put-delay 3.5ms --txn-delay 21ms"
	if got := strings.Join(tg.argv, " "); got != want || tg.exe != mc.self || tg.name != ServerNoopAtClusterLatency || tg.endpoint != "127.0.0.1:17" {
		t.Errorf("got %s %q as %q at %s, want %s %q as %q at 127.0.0.1:17", tg.exe, got, tg.name, tg.endpoint, mc.self, want, ServerNoopAtClusterLatency)
	}
}
