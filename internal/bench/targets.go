package bench

import (
	"fmt"
	"time"
)

// Target limits of the benchmark, measured on 2 cores with the client on the
// same machine, ratios from one run.
const (
	// targetUnaryPerNoop: unary puts to a ch: queue, 100 clients, one
	// node, at least this fraction of the no-op server's rate.
	targetUnaryPerNoop = 0.90
	// targetRowsPerPuts: "and rows land at the same rate", read as rows/s
	// at least this fraction of the puts/s of the same run.
	targetRowsPerPuts = 0.95
	// targetTxnRowsPerNoop: txn batches, one node, rows landing at least
	// this fraction of the no-op server's txn rate.
	targetTxnRowsPerNoop = 0.85
	// targetThreePerOne: three nodes, producers on non-dispatcher nodes,
	// at least this fraction of the one-node rate.
	targetThreePerOne = 0.70
	// targetPutToRowP99: put-to-row p99 at half the maximum rate.
	targetPutToRowP99 = 100 * time.Millisecond
	// targetRowOverhead: a queued row costs at most its value plus this.
	targetRowOverhead = 128
	// targetKVPerEtcd: plain key puts, 100 clients, three nodes, at
	// least this fraction of etcd's rate on three members.
	targetKVPerEtcd = 1.00
	// targetUnaryFsyncPerNoFsync: unary puts, one node whose queue log
	// fsyncs, at least this fraction of the rate of one started with
	// --unsafe-no-fsync.
	targetUnaryFsyncPerNoFsync = 0.70
	// targetTxnFsyncPerNoFsync: the same for txn batches.
	targetTxnFsyncPerNoFsync = 0.85
)

// Target is one target checked against the figures of a run.
type Target struct {
	// ID is the target's number, with a letter when it is
	// checked twice.
	ID string `json:"id"`
	// Goal is the target, in words.
	Goal string `json:"goal"`
	// Measured names the figures compared.
	Measured string `json:"measured"`
	// Value is what was measured (a ratio, milliseconds or bytes) and
	// Limit the target's bound; Got and Want are both as text.
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Got   string  `json:"got"`
	Want  string  `json:"want"`
	Pass  bool    `json:"pass"`
}

// evaluateTargets checks every target whose cells were measured.
func evaluateTargets(results []Result, mem *MemoryResult) []Target {
	var out []Target
	ratio := func(id, goal, measured string, num, den, limit float64) {
		if den <= 0 {
			return
		}
		v := num / den
		out = append(out, Target{ID: id, Goal: goal, Measured: measured, Value: v, Limit: limit,
			Got: fmt.Sprintf("%.2f (%.0f%%)", v, 100*v), Want: fmt.Sprintf("≥ %.2f", limit), Pass: v >= limit})
	}
	u1, okU1 := findCell(results, ServerChute, 0, true)
	t1, okT1 := findTxnCell(results, ServerChute)
	if okU1 {
		if n, ok := findCell(results, ServerNoop, 0, false); ok {
			ratio("1a", "unary puts to a ch: queue, one node: ≥ 90% of the no-op server's rate",
				fmt.Sprintf("chute %.0f puts/s ÷ no-op %.0f puts/s", u1.PutsPerSec, n.PutsPerSec),
				u1.PutsPerSec, n.PutsPerSec, targetUnaryPerNoop)
		}
		ratio("1b", "and rows land at the same rate (read: rows/s ≥ 95% of puts/s)",
			fmt.Sprintf("rows %.0f/s ÷ puts %.0f/s", u1.Rows.RowsPerSec, u1.PutsPerSec),
			u1.Rows.RowsPerSec, u1.PutsPerSec, targetRowsPerPuts)
	}
	if okT1 {
		if n, ok := findCell(results, ServerNoop, t1.Txn, false); ok {
			ratio("2", fmt.Sprintf("txn-%d, one node: rows landing ≥ 85%% of the no-op server's txn-%d rate", t1.Txn, t1.Txn),
				fmt.Sprintf("chute %.0f rows/s ÷ no-op %.0f puts/s", t1.Rows.RowsPerSec, n.PutsPerSec),
				t1.Rows.RowsPerSec, n.PutsPerSec, targetTxnRowsPerNoop)
		}
	}
	if u3, ok := findCell(results, ServerChute3, 0, true); ok && okU1 {
		ratio("3a", "three nodes, producers on the non-dispatcher nodes, unary: ≥ 70% of one node",
			fmt.Sprintf("3 nodes %.0f rows/s ÷ 1 node %.0f rows/s", u3.Rows.RowsPerSec, u1.Rows.RowsPerSec),
			u3.Rows.RowsPerSec, u1.Rows.RowsPerSec, targetThreePerOne)
	}
	if t3, ok := findTxnCell(results, ServerChute3); ok && okT1 {
		ratio("3b", fmt.Sprintf("three nodes, producers on the non-dispatcher nodes, txn-%d: ≥ 70%% of one node", t3.Txn),
			fmt.Sprintf("3 nodes %.0f rows/s ÷ 1 node %.0f rows/s", t3.Rows.RowsPerSec, t1.Rows.RowsPerSec),
			t3.Rows.RowsPerSec, t1.Rows.RowsPerSec, targetThreePerOne)
	}
	if h, ok := findPaced(results, ServerChute); ok {
		ms := float64(h.Rows.P99) / float64(time.Millisecond)
		out = append(out, Target{ID: "4", Goal: "put-to-row p99 under 100 ms at half the maximum rate",
			Measured: fmt.Sprintf("one node, unary, paced at %.0f puts/s (ran at %.0f)", h.Rate, h.PutsPerSec),
			Value:    ms, Limit: float64(targetPutToRowP99 / time.Millisecond),
			Got: fmt.Sprintf("%.1f ms", ms), Want: fmt.Sprintf("< %d ms", targetPutToRowP99/time.Millisecond),
			Pass: h.Rows.P99 < targetPutToRowP99})
	}
	if mem != nil {
		out = append(out, Target{ID: "5", Goal: "a queued row costs at most its value size plus 128 bytes",
			Measured: fmt.Sprintf("live heap %.0f B per row of a %d-byte value, %d rows", mem.HeapPerRow, mem.ValSize, mem.Rows),
			Value:    mem.OverheadPerRow, Limit: targetRowOverhead,
			Got: fmt.Sprintf("value + %.0f B", mem.OverheadPerRow), Want: fmt.Sprintf("≤ value + %d B", targetRowOverhead),
			Pass: mem.OverheadPerRow <= targetRowOverhead})
	}
	if c, ok := findCell(results, ServerChuteKV3, 0, false); ok {
		if e, ok := findCell(results, ServerEtcd3, 0, false); ok {
			ratio("6", fmt.Sprintf("KV puts, three nodes, %d clients: at least etcd's rate on three members", c.Clients),
				fmt.Sprintf("chute %.0f puts/s ÷ etcd %.0f puts/s", c.PutsPerSec, e.PutsPerSec),
				c.PutsPerSec, e.PutsPerSec, targetKVPerEtcd)
		}
	}
	if okU1 {
		if n, ok := findCell(results, ServerChuteNoFsync, 0, true); ok {
			ratio("7a", fmt.Sprintf("unary puts, one node, %d clients: fsync ≥ 70%% of --unsafe-no-fsync", u1.Clients),
				fsyncMeasured(u1, n), u1.PutsPerSec, n.PutsPerSec, targetUnaryFsyncPerNoFsync)
		}
	}
	if okT1 {
		if n, ok := findTxnCell(results, ServerChuteNoFsync); ok && n.Txn == t1.Txn {
			ratio("7b", fmt.Sprintf("txn-%d, one node: fsync ≥ 85%% of --unsafe-no-fsync", t1.Txn),
				fsyncMeasured(t1, n), t1.PutsPerSec, n.PutsPerSec, targetTxnFsyncPerNoFsync)
		}
	}
	return out
}

// fsyncMeasured names the figures of a fsync target: the puts/s of the
// node that fsyncs, with the puts one fsync covered when known, over
// those of the node that does not.
func fsyncMeasured(fsync, noFsync Result) string {
	per := ""
	if q := fsync.QueueLog; q != nil && q.Fsyncs > 0 {
		per = fmt.Sprintf(" (%.1f puts per fsync)", q.RecordsPerFsync)
	}
	return fmt.Sprintf("fsync %.0f puts/s%s ÷ no fsync %.0f puts/s", fsync.PutsPerSec, per, noFsync.PutsPerSec)
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

// findPaced returns the first paced unary result of server that watched
// its rows.
func findPaced(results []Result, server string) (Result, bool) {
	for _, r := range results {
		if r.Server == server && r.Txn == 0 && r.Rate > 0 && r.Rows != nil {
			return r, true
		}
	}
	return Result{}, false
}
