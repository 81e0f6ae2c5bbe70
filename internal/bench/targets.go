package bench

import (
	"fmt"
	"time"
)

// Targets of the benchmark: CPU per row of each process as ratios to
// floors measured in the same run, on 2 cores with the client on the
// same machine. Targets 1 to 3 read the default node, which fsyncs its
// queue log, as users run it.
const (
	// targetUnaryCHPerFloor: unary puts, one node, 100 clients: what a
	// row costs ClickHouse at most this many times what it costs when
	// inserted straight in floorBatchRows batches at the same rate.
	targetUnaryCHPerFloor = 2.5
	// targetPutToRowP99: put-to-row p99 of the same unpaced run.
	targetPutToRowP99 = 1500 * time.Millisecond
	// targetUnaryPerNoop: the node's CPU per put at most this many times
	// the no-op server's.
	targetUnaryPerNoop = 1.1
	// targetTxnPerNoop: txn batches, one node: the node's CPU per row at
	// most this many times the no-op server's per put.
	targetTxnPerNoop = 1.6
	// targetTxnCHPerFloor: the same run's ClickHouse CPU per row at most
	// this many times its floor's.
	targetTxnCHPerFloor = 1.3
	// targetTxnThreePerOne and targetUnaryThreePerOne: three nodes,
	// producers on the two that do not dispatch: the three nodes' CPU
	// per row, summed, at most this many times one node's.
	targetTxnThreePerOne   = 1.4
	targetUnaryThreePerOne = 2.0
	// targetRowRSSOverhead: a queued row grows the resident memory of a
	// node that cannot reach ClickHouse by at most its value, its key
	// and this many bytes.
	targetRowRSSOverhead = 64
	// targetFsyncPerNoFsync: the node's CPU per row with fsync at most
	// this many times the --unsafe-no-fsync node's, unary and txn.
	targetFsyncPerNoFsync = 1.1
)

// Target is one target checked against the figures of a run.
type Target struct {
	// ID is the target's number, with a letter when it is
	// checked more than once.
	ID string `json:"id"`
	// Goal is the target, in words.
	Goal string `json:"goal"`
	// Measured names the figures compared.
	Measured string `json:"measured"`
	// Value is what was measured (a ratio, milliseconds, puts or bytes)
	// and Limit the target's bound, never to be exceeded; Got and Want
	// are both as text.
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Got   string  `json:"got"`
	Want  string  `json:"want"`
	Pass  bool    `json:"pass"`
}

// evaluateTargets checks every target whose cells were measured: a target
// whose figures are missing (a process not metered, a cell not run) is
// left out.
func evaluateTargets(results []Result, floors []RawResult, mem *MemoryResult) []Target {
	var out []Target
	ratio := func(id, goal, measured string, num, den, limit float64) {
		if num < 0 || den < 0 {
			return // a process not metered (chPerRow)
		}
		if num == 0 || den == 0 {
			// A run too short for the CPU clock (10 ms ticks) reads zero:
			// the target stays in the report, unmeasured and not passed.
			out = append(out, Target{ID: id, Goal: goal, Measured: measured + " (a CPU time of zero: the run was too short to measure)",
				Limit: limit, Got: "-", Want: fmt.Sprintf("≤ %.2f", limit)})
			return
		}
		v := num / den
		out = append(out, Target{ID: id, Goal: goal, Measured: measured, Value: v, Limit: limit,
			Got: fmt.Sprintf("%.2f", v), Want: fmt.Sprintf("≤ %.2f", limit), Pass: v <= limit})
	}
	u1, okU1 := findCell(results, ServerChute, 0, true)
	t1, okT1 := findTxnCell(results, ServerChute)
	if okU1 {
		if f, ok := findFloor(floors, 0); ok {
			ratio("1a", fmt.Sprintf("unary, one node, %d clients: ClickHouse µs/row ≤ %.1f× its floor", u1.Clients, targetUnaryCHPerFloor),
				chMeasured(u1, f), chPerRow(u1.ClickHouseCPU), chPerRow(f.ClickHouseCPU), targetUnaryCHPerFloor)
		}
		ms := float64(u1.Rows.P99) / float64(time.Millisecond)
		lim := float64(targetPutToRowP99) / float64(time.Millisecond)
		out = append(out, Target{ID: "1b", Goal: fmt.Sprintf("and put-to-row p99 ≤ %v", targetPutToRowP99),
			Measured: fmt.Sprintf("the same run, unpaced, %.0f rows/s", u1.Rows.RowsPerSec),
			Value:    ms, Limit: lim, Got: fmt.Sprintf("%.0f ms", ms), Want: fmt.Sprintf("≤ %.0f ms", lim),
			Pass: u1.Rows.P99 <= targetPutToRowP99})
		if n, ok := findCell(results, ServerNoop, 0, false); ok && len(u1.CPU) > 0 && len(n.CPU) > 0 {
			ratio("1c", fmt.Sprintf("and chute µs/put ≤ %.1f× the no-op server's", targetUnaryPerNoop),
				fmt.Sprintf("chute %.1f µs/put ÷ no-op %.1f µs/put", u1.CPU[0].MicrosPerPut, n.CPU[0].MicrosPerPut),
				u1.CPU[0].MicrosPerPut, n.CPU[0].MicrosPerPut, targetUnaryPerNoop)
		}
	}
	if okT1 {
		refused := refusedPuts(t1)
		measured := "failed puts over " + runsOf(t1)
		if t1.FirstError != "" {
			measured += fmt.Sprintf(", e.g. %q", t1.FirstError)
		}
		out = append(out, Target{ID: "2a", Goal: fmt.Sprintf("txn-%d, one node: no put refused", t1.Txn),
			Measured: measured,
			Value:    float64(refused), Got: fmt.Sprint(refused), Want: "0", Pass: refused == 0})
		if n, ok := findCell(results, ServerNoop, t1.Txn, false); ok && len(t1.CPU) > 0 && len(n.CPU) > 0 {
			ratio("2b", fmt.Sprintf("and chute µs/row ≤ %.1f× the no-op server's", targetTxnPerNoop),
				fmt.Sprintf("chute %.2f µs/row ÷ no-op %.2f µs/put", t1.CPU[0].MicrosPerRow, n.CPU[0].MicrosPerPut),
				t1.CPU[0].MicrosPerRow, n.CPU[0].MicrosPerPut, targetTxnPerNoop)
		}
		if f, ok := findFloor(floors, t1.Txn); ok {
			ratio("2c", fmt.Sprintf("and ClickHouse µs/row ≤ %.1f× its floor", targetTxnCHPerFloor),
				chMeasured(t1, f), chPerRow(t1.ClickHouseCPU), chPerRow(f.ClickHouseCPU), targetTxnCHPerFloor)
		}
	}
	if t3, ok := findTxnCell(results, ServerChute3); ok && okT1 && len(t1.CPU) > 0 {
		ratio("3a", fmt.Sprintf("three nodes, producers on the two that do not dispatch, txn-%d: µs/row of the three ≤ %.1f× one node's", t3.Txn, targetTxnThreePerOne),
			threeMeasured(t3, t1), sumPerRow(t3.CPU), t1.CPU[0].MicrosPerRow, targetTxnThreePerOne)
	}
	if u3, ok := findCell(results, ServerChute3, 0, true); ok && okU1 && len(u1.CPU) > 0 {
		ratio("3b", fmt.Sprintf("the same, unary: ≤ %.1f× one node's", targetUnaryThreePerOne),
			threeMeasured(u3, u1), sumPerRow(u3.CPU), u1.CPU[0].MicrosPerRow, targetUnaryThreePerOne)
	}
	if mem != nil {
		over := mem.RSSPerRow - float64(mem.ValSize+mem.KeySize)
		out = append(out, Target{ID: "4", Goal: fmt.Sprintf("RSS growth per queued row ≤ value + key + %d B, ClickHouse unreachable", targetRowRSSOverhead),
			Measured: fmt.Sprintf("%.0f B per row of a %d-byte value and a %d-byte key, %d rows (live heap %.0f B per row)",
				mem.RSSPerRow, mem.ValSize, mem.KeySize, mem.Rows, mem.HeapPerRow),
			Value: over, Limit: targetRowRSSOverhead,
			Got: valueKeyPlus(over), Want: fmt.Sprintf("≤ value + key + %d B", targetRowRSSOverhead),
			Pass: over <= targetRowRSSOverhead})
	}
	if n, ok := findCell(results, ServerChuteNoFsync, 0, true); ok && okU1 && len(u1.CPU) > 0 && len(n.CPU) > 0 {
		ratio("5a", fmt.Sprintf("fsync on, unary, one node: chute µs/row ≤ %.1f× --unsafe-no-fsync's", targetFsyncPerNoFsync),
			fsyncMeasured(u1, n), u1.CPU[0].MicrosPerRow, n.CPU[0].MicrosPerRow, targetFsyncPerNoFsync)
	}
	if n, ok := findTxnCell(results, ServerChuteNoFsync); ok && okT1 && n.Txn == t1.Txn && len(t1.CPU) > 0 && len(n.CPU) > 0 {
		ratio("5b", fmt.Sprintf("the same, txn-%d", t1.Txn),
			fsyncMeasured(t1, n), t1.CPU[0].MicrosPerRow, n.CPU[0].MicrosPerRow, targetFsyncPerNoFsync)
	}
	return out
}

// refusedPuts is the failed puts of r: of all its runs when it folds
// several.
func refusedPuts(r Result) int64 {
	if r.Spread != nil {
		return r.Spread.Errors
	}
	return r.Errors
}

// runsOf names the runs a result folds: "1 run" or "3 runs".
func runsOf(r Result) string {
	if r.Spread != nil && r.Spread.Runs > 1 {
		return fmt.Sprintf("%d runs", r.Spread.Runs)
	}
	return "1 run"
}

// chPerRow is the ClickHouse process's µs per row, -1 when not metered.
func chPerRow(c *NodeCPU) float64 {
	if c == nil {
		return -1 // not metered: its targets are left out
	}
	return c.MicrosPerRow
}

// chMeasured names the figures of a ClickHouse floor target.
func chMeasured(r Result, f RawResult) string {
	return fmt.Sprintf("ClickHouse %.2f µs/row at %.0f rows/s (%.0f rows per insert) ÷ floor %.2f µs/row (%d rows per insert)",
		chPerRow(r.ClickHouseCPU), rowsPerSec(r), rowsPerInsert(r), chPerRow(f.ClickHouseCPU), f.BatchRows)
}

// threeMeasured names the figures of a three-node target.
func threeMeasured(three, one Result) string {
	return fmt.Sprintf("3 nodes %s µs/row ÷ 1 node %.2f µs/row", perRowSum(three.CPU), one.CPU[0].MicrosPerRow)
}

// fsyncMeasured names the figures of a fsync target: the CPU per row of
// the node that fsyncs, with the puts one fsync covered when known, over
// that of the node that does not.
func fsyncMeasured(fsync, noFsync Result) string {
	per := ""
	if q := fsync.QueueLog; q != nil && q.Fsyncs > 0 {
		per = fmt.Sprintf(" (%.1f puts per fsync)", q.RecordsPerFsync)
	}
	return fmt.Sprintf("fsync %.2f µs/row%s ÷ no fsync %.2f µs/row", fsync.CPU[0].MicrosPerRow, per, noFsync.CPU[0].MicrosPerRow)
}

// rowsPerSec is r's rows/s, zero when it did not watch its rows.
func rowsPerSec(r Result) float64 {
	if r.Rows == nil {
		return 0
	}
	return r.Rows.RowsPerSec
}

// rowsPerInsert is r's rows per insert, zero when not known.
func rowsPerInsert(r Result) float64 {
	if r.Rows == nil {
		return 0
	}
	return r.Rows.RowsPerInsert
}

// findFloor returns the ClickHouse floor of the chute cells of txn puts
// per call (0: unary).
func findFloor(floors []RawResult, txn int) (RawResult, bool) {
	for _, f := range floors {
		if f.Txn == txn {
			return f, true
		}
	}
	return RawResult{}, false
}

// findCell returns the first unpaced result of server with txn puts per
// call (0: unary); with rows, only one that watched its rows.
func findCell(results []Result, server string, txn int, rows bool) (Result, bool) {
	for _, r := range results {
		if r.Server == server && r.Txn == txn && r.Rate == 0 && (!rows || r.Rows != nil) {
			return r, true
		}
	}
	return Result{}, false
}

// findTxnCell returns the first unpaced txn result of server that watched
// its rows.
func findTxnCell(results []Result, server string) (Result, bool) {
	for _, r := range results {
		if r.Server == server && r.Txn > 0 && r.Rate == 0 && r.Rows != nil {
			return r, true
		}
	}
	return Result{}, false
}

// valueKeyPlus writes a row's bytes beyond its value and key, which a
// queue kept off the Go heap can bring below zero, as "value + key + n B"
// or "value + key − n B".
func valueKeyPlus(over float64) string {
	if over < -0.5 {
		return fmt.Sprintf("value + key − %.0f B", -over)
	}
	return fmt.Sprintf("value + key + %.0f B", max(over, 0))
}
