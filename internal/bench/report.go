package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Server labels used by the matrix, and by the ratios of the report.
const (
	ServerChute       = "chute"
	ServerChute3      = "chute, 3 nodes"
	ServerChuteTraced = "chute, traced 100%"
	// ServerChuteNoFsync is a chute node started with --unsafe-no-fsync:
	// its queue log is written but never fsynced.
	ServerChuteNoFsync = "chute, --unsafe-no-fsync"
	// ServerChuteNoFsyncAtRate is the node without fsync paced at the
	// puts/s the one-node chute with fsync took unpaced (median), unary
	// and txn: the two at one call rate.
	ServerChuteNoFsyncAtRate = "chute, --unsafe-no-fsync, at chute's rate"
	ServerNoop               = "no-op"
	// ServerNoopAtLatency is the no-op server holding each put and txn
	// for what the one-node chute's answers took longer than the no-op's
	// (medians): the gRPC floor at chute's latency.
	ServerNoopAtLatency = "no-op, at chute's latency"
	// ServerNoopAtClusterLatency is the no-op server holding each put and
	// txn for what the three-node cells' answers took longer than the
	// no-op's, driven by the clients of one forwarding node: the floor of
	// receiving a forwarding node's puts.
	ServerNoopAtClusterLatency = "no-op, at 3 nodes' latency, one forwarder's clients"
	// ServerChuteKV3 and ServerEtcd3 are the KV group: plain keys to
	// three chute nodes, and to three etcd members.
	ServerChuteKV3 = "chute KV, 3 nodes"
	ServerEtcd3    = "etcd, 3 nodes"
)

// Report is what chute-bench prints: the results in run order; for every
// client count and call shape measured against both servers, chute's rate
// as a fraction of the no-op rate; for every one measured against both
// chute nodes, the traced node's rate as a fraction of the untraced
// node's; with the matrix against ClickHouse, the sink's ceiling, the
// memory of a queued row and the benchmark's targets.
type Report struct {
	Machine *Machine     `json:"machine,omitempty"`
	Command string       `json:"command,omitempty"`
	Results []Result     `json:"results"`
	Ratios  []Ratio      `json:"ratios,omitempty"`
	Tracing []TraceRatio `json:"tracing,omitempty"`
	Raw     *RawResult   `json:"raw_insert,omitempty"`
	Floors  []RawResult  `json:"clickhouse_floors,omitempty"`
	// CountCost is what counting rows costs ClickHouse; nil: not
	// measured.
	CountCost *CountCost    `json:"count_cost,omitempty"`
	Memory    *MemoryResult `json:"memory,omitempty"`
	Targets   []Target      `json:"targets,omitempty"`
}

// Measured is what a bench measured, for NewReport.
type Measured struct {
	Results []Result
	Raw     *RawResult
	// Floors are the ClickHouse floors, one per call shape, and
	// CountCost what their counts and the watched runs' cost ClickHouse.
	Floors    []RawResult
	CountCost *CountCost
	Memory    *MemoryResult
}

// Ratio is chute's puts/s divided by the no-op server's at one client
// count and call shape.
type Ratio struct {
	Clients      int     `json:"clients"`
	Txn          int     `json:"txn,omitempty"`
	ChutePerNoop float64 `json:"chute_per_noop"`
}

// TraceRatio is the traced chute node's puts/s divided by the untraced
// node's at one client count and call shape: what tracing every call
// costs.
type TraceRatio struct {
	Clients           int     `json:"clients"`
	Txn               int     `json:"txn,omitempty"`
	TracedPerUntraced float64 `json:"traced_per_untraced"`
}

// NewReport returns the report of m, computing the ratios and checking the
// targets.
func NewReport(m Measured) Report {
	r := Report{Results: m.Results, Raw: m.Raw, Floors: m.Floors, CountCost: m.CountCost, Memory: m.Memory}
	for _, p := range ratios(m.Results, ServerChute, ServerNoop) {
		r.Ratios = append(r.Ratios, Ratio{Clients: p.clients, Txn: p.txn, ChutePerNoop: p.value})
	}
	for _, p := range ratios(m.Results, ServerChuteTraced, ServerChute) {
		r.Tracing = append(r.Tracing, TraceRatio{Clients: p.clients, Txn: p.txn, TracedPerUntraced: p.value})
	}
	r.Targets = evaluateTargets(m.Results, m.Floors, m.Memory)
	return r
}

// cellRatio is the puts/s of one server over another's at one client
// count and call shape.
type cellRatio struct {
	clients int
	txn     int
	value   float64
}

// ratios pairs the unpaced num and den results of each client count and
// call shape, in the order they first appear.
func ratios(results []Result, num, den string) []cellRatio {
	type shape struct{ clients, txn int }
	var out []cellRatio
	seen := make(map[shape]bool)
	for _, r := range results {
		s := shape{r.Clients, r.Txn}
		if r.Rate > 0 || seen[s] {
			continue
		}
		seen[s] = true
		n, okN := find(results, num, s.clients, s.txn)
		d, okD := find(results, den, s.clients, s.txn)
		if okN && okD && d.PutsPerSec > 0 {
			out = append(out, cellRatio{clients: s.clients, txn: s.txn, value: n.PutsPerSec / d.PutsPerSec})
		}
	}
	return out
}

// find returns the first unpaced result of server at clients and txn.
func find(results []Result, server string, clients, txn int) (Result, bool) {
	for _, r := range results {
		if r.Server == server && r.Clients == clients && r.Txn == txn && r.Rate == 0 {
			return r, true
		}
	}
	return Result{}, false
}

// WriteMarkdown writes a markdown table with one row per result, then the
// ratio lines when there are ratios, the spans the traced runs sent, one
// line per result that had errors, and the tables of rows, of the queue
// log, of compression, of the sink's ceiling, of memory and of the
// targets when there are any.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	r.writePuts(&b)
	r.writeRatios(&b)
	r.writeErrors(&b)
	if hasSpread(r.Results) {
		b.WriteString("\nRepeated runs, medians above:\n\n")
		r.writeSpread(&b)
	}
	if r.hasPerRow() {
		b.WriteString("\nCPU per row against the floors:\n\n")
		r.writePerRow(&b)
	}
	if hasRowCPU(r.Results) {
		b.WriteString("\nCPU per row of each process:\n\n")
		r.writeRowCPU(&b)
	}
	if hasRows(r.Results) {
		b.WriteString("\nRows into ClickHouse:\n\n")
		r.writeRows(&b)
	}
	if len(r.Floors) > 0 {
		b.WriteString("\nClickHouse floors, the same rows inserted straight:\n\n")
		r.writeFloors(&b)
	}
	if hasQueueLog(r.Results) {
		b.WriteString("\nQueue log during the measured phase:\n\n")
		r.writeQueueLog(&b)
	}
	if hasWire(r.Results) {
		b.WriteString("\nCompression of the inserts, bytes counted on the wire to ClickHouse:\n\n")
		r.writeCompression(&b)
	}
	if r.Raw != nil {
		b.WriteString("\nRaw JSONEachRow inserts, the ceiling of the sink:\n\n")
		r.writeRaw(&b)
	}
	if r.Memory != nil {
		b.WriteString("\nMemory of a queued row:\n\n")
		r.writeMemory(&b)
	}
	if len(r.Targets) > 0 {
		b.WriteString("\nTargets:\n\n")
		r.writeTargets(&b)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writePuts writes the table of results.
func (r Report) writePuts(b *bytes.Buffer) {
	b.WriteString("| server | calls | clients | conns | queues | puts/s | p50 ms | p99 ms | p99.9 ms | peak RSS MiB | CPU µs/put |\n")
	b.WriteString("|--------|-------|--------:|------:|-------:|-------:|-------:|-------:|---------:|-------------:|-----------:|\n")
	for _, res := range r.Results {
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %.0f | %s | %s | %s | %s | %s |\n",
			res.Server, callShape(res), res.Clients, res.Conns, dash(res.Queues), res.PutsPerSec,
			millis(res.P50), millis(res.P99), millis(res.P999), peakRSS(res.PeakRSS), cpuPerPut(res.CPU))
	}
}

// writeRatios writes the ratio lines and the spans of the traced runs.
func (r Report) writeRatios(b *bytes.Buffer) {
	if len(r.Ratios) > 0 || len(r.Tracing) > 0 || len(ratios(r.Results, ServerChuteKV3, ServerEtcd3)) > 0 {
		b.WriteString("\n")
	}
	if len(r.Ratios) > 0 {
		b.WriteString("chute/no-op puts/s:")
		for i, ra := range r.Ratios {
			writeRatio(b, i, ra.Clients, ra.Txn, ra.ChutePerNoop)
		}
		b.WriteString("\n")
	}
	if kv := ratios(r.Results, ServerChuteKV3, ServerEtcd3); len(kv) > 0 {
		b.WriteString("chute KV/etcd puts/s, 3 nodes each:")
		for i, ra := range kv {
			writeRatio(b, i, ra.clients, ra.txn, ra.value)
		}
		b.WriteString("\n")
	}
	if len(r.Tracing) > 0 {
		b.WriteString("traced/untraced chute puts/s:")
		for i, ra := range r.Tracing {
			writeRatio(b, i, ra.Clients, ra.Txn, ra.TracedPerUntraced)
		}
		b.WriteString("\n")
	}
	traced := 0
	for _, res := range r.Results {
		if res.Trace == nil {
			continue
		}
		if traced == 0 {
			b.WriteString("spans received by the bench's OTLP sink:")
		} else {
			b.WriteString(",")
		}
		fmt.Fprintf(b, " %d clients %d for %d KV calls", res.Clients, res.Trace.Spans, res.Trace.Calls)
		traced++
	}
	if traced > 0 {
		b.WriteString("\n")
	}
}

// writeErrors writes one line per result that had errors.
func (r Report) writeErrors(b *bytes.Buffer) {
	for _, res := range r.Results {
		if res.Errors > 0 {
			fmt.Fprintf(b, "\nerrors: %s, %s, %d clients: %d of %d puts failed, e.g. %s\n",
				res.Server, callShape(res), res.Clients, res.Errors, res.Errors+res.Puts, res.FirstError)
		}
	}
}

// writeSpread writes the table of the results that fold several runs:
// the extremes of their rates and of their CPU per row, and the failed
// puts of all their runs.
func (r Report) writeSpread(b *bytes.Buffer) {
	b.WriteString("| server | calls | runs | puts/s median | min | max | rows/s median | min | max | chute µs/row min–max | ClickHouse µs/row min–max | failed puts, all runs |\n")
	b.WriteString("|--------|-------|-----:|--------------:|----:|----:|--------------:|----:|----:|---------------------:|--------------------------:|----------------------:|\n")
	for _, res := range r.Results {
		sp := res.Spread
		if sp == nil {
			continue
		}
		rows := "| - | - | - |"
		if res.Rows != nil {
			rows = fmt.Sprintf("| %.0f | %.0f | %.0f |", res.Rows.RowsPerSec, sp.MinRowsPerSec, sp.MaxRowsPerSec)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %.0f | %.0f | %.0f %s %s | %s | %d |\n",
			res.Server, callShape(res), sp.Runs, res.PutsPerSec, sp.MinPutsPerSec, sp.MaxPutsPerSec, rows,
			span(sp.MinMicrosPerRow, sp.MaxMicrosPerRow), span(sp.MinClickHouseMicrosPerRow, sp.MaxClickHouseMicrosPerRow), sp.Errors)
	}
}

// hasSpread reports whether any result folds several runs.
func hasSpread(results []Result) bool {
	for _, r := range results {
		if r.Spread != nil {
			return true
		}
	}
	return false
}

// writeRows writes the table of the results that watched their rows.
func (r Report) writeRows(b *bytes.Buffer) {
	b.WriteString("| server | calls | puts/s | rows | rows/s | rows per insert | put-to-row p50 ms | p99 ms | p99.9 ms |\n")
	b.WriteString("|--------|-------|-------:|-----:|-------:|----------------:|------------------:|-------:|---------:|\n")
	for _, res := range r.Results {
		if res.Rows == nil {
			continue
		}
		rw := res.Rows
		fmt.Fprintf(b, "| %s | %s | %.0f | %d | %.0f | %.0f | %s | %s | %s |\n",
			res.Server, callShape(res), res.PutsPerSec, rw.Rows, rw.RowsPerSec, rw.RowsPerInsert,
			millis1(rw.P50), millis1(rw.P99), millis1(rw.P999))
	}
}

// writeQueueLog writes the table of the results that read their node's
// queue log.
func (r Report) writeQueueLog(b *bytes.Buffer) {
	b.WriteString("| server | calls | puts/s | records | fsyncs | fsyncs/s | puts per fsync |\n")
	b.WriteString("|--------|-------|-------:|--------:|-------:|---------:|---------------:|\n")
	for _, res := range r.Results {
		q := res.QueueLog
		if q == nil {
			continue
		}
		per := "-"
		if q.Fsyncs > 0 {
			per = fmt.Sprintf("%.1f", q.RecordsPerFsync)
		}
		fmt.Fprintf(b, "| %s | %s | %.0f | %d | %d | %.0f | %s |\n",
			res.Server, callShape(res), res.PutsPerSec, q.Records, q.Fsyncs, q.FsyncsPerSec, per)
	}
}

// hasQueueLog reports whether any result read its node's queue log.
func hasQueueLog(results []Result) bool {
	for _, r := range results {
		if r.QueueLog != nil {
			return true
		}
	}
	return false
}

// writeCompression writes the table of the results whose bytes to
// ClickHouse were counted: per row, the bytes sent and the CPU time of
// the node and of ClickHouse's queries, and the bytes over those of the
// run without compression when there is one.
func (r Report) writeCompression(b *bytes.Buffer) {
	var plain float64
	for _, res := range r.Results {
		if w := res.Wire; w != nil && w.Compression == "none" {
			plain = w.BytesPerRow
			break
		}
	}
	b.WriteString("| --clickhouse-compression | calls | rows/s | chute CPU µs/row | ClickHouse query CPU µs/row | bytes sent/row | ÷ none | connections |\n")
	b.WriteString("|--------------------------|-------|-------:|-----------------:|----------------------------:|---------------:|-------:|------------:|\n")
	for _, res := range r.Results {
		w := res.Wire
		if w == nil {
			continue
		}
		rowsPerSec := "-"
		if res.Rows != nil {
			rowsPerSec = fmt.Sprintf("%.0f", res.Rows.RowsPerSec)
		}
		chCPU, ratio := "-", "-"
		if w.ClickHouseMicrosPerRow > 0 {
			chCPU = fmt.Sprintf("%.2f", w.ClickHouseMicrosPerRow)
		}
		if plain > 0 {
			ratio = fmt.Sprintf("%.3f", w.BytesPerRow/plain)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.2f | %s | %.1f | %s | %d |\n",
			w.Compression, callShape(res), rowsPerSec, w.NodeMicrosPerRow, chCPU, w.BytesPerRow, ratio, w.Conns)
	}
}

// hasWire reports whether any result counted its bytes to ClickHouse.
func hasWire(results []Result) bool {
	for _, r := range results {
		if r.Wire != nil {
			return true
		}
	}
	return false
}

// writeRaw writes the table of the raw inserts.
func (r Report) writeRaw(b *bytes.Buffer) {
	x := r.Raw
	b.WriteString("| posters | rows per insert | bytes per insert | inserts | rows | rows/s | insert p50 ms | p99 ms | ClickHouse µs/row | client µs/row |\n")
	b.WriteString("|--------:|----------------:|-----------------:|--------:|-----:|-------:|--------------:|-------:|------------------:|--------------:|\n")
	fmt.Fprintf(b, "| %d | %d | %d | %d | %d | %.0f | %s | %s | %s | %s |\n",
		x.Posters, x.BatchRows, x.BatchBytes, x.Inserts, x.Rows, x.RowsPerSec, millis1(x.P50), millis1(x.P99),
		perRow(x.ClickHouseCPU), perRow(x.ClientCPU))
}

// writeMemory writes the table of the memory of a queued row.
func (r Report) writeMemory(b *bytes.Buffer) {
	m := r.Memory
	spread := "-"
	if m.Runs > 1 {
		spread = fmt.Sprintf("%.0f–%.0f B", m.MinRSSPerRow, m.MaxRSSPerRow)
	}
	b.WriteString("| runs | rows queued | value bytes | key bytes | RSS growth per row | min–max | beyond value and key | live heap per row | beyond the value | GOGC |\n")
	b.WriteString("|-----:|------------:|------------:|----------:|-------------------:|--------:|---------------------:|------------------:|-----------------:|-----:|\n")
	fmt.Fprintf(b, "| %d | %d | %d | %d | %.0f B | %s | %.0f B | %.0f B | %.0f B | %d |\n",
		max(m.Runs, 1), m.Rows, m.ValSize, m.KeySize, m.RSSPerRow, spread, m.RSSPerRow-float64(m.ValSize+m.KeySize), m.HeapPerRow, m.OverheadPerRow, m.GOGC)
}

// writeTargets writes the table of the targets, then the lines beside
// them that divide by fairer floors.
func (r Report) writeTargets(b *bytes.Buffer) {
	r.writeTargetTable(b)
	r.writeLatencyMatchedNoop(b)
	r.writeHopFloors(b)
	r.writeRateMatchedFsync(b)
}

// writeTargetTable writes the table of the targets.
func (r Report) writeTargetTable(b *bytes.Buffer) {
	b.WriteString("| # | target | measured | got | want | |\n")
	b.WriteString("|---|--------|----------|----:|-----:|-|\n")
	for _, t := range r.Targets {
		verdict := "**fail**"
		if t.Pass {
			verdict = "pass"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", t.ID, t.Goal, t.Measured, t.Got, t.Want, verdict)
	}
}

// writeHopFloors writes, when the three-node cells and the no-op at
// their latency were measured, each three-node cell against one node's
// µs/row plus that no-op's µs/put: a row put to a forwarding node is
// received twice, from its client and again by the dispatcher, where
// one node receives it once, so this is what the three nodes spend
// beyond one node and the first receive. It is shown beside targets 3a
// and 3b, which it does not change.
func (r Report) writeHopFloors(b *bytes.Buffer) {
	var lines []string
	for _, p := range []struct {
		id  string
		txn int
	}{{"3a", r.txnOf(ServerChute3)}, {"3b", 0}} {
		three, ok3 := findCell(r.Results, ServerChute3, p.txn, true)
		one, ok1 := findCell(r.Results, ServerChute, p.txn, true)
		late, okL := findCell(r.Results, ServerNoopAtClusterLatency, p.txn, false)
		if !ok3 || !ok1 || !okL || len(three.CPU) == 0 || len(one.CPU) == 0 || len(late.CPU) == 0 {
			continue
		}
		oneRow, hop := sumPerRow(one.CPU), late.CPU[0].MicrosPerPut
		floor := oneRow + hop
		if floor <= 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("| %s | %s | %.2f + %.2f = %.2f | %.2f |",
			p.id, callShape(three), oneRow, hop, floor, sumPerRow(three.CPU)/floor))
	}
	writeBesideTable(b, lines, "\nBeside 3a and 3b: a row put to a forwarding node is received twice,\n"+
		"from its client and again by the dispatcher, where one node receives\n"+
		"it once. Counting the first receive at the no-op's cost (at the three\n"+
		"nodes' latency, driven by one forwarding node's clients), the three\n"+
		"nodes' µs/row over one node's plus that:\n\n"+
		"| # | calls | 1 node + no-op at 3 nodes' latency µs/row | 3 nodes ÷ that |\n"+
		"|---|-------|------------------------------------------:|---------------:|\n")
}

// writeBesideTable writes head then the rows of a table beside the
// targets, nothing when there are no rows.
func writeBesideTable(b *bytes.Buffer, rows []string, head string) {
	if len(rows) == 0 {
		return
	}
	b.WriteString(head)
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// writeLatencyMatchedNoop writes, for the unary and the txn cell of one
// node whose no-op was also run at chute's latency, chute's µs/put (per
// row) over that no-op's: the free-running no-op answers at once and,
// in the bench's closed loop, serves more calls a second, each cheaper
// to its gRPC stack; held to chute's median latency it serves about
// chute's call rate. It is shown beside targets 1c and 2b, which it
// does not change.
func (r Report) writeLatencyMatchedNoop(b *bytes.Buffer) {
	var lines []string
	for _, t := range []struct {
		target string
		txn    int
	}{{"1c", 0}, {"2b", r.txnOf(ServerChute)}} {
		chute, okC := findCell(r.Results, ServerChute, t.txn, true)
		late, okL := findCell(r.Results, ServerNoopAtLatency, t.txn, false)
		if !okC || !okL || len(chute.CPU) == 0 || len(late.CPU) == 0 || late.CPU[0].MicrosPerPut <= 0 {
			continue
		}
		c, n := chute.CPU[0].MicrosPerPut, late.CPU[0].MicrosPerPut
		lines = append(lines, fmt.Sprintf("| %s | %s | %.0f / %.0f | %.3f / %.3f | %.2f ÷ %.2f | %.2f |",
			t.target, callShape(chute), chute.PutsPerSec, late.PutsPerSec, chute.P50.Seconds()*1000, late.P50.Seconds()*1000, c, n, c/n))
	}
	writeBesideTable(b, lines, "\nBeside 1c and 2b: the no-op server answering at once serves more\n"+
		"calls a second in the bench's closed loop, and its gRPC stack spends\n"+
		"less on each. Held to chute's median latency, driven by the same\n"+
		"clients, it serves about chute's call rate; chute's µs/put over that:\n\n"+
		"| # | calls | puts/s, chute / no-op | p50 ms, chute / no-op | µs/put, chute ÷ no-op | ratio |\n"+
		"|---|-------|----------------------:|----------------------:|----------------------:|------:|\n")
}

// writeRateMatchedFsync writes, for each of the unary and the txn cell
// whose node without fsync was also run at the fsync node's rate, the
// fsync node's µs/row over that run's. In the bench's closed loop the
// node that answers sooner serves more calls a second, and the gRPC
// stack costs less per call the more calls a second it serves; at one
// call rate the ratio is what the fsync costs. It is shown beside
// targets 5a and 5b, which it does not change.
func (r Report) writeRateMatchedFsync(b *bytes.Buffer) {
	for _, t := range []struct {
		target string
		txn    int
	}{{"5a", 0}, {"5b", r.txnOf(ServerChute)}} {
		fsync, okF := findCell(r.Results, ServerChute, t.txn, true)
		i := slices.IndexFunc(r.Results, func(c Result) bool {
			return c.Server == ServerChuteNoFsyncAtRate && c.Txn == t.txn && c.Rows != nil
		})
		if !okF || i < 0 || len(fsync.CPU) == 0 || len(r.Results[i].CPU) == 0 || r.Results[i].CPU[0].MicrosPerRow <= 0 {
			continue
		}
		paced := r.Results[i]
		f, n := fsync.CPU[0].MicrosPerRow, paced.CPU[0].MicrosPerRow
		calls := ""
		if t.txn > 0 {
			calls = fmt.Sprintf(" of txns of %d", t.txn)
		}
		fmt.Fprintf(b, "\nBeside %s: the node without fsync paced at the puts/s%s the node with\n"+
			"fsync took (%.0f puts/s; p50 %.3f ms against %.3f), so that both serve\n"+
			"one call rate: fsync %.2f µs/row ÷ no fsync %.2f µs/row = %.2f.\n",
			t.target, calls, paced.PutsPerSec, paced.P50.Seconds()*1000, fsync.P50.Seconds()*1000, f, n, f/n)
	}
}

// txnOf returns the txn size of server's txn cell, defaultMatrixTxn when
// there is none.
func (r Report) txnOf(server string) int {
	if t, ok := findTxnCell(r.Results, server); ok {
		return t.Txn
	}
	return defaultMatrixTxn
}

// hasRows reports whether any result watched its rows.
func hasRows(results []Result) bool {
	for _, r := range results {
		if r.Rows != nil {
			return true
		}
	}
	return false
}

// callShape names what a result's calls were: "put" or "txn 128", and
// the pace when paced.
func callShape(r Result) string {
	s := "put"
	if r.Txn > 0 {
		s = fmt.Sprintf("txn %d", r.Txn)
	}
	if r.Rate > 0 {
		s += fmt.Sprintf(", paced %.0f/s", r.Rate)
	}
	return s
}

// dash is n, or "-" for zero.
func dash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// peakRSS is each node's peak RSS in MiB, "/"-separated; "-" for none.
func peakRSS(nodes []NodeRSS) string {
	if len(nodes) == 0 {
		return "-"
	}
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%.0f", float64(n.Bytes)/(1<<20))
	}
	return strings.Join(parts, " / ")
}

// cpuPerPut is each node's CPU µs per put, "/"-separated; "-" for none.
func cpuPerPut(nodes []NodeCPU) string {
	if len(nodes) == 0 {
		return "-"
	}
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("%.1f", n.MicrosPerPut)
	}
	return strings.Join(parts, " / ")
}

// writeRatio writes the i-th entry of a ratio line.
func writeRatio(b *bytes.Buffer, i, clients, txn int, value float64) {
	if i > 0 {
		b.WriteString(",")
	}
	fmt.Fprintf(b, " %d clients", clients)
	if txn > 0 {
		fmt.Fprintf(b, " txn %d", txn)
	}
	fmt.Fprintf(b, " %.2f (%.0f%%)", value, 100*value)
}

// WriteJSON writes r as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// millis formats d in milliseconds with microsecond precision.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond))
}

// millis1 formats d in milliseconds with one decimal.
func millis1(d time.Duration) string {
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
}

// perRowPath is one line of the table of CPU per row against the floors.
type perRowPath struct {
	name   string
	server string
	txn    int
	// before is chute's and ClickHouse's µs/row on this path before
	// adaptive batching, parallel inserts and the cuts per row, for
	// the comparison the table shows (see writePerRow).
	before [2]float64
}

// perRowPaths are the lines of that table, in its order; the txn lines
// take the txn size of the one-node txn cell.
func (r Report) perRowPaths() []perRowPath {
	txn := r.txnOf(ServerChute)
	return []perRowPath{
		{"unary, 1 node", ServerChute, 0, [2]float64{39, 14}},
		{fmt.Sprintf("txn-%d, 1 node", txn), ServerChute, txn, [2]float64{4.9, 3.4}},
		{fmt.Sprintf("txn-%d, 3 nodes", txn), ServerChute3, txn, [2]float64{8.5, 3.7}},
		{"unary, 3 nodes", ServerChute3, 0, [2]float64{99, 23}},
	}
}

// hasPerRow reports whether any line of the table of CPU per row
// against the floors was measured.
func (r Report) hasPerRow() bool {
	for _, p := range r.perRowPaths() {
		if res, ok := findCell(r.Results, p.server, p.txn, true); ok && len(res.CPU) > 0 {
			return true
		}
	}
	return false
}

// writePerRow writes the table of CPU per row against the floors: for
// each path, the nodes' µs/row (summed over three nodes), ClickHouse's
// and the client's, next to the no-op server's µs/put and the
// ClickHouse floor's µs/row of the same call shape, and the figures of
// the same path before adaptive batching, parallel inserts and the cuts
// per row (the "before" columns: utime+stime over rows landed, three
// runs of 100 clients on the 2-core development machine, when ClickHouse
// was still polled with count(), which cost it up to 1 µs/row).
func (r Report) writePerRow(b *bytes.Buffer) {
	b.WriteString("| path | chute µs/row | before | ClickHouse µs/row | before | client µs/row | rows per insert | no-op µs/put | no-op at chute's latency µs/put | ClickHouse floor µs/row | floor rows per insert |\n")
	b.WriteString("|------|-------------:|-------:|------------------:|-------:|--------------:|----------------:|-------------:|--------------------------------:|------------------------:|----------------------:|\n")
	for _, p := range r.perRowPaths() {
		res, ok := findCell(r.Results, p.server, p.txn, true)
		if !ok || len(res.CPU) == 0 {
			continue
		}
		perPut := func(server string) string {
			if n, ok := findCell(r.Results, server, p.txn, false); ok && len(n.CPU) > 0 {
				return fmt.Sprintf("%.2f", n.CPU[0].MicrosPerPut)
			}
			return "-"
		}
		noop, late, floorCPU, floorBatch := perPut(ServerNoop), "-", "-", "-"
		switch p.server { // matched to the path's latency
		case ServerChute:
			late = perPut(ServerNoopAtLatency)
		case ServerChute3:
			late = perPut(ServerNoopAtClusterLatency)
		}
		if f, ok := findFloor(r.Floors, p.txn); ok {
			floorCPU, floorBatch = perRow(f.ClickHouseCPU), fmt.Sprint(f.BatchRows)
		}
		fmt.Fprintf(b, "| %s | %s | %g | %s | %g | %s | %.0f | %s | %s | %s | %s |\n",
			p.name, perRowSum(res.CPU), p.before[0], perRow(res.ClickHouseCPU), p.before[1], perRow(res.ClientCPU), rowsPerInsert(res), noop, late, floorCPU, floorBatch)
	}
}

// hasRowCPU reports whether any result metered CPU per row.
func hasRowCPU(results []Result) bool {
	for _, r := range results {
		if r.ClickHouseCPU != nil || r.ClientCPU != nil || sumPerRow(r.CPU) > 0 {
			return true
		}
	}
	return false
}

// writeRowCPU writes the table of every result's CPU per row (per put
// where it watched no rows), of each node, ClickHouse and the client.
func (r Report) writeRowCPU(b *bytes.Buffer) {
	b.WriteString("| server | calls | rows | rows per insert | chute µs/row | ClickHouse µs/row | client µs/row |\n")
	b.WriteString("|--------|-------|-----:|----------------:|-------------:|------------------:|--------------:|\n")
	for _, res := range r.Results {
		if res.ClickHouseCPU == nil && res.ClientCPU == nil && sumPerRow(res.CPU) == 0 {
			continue
		}
		rows, perInsert := "-", "-"
		if res.Rows != nil {
			rows, perInsert = fmt.Sprint(res.Rows.Rows), fmt.Sprintf("%.0f", res.Rows.RowsPerInsert)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n",
			res.Server, callShape(res), rows, perInsert, perRowSum(res.CPU), perRow(res.ClickHouseCPU), perRow(res.ClientCPU))
	}
}

// writeFloors writes the table of the ClickHouse floors and, when
// measured, what the counts cost ClickHouse, per row at each floor's
// rate: the share of the floor, and of its chute runs, that counting
// explains.
func (r Report) writeFloors(b *bytes.Buffer) {
	b.WriteString("| floor of | runs | rows per insert | inserts | rows | paced rows/s | rows/s | insert p50 ms | p99 ms | ClickHouse µs/row | min–max | counting µs/row | client µs/row |\n")
	b.WriteString("|----------|-----:|----------------:|--------:|-----:|-------------:|-------:|--------------:|-------:|------------------:|--------:|----------------:|--------------:|\n")
	for _, f := range r.Floors {
		counting := "-"
		if c := r.CountCost; c != nil {
			counting = fmt.Sprintf("%.2f", c.perRowAt(f.Rate))
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %.0f | %.0f | %s | %s | %s | %s | %s | %s |\n",
			callShape(Result{Txn: f.Txn}), max(f.Runs, 1), f.BatchRows, f.Inserts, f.Rows, f.Rate, f.RowsPerSec,
			millis1(f.P50), millis1(f.P99), perRow(f.ClickHouseCPU),
			span(f.MinClickHouseMicrosPerRow, f.MaxClickHouseMicrosPerRow), counting, perRow(f.ClientCPU))
	}
	if c := r.CountCost; c != nil {
		fmt.Fprintf(b, "\nCounting an empty table's rows every %v (%d counts) and nothing else cost\n"+
			"ClickHouse %.1f ms of CPU per second: counting µs/row is that over the\n"+
			"floor's rate, the share of the floor (and about of its chute runs) the\n"+
			"counts explain.\n", c.Period, c.Counts, c.MillisPerSec)
	}
}

// perRow is a process's µs per row, "-" when not metered.
func perRow(c *NodeCPU) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", c.MicrosPerRow)
}

// perRowSum is the nodes' µs per row: one node's alone, several as
// "a + b + c = sum"; "-" for none.
func perRowSum(nodes []NodeCPU) string {
	return nodeSum(nodes, "%.2f", func(n NodeCPU) float64 { return n.MicrosPerRow })
}

// nodeSum is a figure of each node and their sum, each written with
// format: "a + b + c = s", the figure alone of one node, "-" of none.
func nodeSum(nodes []NodeCPU, format string, of func(NodeCPU) float64) string {
	switch len(nodes) {
	case 0:
		return "-"
	case 1:
		return fmt.Sprintf(format, of(nodes[0]))
	}
	parts := make([]string, len(nodes))
	var sum float64
	for i, n := range nodes {
		v := of(n)
		parts[i] = fmt.Sprintf(format, v)
		sum += v
	}
	return strings.Join(parts, " + ") + " = " + fmt.Sprintf(format, sum)
}

// span is "min–max" with two decimals, "-" when neither was measured.
func span(lo, hi float64) string {
	if lo == 0 && hi == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}
