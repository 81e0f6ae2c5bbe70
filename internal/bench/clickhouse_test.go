//go:build e2e

package bench

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"chute/dispatch"
	"chute/internal/chtest"
	"chute/kv"
)

// TestWithClickHouse runs everything that needs a real ClickHouse against
// one server, started once: a run's rows into it through a real in-process
// node, the raw inserts, and the ClickHouse matrix with fake children.
func TestWithClickHouse(t *testing.T) {
	ch := chtest.Start(t)
	t.Run("Run_rowsLand", func(t *testing.T) { testRunRowsLand(t, ch) })
	t.Run("Run_rowsMissing", func(t *testing.T) { testRunRowsMissing(t, ch) })
	t.Run("chCounts", func(t *testing.T) { testChCounts(t, ch) })
	t.Run("runRawInsert", func(t *testing.T) { testRunRawInsert(t, ch) })
	t.Run("runRawInsert_capped", func(t *testing.T) { testRunRawInsertCapped(t, ch) })
	t.Run("runRawInsert_paced", func(t *testing.T) { testRunRawInsertPaced(t, ch) })
	t.Run("runMatrix", func(t *testing.T) { testRunMatrixClickHouse(t, ch) })
}

// startNode starts an in-process chute node (kv and dispatch) inserting
// into ch, stopped when the test ends, and returns its client address.
func startNode(t *testing.T, ch *chtest.Server) string {
	t.Helper()
	mgr, err := dispatch.New(dispatch.Config{MemberID: 1, ClickHouse: func() (string, string) { return ch.URL(), "default" }})
	if err != nil {
		t.Fatal(err)
	}
	kcfg := kv.DefaultConfig()
	kcfg.MemberID = 1
	kcfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	kcfg.Queues = mgr
	srv, err := kv.New(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	mgr.Start(srv, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = mgr.Shutdown(ctx)
	})
	return srv.ClientAddrs()[0].String()
}

// benchTables counts the tables of run id left in ch.
func benchTables(t *testing.T, ch *chtest.Server, id string) string {
	t.Helper()
	return strings.TrimSpace(ch.Query(t, "SELECT count() FROM system.tables WHERE database = 'default' AND name LIKE 'bench_"+id+"%'"))
}

// testRunRowsLand puts rows through a real node, unary and in txns over
// two queues claimed first: every row must be counted, the figures must be
// positive and ordered, and the tables dropped.
func testRunRowsLand(t *testing.T, ch *chtest.Server) {
	addr := startNode(t, ch)
	for _, txn := range []int{0, 50} {
		cfg := smallConfig(addr)
		cfg.Puts, cfg.Warmup, cfg.Txn = 1000, 100, txn
		id := newRunID()
		cfg.Tables = runTables(id, 2)
		cfg.ClickHouseURL = ch.URL()
		cfg.Claim = addr
		cfg.LandTimeout = 30 * time.Second
		r, err := Run(testContext(t), cfg)
		if err != nil {
			t.Fatalf("txn %d: Run: %v", txn, err)
		}
		if r.Puts != 1000 || r.Errors != 0 || r.Queues != 2 || r.Rows == nil {
			t.Fatalf("txn %d: got %d puts, %d errors, %d queues, rows %+v; want 1000, 0, 2, rows", txn, r.Puts, r.Errors, r.Queues, r.Rows)
		}
		rw := r.Rows
		if rw.Rows != 1000 {
			t.Errorf("txn %d: rows: got %d, want 1000 (the warmup's and the claims' are not the measured phase's)", txn, rw.Rows)
		}
		if rw.RowsPerSec <= 0 || rw.Elapsed <= 0 || rw.P50 <= 0 || rw.P99 < rw.P50 || rw.P999 < rw.P99 {
			t.Errorf("txn %d: rows result: got %+v, want positive rates and ordered latencies", txn, *rw)
		}
		if rw.Inserts < 1 || rw.RowsPerInsert <= 0 {
			t.Errorf("txn %d: inserts: got %d of %.1f rows, want some", txn, rw.Inserts, rw.RowsPerInsert)
		}
		if r.P999 < r.P99 || r.P99 < r.P50 {
			t.Errorf("txn %d: put latencies: got p50 %v p99 %v p99.9 %v, want ordered", txn, r.P50, r.P99, r.P999)
		}
		if n := benchTables(t, ch, id); n != "0" {
			t.Errorf("txn %d: tables left after the run: got %s, want 0", txn, n)
		}
	}
}

// testRunRowsMissing runs against the no-op server, which inserts nothing:
// the run must fail once the land timeout has passed.
func testRunRowsMissing(t *testing.T, ch *chtest.Server) {
	cfg := smallConfig(startNoop(t))
	cfg.Puts, cfg.Warmup = 100, 0
	cfg.Tables = runTables(newRunID(), 1)
	cfg.ClickHouseURL = ch.URL()
	cfg.LandTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := Run(testContext(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "only 0 of 100 rows reached ClickHouse") {
		t.Fatalf("Run: got %v, want rows missing", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v, want about the land timeout", d)
	}
}

func testChCounts(t *testing.T, ch *chtest.Server) {
	ctx := testContext(t)
	tables := runTables(newRunID(), 3)
	for _, tb := range tables {
		if err := createTable(ctx, ch.URL(), tb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dropTable(context.Background(), ch.URL(), tb) })
	}
	ch.Exec(t, "INSERT INTO default."+tables[2]+" VALUES (1, 'a'), (2, 'b')")
	got, err := chCounts(ctx, ch.URL(), tables)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 0, 2}; !equalInts(got, want) {
		t.Errorf("chCounts: got %v, want %v", got, want)
	}
	// Every table with parts, one with several and then merged: the
	// counts stay exact, and no mark of the tables is read for them.
	ch.Exec(t, "INSERT INTO default."+tables[1]+" VALUES (1, 'a')")
	ch.Exec(t, "INSERT INTO default."+tables[2]+" VALUES (3, 'c')")
	for _, optimize := range []bool{false, true} {
		if optimize {
			ch.Exec(t, "OPTIMIZE TABLE default."+tables[2]+" FINAL")
		}
		marks := chEvent(t, ch, "SelectedMarks")
		got, err := chCounts(ctx, ch.URL(), tables)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{0, 1, 3}; !equalInts(got, want) {
			t.Errorf("chCounts, merged %v: got %v, want %v", optimize, got, want)
		}
		if d := chEvent(t, ch, "SelectedMarks") - marks; d != 0 {
			t.Errorf("chCounts, merged %v: read %d marks of the tables, want 0", optimize, d)
		}
	}
	before, err := chInsertEvents(ctx, ch.URL())
	if err != nil {
		t.Fatal(err)
	}
	ch.Exec(t, "INSERT INTO default."+tables[0]+" VALUES (1, 'a'), (2, 'b'), (3, 'c')")
	after, err := chInsertEvents(ctx, ch.URL())
	if err != nil {
		t.Fatal(err)
	}
	if after.queries-before.queries != 1 || after.rows-before.rows != 3 {
		t.Errorf("insert events: got %+v then %+v, want one more query of 3 rows", before, after)
	}
	if _, err := chCounts(ctx, ch.URL(), []string{"nope_" + newRunID()}); err == nil {
		t.Errorf("chCounts of a missing table: got nil error")
	}
}

// chEvent returns ClickHouse's system.events count of event, zero when
// not yet counted.
func chEvent(t *testing.T, ch *chtest.Server, event string) int64 {
	t.Helper()
	out, err := chQuery(testContext(t), ch.URL(), "SELECT sum(value) FROM system.events WHERE event = '"+event+"'")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("system.events %s: got %q, want a number", event, out)
	}
	return n
}

// checkWire checks the compression cells' wire counts: only they have
// one; every row of the run went through the proxy, each uncompressed
// row whole with its newline; gzip sent fewer bytes, and ClickHouse
// counted its query threads' CPU.
func checkWire(t *testing.T, mc matrixConfig, results []Result) {
	t.Helper()
	wires := map[string]*WireCount{}
	for _, r := range results {
		if r.Wire != nil {
			wires[r.Server] = r.Wire
		}
	}
	none, gzip := wires[compressionServer("none")], wires[compressionServer("gzip")]
	if len(wires) != 2 || none == nil || gzip == nil {
		t.Fatalf("wire counts: got %v, want those of the two compression cells", wires)
	}
	t.Logf("wire of the fake nodes: none %+v, gzip %+v", *none, *gzip)
	rows := int64(mc.base.Puts + mc.base.Warmup)
	for _, w := range []*WireCount{none, gzip} {
		if w.Rows != rows || w.Conns < 1 || w.BytesReceived <= 0 || w.NodeMicrosPerRow < 0 || w.ClickHouseMicrosPerRow < 0 {
			t.Errorf("%s: got %+v, want %d rows, connections, answers and CPU", w.Compression, *w, rows)
		}
	}
	// CPU is read in ticks of the clock (10 ms): a fake node that sends
	// 420 rows uncompressed may read zero, the two cells together not.
	if none.NodeMicrosPerRow+gzip.NodeMicrosPerRow <= 0 || none.ClickHouseMicrosPerRow+gzip.ClickHouseMicrosPerRow <= 0 {
		t.Errorf("CPU of the two cells: nodes %v and %v, ClickHouse %v and %v µs/row; want some of each",
			none.NodeMicrosPerRow, gzip.NodeMicrosPerRow, none.ClickHouseMicrosPerRow, gzip.ClickHouseMicrosPerRow)
	}
	if body := rows * int64(mc.base.ValSize+1); none.BytesSent < body {
		t.Errorf("none: got %d bytes sent, want at least the %d of the rows", none.BytesSent, body)
	}
	if gzip.BytesPerRow >= none.BytesPerRow/2 {
		t.Errorf("gzip: got %.1f bytes per row, want under half of none's %.1f", gzip.BytesPerRow, none.BytesPerRow)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testRunRawInsert(t *testing.T, ch *chtest.Server) {
	r, err := runRawInsert(testContext(t), rawInsert{url: ch.URL(), rows: 5000, posters: 2, batchRows: 1000, valSize: 256})
	if err != nil {
		t.Fatalf("runRawInsert: %v", err)
	}
	if r.Rows != 5000 || r.Inserts != 5 || r.BatchRows != 1000 || r.Posters != 2 {
		t.Errorf("result: got %d rows in %d inserts of %d by %d posters, want 5000 in 5 of 1000 by 2", r.Rows, r.Inserts, r.BatchRows, r.Posters)
	}
	if r.BatchBytes != 1000*257 {
		t.Errorf("batch bytes: got %d, want %d (rows of 256 bytes and a newline)", r.BatchBytes, 1000*257)
	}
	if r.RowsPerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 {
		t.Errorf("result: got %+v, want a positive rate and ordered latencies", r)
	}
}

// testRunRawInsertCapped asks for batches over chute's 8 MiB cap.
func testRunRawInsertCapped(t *testing.T, ch *chtest.Server) {
	r, err := runRawInsert(testContext(t), rawInsert{url: ch.URL(), rows: 3000, posters: 1, batchRows: 1_000_000, valSize: 4096})
	if err != nil {
		t.Fatalf("runRawInsert: %v", err)
	}
	if want := rawMaxBatchBytes / 4097; r.BatchRows != want || r.Inserts != 2 || r.Rows != 2*int64(want) {
		t.Errorf("result: got %d inserts of %d rows (%d in all), want 2 of %d", r.Inserts, r.BatchRows, r.Rows, want)
	}
	if r.BatchBytes > rawMaxBatchBytes {
		t.Errorf("batch bytes: got %d, want at most %d", r.BatchBytes, rawMaxBatchBytes)
	}
}

// testRunRawInsertPaced paces three inserts 100 ms apart, lasting the
// 300 ms the rows take at that rate, and counts the rows every 10 ms
// meanwhile, metering ClickHouse found by its port.
func testRunRawInsertPaced(t *testing.T, ch *chtest.Server) {
	ctx := testContext(t)
	selects := func() int64 {
		out, err := chQuery(ctx, ch.URL(), "SELECT value FROM system.events WHERE event = 'SelectQuery'")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		return n
	}
	pid, err := clickHousePID(0, ch.URL())
	if err != nil {
		t.Fatalf("clickHousePID: %v", err)
	}
	before := selects()
	r, err := meterRaw(ctx, rawInsert{url: ch.URL(), rows: 3000, posters: 2, batchRows: 1000, valSize: 256, rate: 10000, poll: 10 * time.Millisecond}, pid)
	if err != nil {
		t.Fatalf("meterRaw: %v", err)
	}
	if r.Rows != 3000 || r.Inserts != 3 || r.Rate != 10000 {
		t.Errorf("result: got %d rows in %d inserts at %v rows/s, want 3000 in 3 at 10000", r.Rows, r.Inserts, r.Rate)
	}
	if r.Elapsed < 300*time.Millisecond {
		t.Errorf("elapsed: got %v, want at least 300 ms: 3000 rows at 10000 rows/s", r.Elapsed)
	}
	// One count per 10 ms of the 300, give or take a loaded machine's
	// ticks; the final count of the table is one more.
	if n := selects() - before; n < 15 {
		t.Errorf("counts while posting: got %d SELECTs, want at least 15", n)
	}
	if r.ClickHouseCPU == nil || r.ClientCPU == nil || r.ClickHouseCPU.MicrosPerRow != r.ClickHouseCPU.Seconds*1e6/3000 {
		t.Errorf("cpu: got ClickHouse %+v, client %+v; want both, per row of 3000", r.ClickHouseCPU, r.ClientCPU)
	}
}

// testRunMatrixClickHouse runs the ClickHouse matrix with fake nodes that insert
// into ch, the compression cells' through the bench's wire proxies.
func testRunMatrixClickHouse(t *testing.T, ch *chtest.Server) {
	mc := testMatrix(t)
	mc.clickhouseURL = ch.URL()
	mc.compression = []string{"none", "gzip"}
	mc.memRows = 20000
	mc.countSpan = 2 * time.Second // some 40 counts: several ticks of ClickHouse CPU
	mc.base.Puts, mc.base.Warmup = 400, 20
	mc.base.LandTimeout = 30 * time.Second
	out, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("runMatrix: %v", err)
	}
	want := []struct {
		server      string
		txn         int
		paced, rows bool
		nodes       int
		log         bool
	}{
		{ServerNoop, 0, false, false, 1, false},
		{ServerChute, 0, false, true, 1, true},
		{ServerChuteNoFsync, 0, false, true, 1, true},
		{ServerChute3, 0, false, true, 3, false},
		{ServerNoop, 128, false, false, 1, false},
		{ServerChute, 128, false, true, 1, true},
		{ServerChuteNoFsync, 128, false, true, 1, true},
		{ServerChute3, 128, false, true, 3, false},
		{ServerNoopAtLatency, 0, false, false, 1, false},
		{ServerNoopAtLatency, 128, false, false, 1, false},
		{ServerChuteNoFsyncAtRate, 0, true, true, 1, true},
		{ServerChuteNoFsyncAtRate, 128, true, true, 1, true},
		{compressionServer("none"), 128, false, true, 1, false},
		{compressionServer("gzip"), 128, false, true, 1, false},
		{ServerNoopAtClusterLatency, 0, false, false, 1, false},
		{ServerNoopAtClusterLatency, 128, false, false, 1, false},
	}
	if len(out.results) != len(want) {
		t.Fatalf("results: got %d, want %d: %+v", len(out.results), len(want), out.results)
	}
	var chSeconds float64 // ClickHouse's CPU over the matrix's cells
	for i, w := range want {
		r := out.results[i]
		if r.Server != w.server || r.Txn != w.txn || (r.Rate > 0) != w.paced || (r.Rows != nil) != w.rows || r.Queues != 1 {
			t.Errorf("result %d: got %s txn %d rate %v rows %v queues %d, want %s txn %d paced %v rows %v queues 1",
				i, r.Server, r.Txn, r.Rate, r.Rows != nil, r.Queues, w.server, w.txn, w.paced, w.rows)
		}
		if r.Puts != 400 || r.Errors != 0 || (r.Rows != nil && r.Rows.Rows != 400) {
			t.Errorf("result %d (%s): got %d puts, %d errors, rows %+v; want 400 puts, all landed", i, r.Server, r.Puts, r.Errors, r.Rows)
		}
		// The no-op at the three nodes' latency takes one forwarding
		// node's share of the clients.
		if clients := mc.base.Clients; (r.Server == ServerNoopAtClusterLatency) != (r.Clients != clients) || r.Server == ServerNoopAtClusterLatency && r.Clients != max(1, clients/2) {
			t.Errorf("result %d (%s): got %d clients, the bench's %d", i, r.Server, r.Clients, clients)
		}
		if len(r.PeakRSS) != w.nodes {
			t.Errorf("result %d (%s): got peak RSS %+v, want %d nodes", i, r.Server, r.PeakRSS, w.nodes)
		}
		// The ClickHouse of chtest is found by its port; the client is this
		// process.
		if r.ClientCPU == nil || (r.ClickHouseCPU != nil) != w.rows || len(r.CPU) != w.nodes {
			t.Errorf("result %d (%s): got CPU %+v, ClickHouse %+v, client %+v; want %d nodes, ClickHouse metered: %v, the client",
				i, r.Server, r.CPU, r.ClickHouseCPU, r.ClientCPU, w.nodes, w.rows)
		}
		// A node that served the cell's puts read and wrote its sockets,
		// and waited on them.
		for _, c := range r.CPU {
			if c.SyscallsPerRow <= 0 || c.SwitchesPerRow <= 0 {
				t.Errorf("result %d (%s): node %s: got %v syscalls and %v switches a row, want some of each",
					i, r.Server, c.Node, c.SyscallsPerRow, c.SwitchesPerRow)
			}
		}
		// 400 rows may cost ClickHouse less than one tick of the CPU
		// clock (10 ms): a cell may read zero, the matrix as a whole not.
		if c := r.ClickHouseCPU; c != nil {
			chSeconds += c.Seconds
			if c.Seconds < 0 || c.MicrosPerRow != c.Seconds*1e6/float64(landedRows(r, mc.base.Warmup)) {
				t.Errorf("result %d (%s): got ClickHouse CPU %+v, want its seconds over the %d rows landed", i, r.Server, *c, landedRows(r, mc.base.Warmup))
			}
		}
		if (r.QueueLog != nil) != w.log {
			t.Errorf("result %d (%s): got queue log %+v, want one: %v", i, r.Server, r.QueueLog, w.log)
		}
		if q := r.QueueLog; q != nil {
			// The fake node counts a record per row, an fsync per call.
			fsyncs := r.Calls
			if r.Server == ServerChuteNoFsync || r.Server == ServerChuteNoFsyncAtRate {
				fsyncs = 0
			}
			if q.Records != 400 || q.Fsyncs != fsyncs {
				t.Errorf("result %d (%s): got queue log %+v, want 400 records and %d fsyncs", i, r.Server, *q, fsyncs)
			}
		}
	}
	if chSeconds <= 0 {
		t.Errorf("ClickHouse's CPU over every cell: got %vs, want some", chSeconds)
	}
	checkWire(t, mc, out.results)
	if c := out.count; c == nil || c.Counts < 1 || c.MillisPerSec <= 0 || c.Period != throughputPollInterval {
		t.Errorf("count cost: got %+v, want counts every %v and ClickHouse's CPU", c, throughputPollInterval)
	}
	if len(out.floors) != 2 {
		t.Fatalf("floors: got %+v, want unary and txn", out.floors)
	}
	for i, of := range []Result{out.results[1], out.results[5]} {
		f := out.floors[i]
		if f.Txn != of.Txn || f.Rate != of.Rows.RowsPerSec || f.Rows != landedRows(of, mc.base.Warmup) || f.BatchRows != int(f.Rows) {
			t.Errorf("floor %d: got txn %d, %d rows of %d at %v rows/s; want txn %d, %d rows in one batch at %v",
				i, f.Txn, f.Rows, f.BatchRows, f.Rate, of.Txn, landedRows(of, mc.base.Warmup), of.Rows.RowsPerSec)
		}
		if f.ClickHouseCPU == nil || f.ClickHouseCPU.Seconds < 0 || f.ClientCPU == nil { // zero: under a clock tick
			t.Errorf("floor %d: got ClickHouse CPU %+v, client %+v; want both metered", i, f.ClickHouseCPU, f.ClientCPU)
		}
	}
	if out.raw == nil || out.raw.Rows < 400 || out.raw.Posters != 2 {
		t.Errorf("raw inserts: got %+v, want at least 400 rows by 2 posters", out.raw)
	}
	m := out.memory
	if m == nil || m.Rows != 20000 || m.GOGC <= 0 {
		t.Fatalf("memory: got %+v, want 20000 rows", m)
	}
	t.Logf("memory of the fake node: %+v", *m)
	// The fake node keeps a copy of each value: a row costs its value and
	// a slice header, give or take the collector's noise.
	if m.HeapPerRow < 0.8*float64(m.ValSize) || m.HeapPerRow > float64(m.ValSize)+256 || m.RSSBytes <= 0 {
		t.Errorf("memory: got %.0f B of heap per %d-byte value (RSS %d), want about the value", m.HeapPerRow, m.ValSize, m.RSSBytes)
	}
	rep := NewReport(Measured{Results: out.results, Raw: out.raw, Floors: out.floors, Memory: out.memory})
	var ids []string
	for _, tg := range rep.Targets {
		ids = append(ids, tg.ID)
	}
	if got := strings.Join(ids, ","); got != "1a,1b,1c,2a,2b,2c,3a,3b,4,5a,5b" {
		t.Errorf("targets: got %s, want 1a,1b,1c,2a,2b,2c,3a,3b,4,5a,5b", got)
	}
}
