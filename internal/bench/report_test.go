package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleResults() []Result {
	return []Result{
		{Server: ServerNoop, Clients: 1, Conns: 1, KeySize: 16, ValSize: 256, Puts: 1000, Calls: 1000, Elapsed: time.Second, PutsPerSec: 1000, P50: 900 * time.Microsecond, P99: 2 * time.Millisecond, P999: 3 * time.Millisecond},
		{Server: ServerChute, Clients: 1, Conns: 1, KeySize: 16, ValSize: 256, Puts: 1000, Calls: 1000, Elapsed: 2 * time.Second, PutsPerSec: 500, P50: 1800 * time.Microsecond, P99: 4 * time.Millisecond, P999: 5 * time.Millisecond,
			PeakRSS: []NodeRSS{{Node: ServerChute, Bytes: 40 << 20}}, CPU: []NodeCPU{{Node: ServerChute, Seconds: 0.05, MicrosPerPut: 25}}},
		{Server: ServerNoop, Clients: 100, Conns: 10, KeySize: 16, ValSize: 256, Puts: 100000, Calls: 100000, Elapsed: 2 * time.Second, PutsPerSec: 50000, P50: 1500 * time.Microsecond, P99: 6 * time.Millisecond, P999: 9 * time.Millisecond},
		{Server: ServerChute, Clients: 100, Conns: 10, KeySize: 16, ValSize: 256, Puts: 99990, Calls: 99990, Errors: 10, FirstError: "boom", Elapsed: 2 * time.Second, PutsPerSec: 45000, P50: 1700 * time.Microsecond, P99: 7 * time.Millisecond, P999: 8 * time.Millisecond},
	}
}

func TestReport_WriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := NewReport(Measured{Results: sampleResults()}).WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if got, want := lines[0], "| server | calls | clients | conns | queues | puts/s | p50 ms | p99 ms | p99.9 ms | peak RSS MiB | CPU µs/put |"; got != want {
		t.Errorf("header: got %q, want %q", got, want)
	}
	rows := 0
	for _, l := range lines[2:] {
		if strings.HasPrefix(l, "| ") {
			rows++
		}
	}
	if rows != 4 {
		t.Errorf("rows: got %d, want 4 in\n%s", rows, out)
	}
	for _, want := range []string{
		"| no-op | put | 1 | 1 | - | 1000 | 0.900 | 2.000 | 3.000 | - | - |",
		"| chute | put | 1 | 1 | - | 500 | 1.800 | 4.000 | 5.000 | 40 | 25.0 |",
		"| chute | put | 100 | 10 | - | 45000 | 1.700 | 7.000 | 8.000 | - | - |",
		"chute/no-op puts/s: 1 clients 0.50 (50%), 100 clients 0.90 (90%)",
		"errors: chute, put, 100 clients: 10 of 100000 puts failed, e.g. boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"Rows into ClickHouse", "Raw JSONEachRow", "Memory", "Targets"} {
		if strings.Contains(out, absent) {
			t.Errorf("markdown of put runs only holds %q:\n%s", absent, out)
		}
	}
}

// tracedResults are sampleResults with a traced chute node at both client
// counts.
func tracedResults() []Result {
	rs := sampleResults()
	traced := []Result{
		{Server: ServerChuteTraced, Clients: 1, Conns: 1, KeySize: 16, ValSize: 256, Puts: 1000, Elapsed: 2500 * time.Millisecond, PutsPerSec: 400,
			P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, P999: 6 * time.Millisecond, Trace: &TraceCount{Spans: 2001, Calls: 2001}},
		{Server: ServerChuteTraced, Clients: 100, Conns: 10, KeySize: 16, ValSize: 256, Puts: 100000, Elapsed: 2 * time.Second, PutsPerSec: 36000,
			P50: 2 * time.Millisecond, P99: 8 * time.Millisecond, P999: 9 * time.Millisecond, Trace: &TraceCount{Spans: 90000, Calls: 101010}},
	}
	return []Result{rs[0], rs[1], traced[0], rs[2], rs[3], traced[1]}
}

func TestReport_WriteMarkdown_traced(t *testing.T) {
	var b bytes.Buffer
	rep := NewReport(Measured{Results: tracedResults()})
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"| chute, traced 100% | put | 1 | 1 | - | 400 | 2.000 | 5.000 | 6.000 | - | - |\n| no-op | put | 100 |",
		"| chute, traced 100% | put | 100 | 10 | - | 36000 | 2.000 | 8.000 | 9.000 | - | - |",
		"\nchute/no-op puts/s: 1 clients 0.50 (50%), 100 clients 0.90 (90%)\n" +
			"traced/untraced chute puts/s: 1 clients 0.80 (80%), 100 clients 0.80 (80%)\n" +
			"spans received by the bench's OTLP sink: 1 clients 2001 for 2001 KV calls, 100 clients 90000 for 101010 KV calls\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if len(rep.Ratios) != 2 {
		t.Errorf("ratios: got %+v, want chute/no-op at 1 and 100 clients only", rep.Ratios)
	}
}

func TestReport_WriteMarkdown_singleServer(t *testing.T) {
	var b bytes.Buffer
	r := NewReport(Measured{Results: []Result{{Server: "127.0.0.1:2379", Clients: 4, Conns: 2, PutsPerSec: 10}}})
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(b.String(), "chute/no-op") || strings.Contains(b.String(), "errors:") ||
		strings.Contains(b.String(), "traced") || strings.Contains(b.String(), "spans") {
		t.Errorf("got ratio or error lines for a single clean result:\n%s", b.String())
	}
	if len(r.Targets) != 0 {
		t.Errorf("targets: got %+v, want none", r.Targets)
	}
}

// clickHouseMeasured is what the ClickHouse matrix measures: every target
// passes but 2c and 3a; 4 sits on its bound.
func clickHouseMeasured() Measured {
	rows := func(perSec float64, p99 time.Duration) *RowsResult {
		return &RowsResult{Rows: 100000, Elapsed: time.Second, RowsPerSec: perSec, P50: p99 / 2, P99: p99, P999: p99 + time.Millisecond, Inserts: 20, RowsPerInsert: 5000}
	}
	cpu := func(perRow ...float64) []NodeCPU {
		out := make([]NodeCPU, len(perRow))
		for i, p := range perRow {
			out[i] = NodeCPU{Node: fmt.Sprintf("n%d", i+1), Seconds: p / 10, MicrosPerPut: p, MicrosPerRow: p}
		}
		return out
	}
	proc := func(name string, perRow float64) *NodeCPU {
		return &NodeCPU{Node: name, Seconds: perRow / 10, MicrosPerPut: perRow, MicrosPerRow: perRow}
	}
	return Measured{
		Results: []Result{
			{Server: ServerNoop, Clients: 100, Conns: 10, Queues: 1, PutsPerSec: 20000, PeakRSS: []NodeRSS{{Node: ServerNoop, Bytes: 30 << 20}},
				CPU: cpu(40), ClientCPU: proc(procClient, 35)},
			{Server: ServerChute, Nodes: 1, Clients: 100, Conns: 10, Queues: 1, PutsPerSec: 19000, Rows: rows(18900, 800*time.Millisecond),
				CPU: cpu(42), ClickHouseCPU: proc(procClickHouse, 4), ClientCPU: proc(procClient, 30)},
			{Server: ServerNoop, Clients: 100, Conns: 10, Queues: 1, Txn: 128, PutsPerSec: 300000, CPU: cpu(2)},
			{Server: ServerChute, Nodes: 1, Clients: 100, Conns: 10, Queues: 1, Txn: 128, PutsPerSec: 280000, Rows: rows(270000, 200*time.Millisecond),
				CPU: cpu(3), ClickHouseCPU: proc(procClickHouse, 2.4), ClientCPU: proc(procClient, 1.5)},
			{Server: ServerChute3, Nodes: 3, Clients: 100, Conns: 10, Queues: 1, PutsPerSec: 14000, Rows: rows(13800, 90*time.Millisecond),
				PeakRSS: []NodeRSS{{Node: "bench-1", Bytes: 60 << 20}, {Node: "bench-2", Bytes: 50 << 20}, {Node: "bench-3", Bytes: 51 << 20}},
				CPU:     cpu(40, 20, 20), ClickHouseCPU: proc(procClickHouse, 5)},
			{Server: ServerChute3, Nodes: 3, Clients: 100, Conns: 10, Queues: 1, Txn: 128, PutsPerSec: 150000, Rows: rows(140000, 300*time.Millisecond),
				CPU: cpu(2, 1.5, 1.5)},
			{Server: ServerNoopAtLatency, Clients: 100, Conns: 10, Queues: 1, PutsPerSec: 19000, CPU: cpu(45)},
			{Server: ServerNoopAtClusterLatency, Clients: 50, Conns: 10, Queues: 1, PutsPerSec: 9000, CPU: cpu(38)},
			{Server: ServerNoopAtClusterLatency, Clients: 50, Conns: 10, Queues: 1, Txn: 128, PutsPerSec: 200000, CPU: cpu(1.75)},
		},
		Raw: &RawResult{Rows: 1000000, Inserts: 200, BatchRows: 5000, BatchBytes: 1285000, Posters: 2, ValSize: 256, Elapsed: 2 * time.Second, RowsPerSec: 500000, P50: 8 * time.Millisecond, P99: 20 * time.Millisecond},
		Floors: []RawResult{
			{Rows: 390000, Inserts: 13, BatchRows: 30000, BatchBytes: 7710000, Posters: 2, ValSize: 256, Elapsed: 20 * time.Second, RowsPerSec: 19500, Rate: 18900,
				P50: 30 * time.Millisecond, P99: 40 * time.Millisecond, ClickHouseCPU: proc(procClickHouse, 2), ClientCPU: proc(procClient, 0.3),
				Runs: 3, MinClickHouseMicrosPerRow: 1.9, MaxClickHouseMicrosPerRow: 2.2},
			{Rows: 5400000, Inserts: 180, BatchRows: 30000, BatchBytes: 7710000, Posters: 2, ValSize: 256, Elapsed: 20 * time.Second, RowsPerSec: 270000, Rate: 270000,
				Txn: 128, P50: 30 * time.Millisecond, P99: 50 * time.Millisecond, ClickHouseCPU: proc(procClickHouse, 1.6)},
		},
		CountCost: &CountCost{Period: 50 * time.Millisecond, Counts: 100, MillisPerSec: 30},
		Memory:    &MemoryResult{Rows: 100000, ValSize: 256, KeySize: 16, HeapBytes: 44200000, HeapPerRow: 442, OverheadPerRow: 186, RSSBytes: 33600000, RSSPerRow: 336, GOGC: 100},
	}
}

func TestNewReport_targets(t *testing.T) {
	rep := NewReport(clickHouseMeasured())
	want := []struct {
		id    string
		value float64
		pass  bool
	}{
		{"1a", 4.0 / 2, true}, {"1b", 800, true}, {"1c", 42.0 / 40, true},
		{"2a", 0, true}, {"2b", 3.0 / 2, true}, {"2c", 2.4 / 1.6, false},
		{"3a", 5.0 / 3, false}, {"3b", 80.0 / 42, true}, {"4", 64, true},
	}
	if len(rep.Targets) != len(want) {
		t.Fatalf("targets: got %+v, want %d", rep.Targets, len(want))
	}
	for i, w := range want {
		g := rep.Targets[i]
		if g.ID != w.id || g.Pass != w.pass || g.Value < w.value-1e-9 || g.Value > w.value+1e-9 {
			t.Errorf("target %d: got %s %.4f pass %v, want %s %.4f pass %v", i, g.ID, g.Value, g.Pass, w.id, w.value, w.pass)
		}
	}
	if got := rep.Targets[8].Got; got != "value + key + 64 B" {
		t.Errorf("target 4: got %q, want value + key + 64 B", got)
	}
	if got := rep.Targets[1].Got; got != "800 ms" {
		t.Errorf("target 1b: got %q, want 800 ms", got)
	}
	if got := rep.Targets[0].Want; got != "≤ 2.50" {
		t.Errorf("target 1a: want %q, want ≤ 2.50", got)
	}
	if len(rep.Ratios) != 2 || rep.Ratios[1].Txn != 128 || rep.Ratios[1].ChutePerNoop != 280000.0/300000 {
		t.Errorf("ratios: got %+v, want unary and txn 128", rep.Ratios)
	}
}

func TestEvaluateTargets_boundaries(t *testing.T) {
	m := clickHouseMeasured()
	m.Results[1].Rows.P99 = targetPutToRowP99 // on the bound
	m.Results[1].ClickHouseCPU.MicrosPerRow = 2 * targetUnaryCHPerFloor
	m.Memory.RSSPerRow = 256 + 16 + 65 // one byte over
	m.Results[3].Errors, m.Results[3].FirstError = 1, "etcdserver: too many requests"
	got := map[string]bool{}
	for _, tg := range evaluateTargets(m.Results, m.Floors, m.Memory) {
		got[tg.ID] = tg.Pass
	}
	if !got["1a"] || !got["1b"] || got["4"] || got["2a"] {
		t.Errorf("boundaries: got 1a %v, 1b %v, 4 %v, 2a %v; want pass, pass, fail, fail", got["1a"], got["1b"], got["4"], got["2a"])
	}
	if ts := evaluateTargets(m.Results[:2], nil, nil); len(ts) != 2 || ts[0].ID != "1b" || ts[1].ID != "1c" {
		t.Errorf("one node unary only, no floors: got %+v, want 1b and 1c", ts)
	}
	// A ClickHouse not metered leaves its targets out.
	m.Results[3].ClickHouseCPU = nil
	for _, tg := range evaluateTargets(m.Results, m.Floors, nil) {
		if tg.ID == "2c" {
			t.Errorf("without ClickHouse's figures: got target %+v", tg)
		}
	}
}

// TestEvaluateTargets_refusedOverRuns counts a refusal in any run of a
// repeated cell, not only in the median one.
func TestEvaluateTargets_refusedOverRuns(t *testing.T) {
	m := clickHouseMeasured()
	m.Results[3].Spread = &Spread{Runs: 3, Errors: 128}
	for _, tg := range evaluateTargets(m.Results, m.Floors, nil) {
		if tg.ID == "2a" && (tg.Pass || tg.Value != 128 || !strings.Contains(tg.Measured, "3 runs")) {
			t.Errorf("target 2a: got %+v, want 128 refused over 3 runs, failed", tg)
		}
	}
}

func TestReport_WriteMarkdown_clickHouse(t *testing.T) {
	var b bytes.Buffer
	if err := NewReport(clickHouseMeasured()).WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"| chute, 3 nodes | put | 100 | 10 | 1 | 14000 | 0.000 | 0.000 | 0.000 | 60 / 50 / 51 | 40.0 / 20.0 / 20.0 |",
		"chute/no-op puts/s: 100 clients 0.95 (95%), 100 clients txn 128 0.93 (93%)",
		"\nCPU per row against the floors:\n\n" +
			"| path | chute µs/row | before | ClickHouse µs/row | before | client µs/row | rows per insert | no-op µs/put | no-op at chute's latency µs/put | ClickHouse floor µs/row | floor rows per insert |\n" +
			"|------|-------------:|-------:|------------------:|-------:|--------------:|----------------:|-------------:|--------------------------------:|------------------------:|----------------------:|\n" +
			"| unary, 1 node | 42.00 | 39 | 4.00 | 14 | 30.00 | 5000 | 40.00 | 45.00 | 2.00 | 30000 |\n" +
			"| txn-128, 1 node | 3.00 | 4.9 | 2.40 | 3.4 | 1.50 | 5000 | 2.00 | - | 1.60 | 30000 |\n" +
			"| txn-128, 3 nodes | 2.00 + 1.50 + 1.50 = 5.00 | 8.5 | - | 3.7 | - | 5000 | 2.00 | 1.75 | 1.60 | 30000 |\n" +
			"| unary, 3 nodes | 40.00 + 20.00 + 20.00 = 80.00 | 99 | 5.00 | 23 | - | 5000 | 40.00 | 38.00 | 2.00 | 30000 |\n",
		"| # | calls | 1 node + no-op at 3 nodes' latency µs/row | 3 nodes ÷ that |\n" +
			"|---|-------|------------------------------------------:|---------------:|\n" +
			"| 3a | txn 128 | 3.00 + 1.75 = 4.75 | 1.05 |\n" +
			"| 3b | put | 42.00 + 38.00 = 80.00 | 1.00 |\n",
		"\nCPU per row of each process:\n\n| server | calls | rows | rows per insert | chute µs/row | ClickHouse µs/row | client µs/row |\n",
		"| no-op | put | - | - | 40.00 | - | 35.00 |\n",
		"| chute | txn 128 | 100000 | 5000 | 3.00 | 2.40 | 1.50 |\n",
		"\nRows into ClickHouse:\n\n| server | calls | puts/s | rows | rows/s | rows per insert | put-to-row p50 ms | p99 ms | p99.9 ms |",
		"| chute | txn 128 | 280000 | 100000 | 270000 | 5000 | 100.0 | 200.0 | 201.0 |",
		"\nClickHouse floors, the same rows inserted straight:\n\n",
		"| put | 3 | 30000 | 13 | 390000 | 18900 | 19500 | 30.0 | 40.0 | 2.00 | 1.90–2.20 | 1.59 | 0.30 |\n",
		"| txn 128 | 1 | 30000 | 180 | 5400000 | 270000 | 270000 | 30.0 | 50.0 | 1.60 | - | 0.11 | - |\n",
		"\nCounting an empty table's rows every 50ms (100 counts) and nothing else cost\nClickHouse 30.0 ms of CPU per second:",
		"\nRaw JSONEachRow inserts, the ceiling of the sink:\n\n",
		"| 2 | 5000 | 1285000 | 200 | 1000000 | 500000 | 8.0 | 20.0 | - | - |",
		"| 1 | 100000 | 256 | 16 | 336 B | - | 64 B | 442 B | 186 B | 100 |",
		"| 2c | and ClickHouse µs/row ≤ 1.3× its floor | ClickHouse 2.40 µs/row at 270000 rows/s (5000 rows per insert) ÷ floor 1.60 µs/row (30000 rows per insert) | 1.50 | ≤ 1.30 | **fail** |",
		"| 3a | three nodes, producers on the two that do not dispatch, txn-128: µs/row of the three ≤ 1.4× one node's | 3 nodes 2.00 + 1.50 + 1.50 = 5.00 µs/row ÷ 1 node 3.00 µs/row | 1.67 | ≤ 1.40 | **fail** |",
		"| 4 | RSS growth per queued row ≤ value + key + 64 B, ClickHouse unreachable | 336 B per row of a 256-byte value and a 16-byte key, 100000 rows (live heap 442 B per row) | value + key + 64 B | ≤ value + key + 64 B | pass |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

func TestReport_WriteDoc(t *testing.T) {
	rep := NewReport(clickHouseMeasured())
	rep.Machine = &Machine{CPUs: 2, CPUModel: "AMD EPYC", MemoryBytes: 24 << 30, OS: "linux", Arch: "amd64", Kernel: "6.1",
		GoVersion: "go1.26.8", ClickHouse: "18.16.1", Commit: "abc123", Modified: true, LoadAvg: "0.5 0.4 0.3", LoadAvgEnd: "2.5 1.4 0.9",
		Started: time.Date(2026, 11, 30, 9, 45, 0, 0, time.UTC)}
	rep.Command = "chute-bench --matrix --clickhouse-url http://127.0.0.1:18124"
	var b bytes.Buffer
	cfg := DefaultConfig()
	cfg.Duration = 20 * time.Second
	if err := rep.WriteDoc(&b, docSettings{cfg: cfg, matrix: true, clickhouse: true, rawPosters: 2}); err != nil {
		t.Fatalf("WriteDoc: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"# Benchmarks\n",
		"| CPUs | 2 × AMD EPYC |\n| memory | 24.0 GiB |\n| OS | linux/amd64, kernel 6.1 |\n| Go | go1.26.8 |\n| ClickHouse | 18.16.1 |\n" +
			"| chute built from | abc123 with local changes |\n| started | 2026-11-30 09:45 UTC |\n| load average at start | 0.5 0.4 0.3 |\n| load average at the end | 2.5 1.4 0.9 |\n",
		"## Command\n\n```\nchute-bench --matrix --clickhouse-url http://127.0.0.1:18124\n```\n",
		"## Targets\n\nCPU per row of each process, each a ratio to a floor measured in the\nsame bench, and the latency, refusals and memory of a queued row.\n\n| # | target |",
		"| 3b | put | 42.00 + 38.00 = 80.00 | 1.00 |\n\n## Puts\n\n| server |",
		"## Rows into ClickHouse\n\n",
		"## CPU per row against the floors\n\n",
		"## CPU per row of each process\n\n",
		"## ClickHouse floors\n\n",
		"## Ceiling of the sink: raw JSONEachRow inserts\n\n",
		"## Memory of a queued row\n\n",
		"## How it was measured\n\n",
		"100 concurrent\nputters share 10 client connections",
		"1000 unmeasured warmup puts, then\n20s or 100000 puts, whichever comes first",
		"A put refused\n(`too many requests`",
		"every 50ms (every 10ms in a run paced for its latency) from the start",
		"rounds of the same txn-128",
		"by 2 concurrent posters",
		"Targets 1 to 3 read the node that fsyncs",
		"`--clickhouse-pid` names",
		"in batches of 30000\nrows by 2 posters, paced at that run's rows/s",
		"table's rows every 50ms while it posts",
		"driven by half the clients, those of one forwarding node",
		"plus 64 bytes; the key is the message key, the 16 bytes after",
		"a loopback port\nnothing listens on",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("document lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--trace") {
		t.Errorf("document of an untraced matrix explains --trace")
	}
	if strings.Index(out, "## Targets") > strings.Index(out, "## Puts") {
		t.Errorf("document: the targets come after the tables")
	}
}

func TestReport_WriteJSON_roundTrip(t *testing.T) {
	want := NewReport(Measured{Results: tracedResults()})
	var b bytes.Buffer
	if err := want.WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("Unmarshal: %v\n%s", err, b.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	if len(got.Ratios) != 2 || got.Ratios[1].Clients != 100 || got.Ratios[1].ChutePerNoop != 0.9 {
		t.Errorf("ratios: got %+v, want 1 -> 0.5 and 100 -> 0.9", got.Ratios)
	}
	if len(got.Tracing) != 2 || got.Tracing[1].Clients != 100 || got.Tracing[1].TracedPerUntraced != 0.8 {
		t.Errorf("tracing: got %+v, want 1 -> 0.8 and 100 -> 0.8", got.Tracing)
	}
	if s := b.String(); !strings.Contains(s, `"trace": {`) || !strings.Contains(s, `"spans": 90000`) || !strings.Contains(s, `"traced_per_untraced": 0.8`) {
		t.Errorf("JSON lacks the trace fields:\n%s", s)
	}
	if n := strings.Count(b.String(), `"trace"`); n != 2 {
		t.Errorf("JSON: got %d trace objects, want 2 (untraced runs have none)", n)
	}
}

func TestReport_WriteJSON_clickHouse(t *testing.T) {
	want := NewReport(clickHouseMeasured())
	want.Machine = &Machine{CPUs: 2, GoVersion: "go1.26.8", Started: time.Date(2026, 11, 30, 9, 45, 0, 0, time.UTC)}
	var b bytes.Buffer
	if err := want.WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	for _, field := range []string{`"p999_ns"`, `"rows_per_sec"`, `"rows_per_insert"`, `"peak_rss"`, `"txn": 128`, `"clickhouse_floors"`, `"cpu_us_per_row": 2.4`,
		`"raw_insert"`, `"batch_rows": 5000`, `"memory"`, `"rss_per_row": 336`, `"targets"`, `"pass": false`, `"machine"`, `"queues": 1`} {
		if !strings.Contains(b.String(), field) {
			t.Errorf("JSON lacks %s", field)
		}
	}
}

// noFsyncMeasured is clickHouseMeasured with the one-node cells' queue logs
// and the same cells on a node started with --unsafe-no-fsync: the unary
// target passes, the txn one fails.
func noFsyncMeasured() Measured {
	m := clickHouseMeasured()
	rows := func(perSec float64) *RowsResult {
		return &RowsResult{Rows: 100000, Elapsed: time.Second, RowsPerSec: perSec, Inserts: 20, RowsPerInsert: 5000}
	}
	m.Results[1].QueueLog = &QueueLogCount{Fsyncs: 12000, Records: 380000, FsyncsPerSec: 600, RecordsPerFsync: 380000.0 / 12000}
	m.Results[3].QueueLog = &QueueLogCount{Fsyncs: 5000, Records: 5600000, FsyncsPerSec: 250, RecordsPerFsync: 1120}
	unary := Result{Server: ServerChuteNoFsync, Nodes: 1, Clients: 100, Conns: 10, Queues: 1, PutsPerSec: 25000, Rows: rows(24900),
		QueueLog: &QueueLogCount{Records: 500000}, CPU: []NodeCPU{{Node: "bench-nofsync", MicrosPerPut: 40, MicrosPerRow: 40}}}
	txn := Result{Server: ServerChuteNoFsync, Nodes: 1, Clients: 100, Conns: 10, Queues: 1, Txn: 128, PutsPerSec: 350000, Rows: rows(340000),
		QueueLog: &QueueLogCount{Records: 7000000}, CPU: []NodeCPU{{Node: "bench-nofsync", MicrosPerPut: 2.5, MicrosPerRow: 2.5}}}
	rs := m.Results
	m.Results = append([]Result{rs[0], rs[1], unary, rs[2], rs[3], txn}, rs[4:]...)
	return m
}

func TestNewReport_fsyncTargets(t *testing.T) {
	rep := NewReport(noFsyncMeasured())
	var ids []string
	got := map[string]Target{}
	for _, tg := range rep.Targets {
		ids = append(ids, tg.ID)
		got[tg.ID] = tg
	}
	if s := strings.Join(ids, ","); s != "1a,1b,1c,2a,2b,2c,3a,3b,4,5a,5b" {
		t.Fatalf("targets: got %s, want 1a,1b,1c,2a,2b,2c,3a,3b,4,5a,5b", s)
	}
	for _, w := range []struct {
		id    string
		value float64
		pass  bool
	}{
		{"5a", 42.0 / 40, true},
		{"5b", 3.0 / 2.5, false},
	} {
		g := got[w.id]
		if g.Pass != w.pass || g.Limit != targetFsyncPerNoFsync || g.Value < w.value-1e-9 || g.Value > w.value+1e-9 {
			t.Errorf("target %s: got %.4f (limit %v) pass %v, want %.4f (limit %v) pass %v", w.id, g.Value, g.Limit, g.Pass, w.value, targetFsyncPerNoFsync, w.pass)
		}
	}
	if ratios := rep.Ratios; len(ratios) != 2 || ratios[0].ChutePerNoop != 0.95 {
		t.Errorf("ratios: got %+v, want chute/no-op only, unaffected by the no-fsync cells", ratios)
	}
}

func TestEvaluateTargets_fsyncBoundaries(t *testing.T) {
	m := noFsyncMeasured()
	m.Results[1].CPU[0].MicrosPerRow = targetFsyncPerNoFsync * 40 // on the bound
	m.Results[4].CPU[0].MicrosPerRow = targetFsyncPerNoFsync * 2.5
	got := map[string]bool{}
	for _, tg := range evaluateTargets(m.Results, m.Floors, m.Memory) {
		got[tg.ID] = tg.Pass
	}
	if !got["5a"] || !got["5b"] {
		t.Errorf("boundaries: got 5a %v, 5b %v; want both to pass", got["5a"], got["5b"])
	}
	// Without the fsync node's cells there is nothing to compare.
	var noTwin []Result
	for _, r := range m.Results {
		if r.Server != ServerChute {
			noTwin = append(noTwin, r)
		}
	}
	for _, tg := range evaluateTargets(noTwin, nil, nil) {
		if strings.HasPrefix(tg.ID, "5") {
			t.Errorf("without the fsync cells: got target %+v", tg)
		}
	}
}

func TestReport_WriteMarkdown_queueLog(t *testing.T) {
	var b bytes.Buffer
	if err := NewReport(noFsyncMeasured()).WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"| chute, --unsafe-no-fsync | put | 100 | 10 | 1 | 25000 |",
		"\nQueue log during the measured phase:\n\n" +
			"| server | calls | puts/s | records | fsyncs | fsyncs/s | puts per fsync |\n" +
			"|--------|-------|-------:|--------:|-------:|---------:|---------------:|\n" +
			"| chute | put | 19000 | 380000 | 12000 | 600 | 31.7 |\n" +
			"| chute, --unsafe-no-fsync | put | 25000 | 500000 | 0 | 0 | - |\n" +
			"| chute | txn 128 | 280000 | 5600000 | 5000 | 250 | 1120.0 |\n" +
			"| chute, --unsafe-no-fsync | txn 128 | 350000 | 7000000 | 0 | 0 | - |\n\n",
		"| 5a | fsync on, unary, one node: chute µs/row ≤ 1.1× --unsafe-no-fsync's | fsync 42.00 µs/row (31.7 puts per fsync) ÷ no fsync 40.00 µs/row | 1.05 | ≤ 1.10 | pass |",
		"| 5b | the same, txn-128 | fsync 3.00 µs/row (1120.0 puts per fsync) ÷ no fsync 2.50 µs/row | 1.20 | ≤ 1.10 | **fail** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	var plain bytes.Buffer
	if err := NewReport(clickHouseMeasured()).WriteMarkdown(&plain); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(plain.String(), "Queue log") {
		t.Errorf("markdown without queue log figures has a queue log table:\n%s", plain.String())
	}
}

// TestReport_WriteMarkdown_rateMatchedFsync: with the no-fsync node's
// runs at the fsync node's rates, the lines beside 5a and 5b divide the
// fsync node's unary and txn µs/row by those runs'; without them, no
// line.
func TestReport_WriteMarkdown_rateMatchedFsync(t *testing.T) {
	m := noFsyncMeasured()
	m.Results[1].P50 = 6 * time.Millisecond
	m.Results[4].P50 = 40 * time.Millisecond
	if r := m.Results[4]; r.Server != ServerChute || r.Txn != 128 {
		t.Fatalf("result 4: got %s txn %d, want the chute txn cell", r.Server, r.Txn)
	}
	m.Results = append(m.Results, Result{Server: ServerChuteNoFsyncAtRate, Nodes: 1, Clients: 100, Conns: 10, Queues: 1,
		Rate: 19000, PutsPerSec: 19000, P50: 900 * time.Microsecond, Rows: &RowsResult{Rows: 100000, Elapsed: time.Second, RowsPerSec: 19000},
		CPU: []NodeCPU{{Node: "bench-nofsync", MicrosPerPut: 48, MicrosPerRow: 48}}},
		Result{Server: ServerChuteNoFsyncAtRate, Nodes: 1, Clients: 100, Conns: 10, Queues: 1, Txn: 128,
			Rate: 280000, PutsPerSec: 279000, P50: 30 * time.Millisecond, Rows: &RowsResult{Rows: 100000, Elapsed: time.Second, RowsPerSec: 270000},
			CPU: []NodeCPU{{Node: "bench-nofsync", MicrosPerPut: 2.4, MicrosPerRow: 2.4}}})
	want := "\nBeside 5a: the node without fsync paced at the puts/s the node with\n" +
		"fsync took (19000 puts/s; p50 0.900 ms against 6.000), so that both serve\n" +
		"one call rate: fsync 42.00 µs/row ÷ no fsync 48.00 µs/row = 0.88.\n" +
		"\nBeside 5b: the node without fsync paced at the puts/s of txns of 128 the node with\n" +
		"fsync took (279000 puts/s; p50 30.000 ms against 40.000), so that both serve\n" +
		"one call rate: fsync 3.00 µs/row ÷ no fsync 2.40 µs/row = 1.25.\n"
	checkReportsHold(t, m, want)
	var plain bytes.Buffer
	if err := NewReport(noFsyncMeasured()).WriteMarkdown(&plain); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(plain.String(), "Beside 5a") || strings.Contains(plain.String(), "Beside 5b") {
		t.Errorf("markdown without the paced no-fsync runs has a line beside 5a or 5b:\n%s", plain.String())
	}
}

func TestReport_WriteDoc_queueLog(t *testing.T) {
	var b bytes.Buffer
	cfg := DefaultConfig()
	if err := NewReport(noFsyncMeasured()).WriteDoc(&b, docSettings{cfg: cfg, matrix: true, clickhouse: true, rawPosters: 2, repeat: 3}); err != nil {
		t.Fatalf("WriteDoc: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"\n## Queue log\n\nWhat each node's queue log did during the measured phase.\n\n| server | calls | puts/s | records | fsyncs |",
		"| 5a | fsync on, unary, one node: chute µs/row ≤ 1.1× --unsafe-no-fsync's |",
		"a second one started with `--unsafe-no-fsync`",
		"`chute_queue_log_fsyncs_total` and\n`chute_queue_log_appended_total`",
		"The memory cell runs 3 times too, each on a fresh\nnode",
		"the unary and txn cells of one node (with fsync\nand without, and the paced ones without) and of three nodes, their\nno-op floors, the ClickHouse floors",
		"The node without fsync then runs unary and txn once more, each\npaced at the puts/s of the node with fsync",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("document lacks %q:\n%s", want, out)
		}
	}
	if q, rows := strings.Index(out, "## Queue log"), strings.Index(out, "## Rows into ClickHouse"); q < rows {
		t.Errorf("document: the queue log comes before the rows")
	}
}

func TestReport_WriteJSON_queueLog(t *testing.T) {
	want := NewReport(noFsyncMeasured())
	var b bytes.Buffer
	if err := want.WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	for _, field := range []string{`"queue_log": {`, `"fsyncs": 12000`, `"fsyncs_per_sec": 600`, `"records_per_fsync": 1120`, `"id": "5b"`} {
		if !strings.Contains(b.String(), field) {
			t.Errorf("JSON lacks %s", field)
		}
	}
}

// compressionMeasured is clickHouseMeasured with the compression cells
// after the one-node group: none, then gzip.
func compressionMeasured() Measured {
	m := clickHouseMeasured()
	cell := func(codec string, rowsPerSec, cpu float64, w WireCount) Result {
		w.Compression = codec
		return Result{Server: compressionServer(codec), Nodes: 1, Clients: 100, Conns: 10, Queues: 1, Txn: 128, PutsPerSec: rowsPerSec + 1000,
			Rows: &RowsResult{Rows: 400000, Elapsed: 2 * time.Second, RowsPerSec: rowsPerSec}, CPU: []NodeCPU{{Node: compressionServer(codec), Seconds: cpu}},
			Wire: &w}
	}
	none := cell("none", 200000, 2, WireCount{Rows: 401000, BytesSent: 110_000_000, BytesReceived: 90_000, Conns: 400,
		BytesPerRow: 274.3, NodeMicrosPerRow: 4.99, ClickHouseMicrosPerRow: 3.5})
	gzip := cell("gzip", 180000, 3, WireCount{Rows: 401000, BytesSent: 9_000_000, BytesReceived: 90_000, Conns: 400,
		BytesPerRow: 22.44, NodeMicrosPerRow: 7.48})
	rs := m.Results
	m.Results = append(append(slices.Clone(rs[:4]), none, gzip), rs[4:]...)
	return m
}

func TestReport_WriteMarkdown_compression(t *testing.T) {
	rep := NewReport(compressionMeasured())
	var b bytes.Buffer
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"| chute, --clickhouse-compression=gzip | txn 128 | 100 | 10 | 1 | 181000 |",
		"| chute, --clickhouse-compression=none | txn 128 | 201000 | 400000 | 200000 |",
		"\nCompression of the inserts, bytes counted on the wire to ClickHouse:\n\n" +
			"| --clickhouse-compression | calls | rows/s | chute CPU µs/row | ClickHouse query CPU µs/row | bytes sent/row | ÷ none | connections |\n" +
			"|--------------------------|-------|-------:|-----------------:|----------------------------:|---------------:|-------:|------------:|\n" +
			"| none | txn 128 | 200000 | 4.99 | 3.50 | 274.3 | 1.000 | 400 |\n" +
			"| gzip | txn 128 | 180000 | 7.48 | - | 22.4 | 0.082 | 400 |\n\n" +
			"Raw JSONEachRow inserts",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	// The compression cells are none of the cells the targets and the
	// ratios compare.
	plain := NewReport(clickHouseMeasured())
	if !reflect.DeepEqual(rep.Targets, plain.Targets) || !reflect.DeepEqual(rep.Ratios, plain.Ratios) {
		t.Errorf("targets and ratios: got %+v and %+v, want those without the compression cells", rep.Targets, rep.Ratios)
	}
	var without bytes.Buffer
	if err := plain.WriteMarkdown(&without); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(without.String(), "Compression") {
		t.Errorf("markdown without wire counts has a compression table:\n%s", without.String())
	}
}

// TestReport_WriteMarkdown_compressionWithoutNone leaves the ratio out
// when no cell ran without compression.
func TestReport_WriteMarkdown_compressionWithoutNone(t *testing.T) {
	m := compressionMeasured()
	m.Results = slices.DeleteFunc(m.Results, func(r Result) bool { return r.Wire != nil && r.Wire.Compression == "none" })
	var b bytes.Buffer
	if err := NewReport(m).WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if want := "| gzip | txn 128 | 180000 | 7.48 | - | 22.4 | - | 400 |\n"; !strings.Contains(b.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, b.String())
	}
}

func TestReport_WriteDoc_compression(t *testing.T) {
	var b bytes.Buffer
	s := docSettings{cfg: DefaultConfig(), matrix: true, clickhouse: true, rawPosters: 2, compression: []string{"none", "gzip"}}
	if err := NewReport(compressionMeasured()).WriteDoc(&b, s); err != nil {
		t.Fatalf("WriteDoc: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"\n## Compression of the inserts\n\n",
		"| none | txn 128 | 200000 | 4.99 | 3.50 | 274.3 | 1.000 | 400 |",
		"Compression: one chute node per value of `--clickhouse-compression`\n(none, gzip)",
		"as the one-node txn-128 cell",
		"request lines, headers and bodies as sent",
		"which the process's CPU in the tables of CPU per row holds",
		"read the bytes saved as an\nupper bound",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("document lacks %q:\n%s", want, out)
		}
	}
	if c, raw := strings.Index(out, "## Compression"), strings.Index(out, "## Ceiling of the sink"); c < 0 || c > raw {
		t.Errorf("document: the compression table is not before the sink's ceiling")
	}
	var plain bytes.Buffer
	s.compression = nil
	if err := NewReport(clickHouseMeasured()).WriteDoc(&plain, s); err != nil {
		t.Fatalf("WriteDoc: %v", err)
	}
	if strings.Contains(plain.String(), "Compression") {
		t.Errorf("document without compression cells explains them:\n%s", plain.String())
	}
}

func TestReport_WriteJSON_compression(t *testing.T) {
	want := NewReport(compressionMeasured())
	var b bytes.Buffer
	if err := want.WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	for _, field := range []string{`"wire": {`, `"compression": "gzip"`, `"bytes_sent": 110000000`, `"bytes_per_row": 22.44`,
		`"node_cpu_us_per_row": 7.48`, `"clickhouse_cpu_us_per_row": 3.5`} {
		if !strings.Contains(b.String(), field) {
			t.Errorf("JSON lacks %s", field)
		}
	}
	if n := strings.Count(b.String(), `"wire"`); n != 2 {
		t.Errorf("JSON: got %d wire objects, want 2", n)
	}
}

func TestCountCost_perRowAt(t *testing.T) {
	c := CountCost{MillisPerSec: 30}
	if got := c.perRowAt(15000); got != 2 {
		t.Errorf("perRowAt(15000): got %v, want 2 µs/row", got)
	}
	if got := c.perRowAt(0); got != 0 {
		t.Errorf("perRowAt(0): got %v, want 0", got)
	}
}

func TestValueKeyPlus(t *testing.T) {
	for over, want := range map[float64]string{64: "value + key + 64 B", -70: "value + key − 70 B", -0.2: "value + key + 0 B"} {
		if got := valueKeyPlus(over); got != want {
			t.Errorf("valueKeyPlus(%v): got %q, want %q", over, got, want)
		}
	}
}

// TestEvaluateTargets_zeroCPUKeepsTheTarget checks that a floor whose CPU
// time read zero (a run shorter than the clock's tick) leaves its target
// in the report, unmeasured and not passed, rather than dropping it.
func TestEvaluateTargets_zeroCPUKeepsTheTarget(t *testing.T) {
	m := clickHouseMeasured()
	m.Results[2].CPU[0].MicrosPerPut = 0 // the no-op server's txn run
	var got *Target
	ts := evaluateTargets(m.Results, m.Floors, m.Memory)
	for i := range ts {
		if ts[i].ID == "2b" {
			got = &ts[i]
		}
	}
	if got == nil {
		t.Fatalf("targets %+v: no 2b, want it unmeasured", ts)
	}
	if got.Pass || got.Got != "-" || !strings.Contains(got.Measured, "CPU time of zero") {
		t.Errorf("2b: got pass %v, got %q, measured %q; want not passed, \"-\", saying the CPU time was zero", got.Pass, got.Got, got.Measured)
	}
}

// TestReport_WriteMarkdown_latencyMatchedNoop: with the no-op run at
// chute's latency, the lines beside 1c and 2b divide one node's unary
// and txn µs/put by those runs'; without them, no line.
func TestReport_WriteMarkdown_latencyMatchedNoop(t *testing.T) {
	m := clickHouseMeasured()
	m.Results[1].P50 = 5 * time.Millisecond
	m.Results[3].P50 = 40 * time.Millisecond
	if r := m.Results[6]; r.Server != ServerNoopAtLatency || r.Txn != 0 {
		t.Fatalf("result 6: got %s txn %d, want the unary no-op at chute's latency", r.Server, r.Txn)
	}
	m.Results[6].P50 = 5100 * time.Microsecond
	m.Results = append(m.Results, Result{Server: ServerNoopAtLatency, Clients: 100, Conns: 10, Queues: 1, Txn: 128,
		PutsPerSec: 270000, P50: 39 * time.Millisecond, CPU: []NodeCPU{{Node: "noop", MicrosPerPut: 2.5, MicrosPerRow: 2.5}}})
	want := "\nBeside 1c and 2b: the no-op server answering at once serves more\n" +
		"calls a second in the bench's closed loop, and its gRPC stack spends\n" +
		"less on each. Held to chute's median latency, driven by the same\n" +
		"clients, it serves about chute's call rate; chute's µs/put over that:\n\n" +
		"| # | calls | puts/s, chute / no-op | p50 ms, chute / no-op | µs/put, chute ÷ no-op | ratio |\n" +
		"|---|-------|----------------------:|----------------------:|----------------------:|------:|\n" +
		"| 1c | put | 19000 / 19000 | 5.000 / 5.100 | 42.00 ÷ 45.00 | 0.93 |\n" +
		"| 2b | txn 128 | 280000 / 270000 | 40.000 / 39.000 | 3.00 ÷ 2.50 | 1.20 |\n"
	checkReportsHold(t, m, want)
	m.Results = slices.DeleteFunc(m.Results, func(r Result) bool { return r.Server == ServerNoopAtLatency })
	var plain bytes.Buffer
	if err := NewReport(m).WriteMarkdown(&plain); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(plain.String(), "Beside 1c") {
		t.Errorf("markdown without the no-op at chute's latency has a line beside 1c and 2b:\n%s", plain.String())
	}
}

// checkReportsHold fails unless the markdown and the doc of m both hold
// want.
func checkReportsHold(t *testing.T, m Measured, want string) {
	t.Helper()
	var md, doc bytes.Buffer
	if err := NewReport(m).WriteMarkdown(&md); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if err := NewReport(m).WriteDoc(&doc, docSettings{}); err != nil {
		t.Fatalf("WriteDoc: %v", err)
	}
	for name, out := range map[string]string{"markdown": md.String(), "doc": doc.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", name, want, out)
		}
	}
}
