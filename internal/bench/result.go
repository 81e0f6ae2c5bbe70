package bench

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Result is the outcome of one measured run. Durations marshal to JSON as
// integer nanoseconds.
type Result struct {
	// Server labels the server measured, e.g. ServerChute or ServerNoop.
	Server string `json:"server"`
	// Nodes is the number of chute nodes of the cluster measured; zero for
	// a server that is not a chute cluster of the matrix.
	Nodes   int `json:"nodes,omitempty"`
	Clients int `json:"clients"`
	// Conns is the number of connections actually opened (at most Clients).
	Conns   int `json:"conns"`
	KeySize int `json:"key_size"`
	ValSize int `json:"val_size"`
	// Txn is the number of puts per txn; zero for unary puts.
	Txn int `json:"txn,omitempty"`
	// Queues is the number of ClickHouse queues the puts went to; zero for
	// plain keys.
	Queues int `json:"queues,omitempty"`
	// Rate is the pace asked for, in puts per second; zero: unpaced.
	Rate float64 `json:"rate,omitempty"`

	// Puts is the number of measured puts that succeeded.
	Puts int64 `json:"puts"`
	// Calls is the number of measured calls (puts or txns) that
	// succeeded.
	Calls int64 `json:"calls"`
	// Errors is the number of measured puts that failed (all the puts of
	// a failed txn).
	Errors int64 `json:"errors"`
	// FirstError is the text of one failure (the first seen by the first
	// putter that failed), empty when none.
	FirstError string `json:"first_error,omitempty"`

	// Elapsed is the wall time of the measured phase.
	Elapsed time.Duration `json:"elapsed_ns"`
	// PutsPerSec is Puts divided by Elapsed.
	PutsPerSec float64 `json:"puts_per_sec"`
	// P50, P99 and P999 are nearest-rank percentiles of the latencies of
	// successful calls (a txn's is the whole txn's).
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`

	// Rows is set when the run watched its rows land in ClickHouse.
	Rows *RowsResult `json:"rows,omitempty"`
	// PeakRSS is the largest resident memory of each node of the server
	// seen during the run; empty when the bench did not start the server.
	PeakRSS []NodeRSS `json:"peak_rss,omitempty"`
	// CPU is the CPU time each node of the server used during the run,
	// per put and per row; empty when the bench did not start the server.
	CPU []NodeCPU `json:"cpu,omitempty"`
	// ClickHouseCPU is the CPU time of the ClickHouse process over the
	// run, all its threads (inserts, merges, the bench's own counts), per
	// put and per row; nil when the run inserted no rows or the bench
	// does not know the process.
	ClickHouseCPU *NodeCPU `json:"clickhouse_cpu,omitempty"`
	// ClientCPU is the CPU time of the bench's own process over the run:
	// the putters and their clientv3 connections, the row counts, the
	// memory and CPU sampling, and whatever else the process serves
	// meanwhile (the wire proxies of a compression run, the span sink
	// of a traced one). Nil when it could not be read.
	ClientCPU *NodeCPU `json:"client_cpu,omitempty"`

	// Spread is set when the Result folds several runs of one cell: its
	// rates, percentiles and CPU figures are then their medians. Nil: one
	// run.
	Spread *Spread `json:"spread,omitempty"`

	// Trace is set on a run against a traced server. Nil: not traced.
	Trace *TraceCount `json:"trace,omitempty"`

	// QueueLog is what the node's queue log did during the measured
	// phase, on the one-node chute cells of the ClickHouse matrix. Nil:
	// not read.
	QueueLog *QueueLogCount `json:"queue_log,omitempty"`

	// Wire is what the node sent ClickHouse during the run, counted by a
	// proxy in the bench, on the compression cells of the ClickHouse
	// matrix. Nil: not counted.
	Wire *WireCount `json:"wire,omitempty"`
}

// RowsResult is what a run measured of its rows in ClickHouse.
type RowsResult struct {
	// Rows is the number of rows of the measured phase counted in
	// ClickHouse (the puts acknowledged, and any failed put that landed
	// anyway).
	Rows int64 `json:"rows"`
	// Elapsed is the time from the measured phase's start to the first
	// count that held every acknowledged row.
	Elapsed time.Duration `json:"elapsed_ns"`
	// RowsPerSec is Rows divided by Elapsed: the end-to-end rate.
	RowsPerSec float64 `json:"rows_per_sec"`
	// P50, P99 and P999 are put-to-row latencies over rows: from the
	// start of the call that put a row to the first count that held it.
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	// Inserts is the number of INSERT queries ClickHouse counted from the
	// measured phase's start until every row was in (system.events
	// InsertQuery), and RowsPerInsert the rows it counted inserted
	// (InsertedRows) per insert; zero when unknown.
	Inserts       int64   `json:"inserts"`
	RowsPerInsert float64 `json:"rows_per_insert"`
}

// NodeRSS is the peak resident memory of one node during a run.
type NodeRSS struct {
	Node string `json:"node"`
	// Bytes is the largest VmRSS of /proc/<pid>/status sampled every 50 ms.
	Bytes int64 `json:"bytes"`
}

// NodeCPU is the CPU time one process used during a run: user and
// system time of /proc/<pid>/stat from the run's first dial to its end,
// which holds the warmup and, for rows, the wait until they are all in.
type NodeCPU struct {
	Node    string  `json:"node"`
	Seconds float64 `json:"cpu_seconds"`
	// MicrosPerPut is Seconds in microseconds over the run's puts, warmup
	// and measured.
	MicrosPerPut float64 `json:"cpu_us_per_put"`
	// MicrosPerRow is Seconds in microseconds over the rows the run
	// landed, the warmup's included (landedRows); over its puts when it
	// did not watch rows, as for the no-op server, where a put is a row.
	MicrosPerRow float64 `json:"cpu_us_per_row,omitempty"`
	// SyscallsPerRow and SwitchesPerRow are the read and write syscalls
	// and the context switches of the run over the same rows; zero when
	// /proc did not show them (readUsage).
	SyscallsPerRow float64 `json:"syscalls_per_row,omitempty"`
	SwitchesPerRow float64 `json:"switches_per_row,omitempty"`
}

// TraceCount shows that a traced run was traced: the spans the bench's OTLP
// sink received for it, next to the KV calls it made.
type TraceCount struct {
	// Spans is what the sink received from the run's start until the
	// server had exported all of them, or sent none for a while.
	Spans int64 `json:"spans"`
	// Calls is the KV calls the run made: connection probes, warmup and
	// measured calls. At 100% sampling each has one server span, so Spans
	// below Calls means the server's exporter dropped spans.
	Calls int64 `json:"calls"`
}

// WireCount is what a chute node sent ClickHouse during a run, as a TCP
// proxy in the bench between the two counted it, next to what the run
// cost the node and ClickHouse, per row.
type WireCount struct {
	// Compression is the node's --clickhouse-compression.
	Compression string `json:"compression"`
	// Rows is the rows the node inserted during the run: the warmup's
	// puts and the measured phase's rows counted in ClickHouse.
	Rows int64 `json:"rows"`
	// BytesSent is what the node's connections to ClickHouse carried to
	// it (request lines, headers and bodies as sent), BytesReceived what
	// they carried back, Conns their number.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
	Conns         int64 `json:"conns"`
	// BytesPerRow is BytesSent over Rows.
	BytesPerRow float64 `json:"bytes_per_row"`
	// NodeMicrosPerRow is the node's CPU time over the run (Result.CPU)
	// over Rows.
	NodeMicrosPerRow float64 `json:"node_cpu_us_per_row"`
	// ClickHouseMicrosPerRow is the CPU time of ClickHouse's query
	// threads over the run (system.events UserTimeMicroseconds +
	// SystemTimeMicroseconds; the bench's own counts of the rows
	// included, background merges not) over Rows. Zero: not known.
	ClickHouseMicrosPerRow float64 `json:"clickhouse_cpu_us_per_row,omitempty"`
}

// percentiles sorts lat in place and returns its nearest-rank p50, p99 and
// p99.9; zeros when lat is empty.
func percentiles(lat []time.Duration) (p50, p99, p999 time.Duration) {
	if len(lat) == 0 {
		return 0, 0, 0
	}
	slices.Sort(lat)
	return nearestRank(lat, 0.50), nearestRank(lat, 0.99), nearestRank(lat, 0.999)
}

// nearestRank returns the q-quantile of sorted, which must not be empty.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// weighted is a latency shared by n rows.
type weighted struct {
	d time.Duration
	n int64
}

// weightedPercentiles sorts ws in place and returns the nearest-rank p50,
// p99 and p99.9 over the rows they count; zeros when they count none.
func weightedPercentiles(ws []weighted) (p50, p99, p999 time.Duration) {
	var total int64
	for _, w := range ws {
		total += w.n
	}
	if total == 0 {
		return 0, 0, 0
	}
	slices.SortFunc(ws, func(a, b weighted) int { return cmp.Compare(a.d, b.d) })
	at := func(q float64) time.Duration {
		rank := max(int64(math.Ceil(q*float64(total))), 1)
		var seen int64
		for _, w := range ws {
			if seen += w.n; seen >= rank {
				return w.d
			}
		}
		return ws[len(ws)-1].d
	}
	return at(0.50), at(0.99), at(0.999)
}
