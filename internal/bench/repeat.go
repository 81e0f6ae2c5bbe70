package bench

import (
	"cmp"
	"slices"
	"time"
)

// maxRepeat bounds --repeat: each repeat is a whole run of every cell it
// applies to.
const maxRepeat = 9

// Spread is what the runs of a repeated cell measured besides the
// medians its Result shows.
type Spread struct {
	// Runs is the number of runs; the Result's figures are their
	// medians.
	Runs int `json:"runs"`
	// MinPutsPerSec and MaxPutsPerSec bound the runs' puts/s.
	MinPutsPerSec float64 `json:"min_puts_per_sec"`
	MaxPutsPerSec float64 `json:"max_puts_per_sec"`
	// MinRowsPerSec and MaxRowsPerSec bound the runs' rows/s; zero when
	// the runs did not watch their rows.
	MinRowsPerSec float64 `json:"min_rows_per_sec,omitempty"`
	MaxRowsPerSec float64 `json:"max_rows_per_sec,omitempty"`
	// Errors is the failed puts of all the runs together: a refusal in
	// any run counts, not only in the median one.
	Errors int64 `json:"errors"`
	// MinMicrosPerRow and MaxMicrosPerRow bound the runs' CPU µs per
	// row of the server, its nodes summed; MinClickHouseMicrosPerRow
	// and MaxClickHouseMicrosPerRow the ClickHouse process's. Zero: not
	// measured.
	MinMicrosPerRow           float64 `json:"min_cpu_us_per_row,omitempty"`
	MaxMicrosPerRow           float64 `json:"max_cpu_us_per_row,omitempty"`
	MinClickHouseMicrosPerRow float64 `json:"min_clickhouse_cpu_us_per_row,omitempty"`
	MaxClickHouseMicrosPerRow float64 `json:"max_clickhouse_cpu_us_per_row,omitempty"`
}

// medianResult folds the runs of one cell, in run order, into one Result:
// the run whose rate is the median (rows/s when the runs watched their
// rows, else puts/s; the lower middle of an even count) gives the counts
// and the memory, and every rate, latency percentile and CPU figure is
// the median of that figure over the runs, each on its own (the queue
// log's fsyncs/s and records per fsync too). With more than one run,
// Spread holds the count, the extremes of the rates and of the CPU per
// row, and the failed puts of all the runs. One
// run is returned as it is; none gives a zero Result.
func medianResult(runs []Result) Result {
	if len(runs) <= 1 {
		if len(runs) == 0 {
			return Result{}
		}
		return runs[0]
	}
	rows := runs[0].Rows != nil
	for _, r := range runs {
		rows = rows && r.Rows != nil
	}
	rate := func(r Result) float64 {
		if rows {
			return r.Rows.RowsPerSec
		}
		return r.PutsPerSec
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rate(runs[a]), rate(runs[b])) })
	out := runs[order[(len(runs)-1)/2]]

	pick := func(f func(Result) float64) []float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return v
	}
	dur := func(f func(Result) time.Duration) time.Duration {
		return time.Duration(median(pick(func(r Result) float64 { return float64(f(r)) })))
	}
	puts := pick(func(r Result) float64 { return r.PutsPerSec })
	out.PutsPerSec = median(puts)
	out.P50 = dur(func(r Result) time.Duration { return r.P50 })
	out.P99 = dur(func(r Result) time.Duration { return r.P99 })
	out.P999 = dur(func(r Result) time.Duration { return r.P999 })
	sp := &Spread{Runs: len(runs), MinPutsPerSec: slices.Min(puts), MaxPutsPerSec: slices.Max(puts)}
	if rows {
		rw := *out.Rows
		perSec := pick(func(r Result) float64 { return r.Rows.RowsPerSec })
		rw.RowsPerSec = median(perSec)
		rw.P50 = dur(func(r Result) time.Duration { return r.Rows.P50 })
		rw.P99 = dur(func(r Result) time.Duration { return r.Rows.P99 })
		rw.P999 = dur(func(r Result) time.Duration { return r.Rows.P999 })
		rw.RowsPerInsert = median(pick(func(r Result) float64 { return r.Rows.RowsPerInsert }))
		out.Rows = &rw
		sp.MinRowsPerSec, sp.MaxRowsPerSec = slices.Min(perSec), slices.Max(perSec)
	}
	for _, r := range runs {
		sp.Errors += r.Errors
	}
	perRow := pick(func(r Result) float64 { return sumPerRow(r.CPU) })
	sp.MinMicrosPerRow, sp.MaxMicrosPerRow = slices.Min(perRow), slices.Max(perRow)
	if out.ClickHouseCPU != nil {
		ch := pick(func(r Result) float64 {
			if r.ClickHouseCPU == nil {
				return 0
			}
			return r.ClickHouseCPU.MicrosPerRow
		})
		sp.MinClickHouseMicrosPerRow, sp.MaxClickHouseMicrosPerRow = slices.Min(ch), slices.Max(ch)
	}
	out.CPU = medianCPU(runs, out.CPU)
	out.ClickHouseCPU = medianProc(runs, out.ClickHouseCPU, func(r Result) *NodeCPU { return r.ClickHouseCPU })
	out.ClientCPU = medianProc(runs, out.ClientCPU, func(r Result) *NodeCPU { return r.ClientCPU })
	out.QueueLog = medianQueueLog(runs, out.QueueLog)
	out.Spread = sp
	return out
}

// medianCPU is base (one run's CPU figures) with each node's figures the
// median over the runs that measured the same nodes in the same order;
// base as it is when any run measured others.
func medianCPU(runs []Result, base []NodeCPU) []NodeCPU {
	for _, r := range runs {
		if len(r.CPU) != len(base) {
			return base
		}
		for i := range base {
			if r.CPU[i].Node != base[i].Node {
				return base
			}
		}
	}
	out := slices.Clone(base)
	for i := range out {
		c := make([]NodeCPU, len(runs))
		for j, r := range runs {
			c[j] = r.CPU[i]
		}
		out[i] = medianNodeCPU(out[i].Node, c)
	}
	return out
}

// medianProc is base (one run's figures of a process) with each figure
// the median over the runs, which get picks the process's figures of;
// base as it is when any run has none.
func medianProc(runs []Result, base *NodeCPU, get func(Result) *NodeCPU) *NodeCPU {
	if base == nil {
		return nil
	}
	c := make([]NodeCPU, len(runs))
	for i, r := range runs {
		p := get(r)
		if p == nil {
			return base
		}
		c[i] = *p
	}
	m := medianNodeCPU(base.Node, c)
	return &m
}

// medianNodeCPU is the figures of node, each the median of c's.
func medianNodeCPU(node string, c []NodeCPU) NodeCPU {
	of := func(f func(NodeCPU) float64) float64 {
		v := make([]float64, len(c))
		for i, x := range c {
			v[i] = f(x)
		}
		return median(v)
	}
	return NodeCPU{
		Node:           node,
		Seconds:        of(func(x NodeCPU) float64 { return x.Seconds }),
		MicrosPerPut:   of(func(x NodeCPU) float64 { return x.MicrosPerPut }),
		MicrosPerRow:   of(func(x NodeCPU) float64 { return x.MicrosPerRow }),
		SyscallsPerRow: of(func(x NodeCPU) float64 { return x.SyscallsPerRow }),
		SwitchesPerRow: of(func(x NodeCPU) float64 { return x.SwitchesPerRow }),
	}
}

// medianQueueLog is base (one run's queue log figures) with fsyncs/s and
// records per fsync the medians over the runs; base as it is when any
// run did not read the log.
func medianQueueLog(runs []Result, base *QueueLogCount) *QueueLogCount {
	if base == nil {
		return nil
	}
	perSec := make([]float64, len(runs))
	perFsync := make([]float64, len(runs))
	for i, r := range runs {
		if r.QueueLog == nil {
			return base
		}
		perSec[i], perFsync[i] = r.QueueLog.FsyncsPerSec, r.QueueLog.RecordsPerFsync
	}
	out := *base
	out.FsyncsPerSec, out.RecordsPerFsync = median(perSec), median(perFsync)
	return &out
}

// median is the median of v, which it sorts in place: the middle value,
// or the mean of the two middle ones; zero for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m]
	}
	return (v[m-1] + v[m]) / 2
}
