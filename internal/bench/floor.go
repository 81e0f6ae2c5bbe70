package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// runFloor is the ClickHouse floor of the chute cell whose median run is
// r: the rows r landed (its warmup's included) posted as JSONEachRow
// straight to ClickHouse in batches of floorBatchRows by mc.rawPosters
// posters, paced at r's rows/s, the table counted every
// throughputPollInterval as r's rows were, with the CPU of ClickHouse
// (chPID) and of this process metered. It runs n times, each on a fresh
// table, and returns the run of the median ClickHouse µs/row (medianRaw).
func runFloor(ctx context.Context, mc matrixConfig, r Result, n, chPID int, logger *slog.Logger) (RawResult, error) {
	if r.Rows == nil || r.Rows.RowsPerSec <= 0 {
		return RawResult{}, fmt.Errorf("bench: floor of %s, %s: the run has no rows/s", r.Server, callShape(r))
	}
	posters := mc.rawPosters
	if posters <= 0 {
		posters = 2
	}
	ri := rawInsert{
		url: mc.clickhouseURL, rows: landedRows(r, mc.base.Warmup), posters: posters,
		batchRows: floorBatchRows, valSize: mc.base.ValSize, rate: r.Rows.RowsPerSec,
		poll: throughputPollInterval, progress: mc.base.Progress,
	}
	runs := make([]RawResult, 0, max(n, 1))
	for range max(n, 1) {
		logger.Info("floor starting", "of", callShape(r), "rows", ri.rows, "rate", int64(ri.rate), "batch_rows", ri.batchRows)
		f, err := meterRaw(ctx, ri, chPID)
		if err != nil {
			return RawResult{}, fmt.Errorf("bench: floor of %s: %w", callShape(r), err)
		}
		f.Txn = r.Txn
		attrs := []any{"of", callShape(r), "rows_per_sec", int64(f.RowsPerSec), "inserts", f.Inserts}
		if f.ClickHouseCPU != nil {
			attrs = append(attrs, "clickhouse_cpu_us_per_row", f.ClickHouseCPU.MicrosPerRow)
		}
		logger.Info("floor finished", attrs...)
		runs = append(runs, f)
	}
	return medianRaw(runs), nil
}

// meterRaw runs the raw inserts of ri while metering the CPU of this
// process and of ClickHouse (chPID, unless zero), per row inserted.
func meterRaw(ctx context.Context, ri rawInsert, chPID int) (RawResult, error) {
	cpu := startCPU(sideProcs(chPID))
	res, err := runRawInsert(ctx, ri)
	if err != nil {
		return RawResult{}, err
	}
	used := cpu.stop(res.Rows, res.Rows)
	res.ClickHouseCPU = takeCPU(&used, procClickHouse)
	res.ClientCPU = takeCPU(&used, procClient)
	return res, nil
}

// countCostSpan is how long the matrix counts an empty table's rows to
// see what counting costs ClickHouse.
const countCostSpan = 5 * time.Second

// CountCost is what counting a table's rows every Period costs
// ClickHouse, as the watched runs and the floors do: the CPU of the
// ClickHouse process over a span of counts of an empty table and
// nothing else, per second. Its idle work (system logs, merges of
// other tables) is in it too.
type CountCost struct {
	Period time.Duration `json:"period_ns"`
	Counts int64         `json:"counts"`
	// MillisPerSec is the ClickHouse process's CPU milliseconds per
	// second of the span.
	MillisPerSec float64 `json:"cpu_ms_per_sec"`
}

// perRowAt is the share of a run's ClickHouse µs/row that counting
// explains when the run's rows arrive at rowsPerSec.
func (c CountCost) perRowAt(rowsPerSec float64) float64 {
	if rowsPerSec <= 0 {
		return 0
	}
	return c.MillisPerSec * 1000 / rowsPerSec
}

// measureCountCost counts the rows of an empty table every
// throughputPollInterval for span, with the CPU of ClickHouse (chPID)
// metered.
func measureCountCost(ctx context.Context, url string, chPID int, span time.Duration) (CountCost, error) {
	table := "bench_" + newRunID() + "_count"
	if err := createTable(ctx, url, table); err != nil {
		return CountCost{}, err
	}
	defer func() { _ = dropTable(context.WithoutCancel(ctx), url, table) }() // best effort
	cpu := startCPU([]proc{{name: procClickHouse, pid: chPID}})
	start := time.Now()
	stop := make(chan struct{})
	var counts atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { pollCounts(ctx, url, table, throughputPollInterval, stop, &counts) })
	sleepUntil(ctx, start.Add(span))
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return CountCost{}, fmt.Errorf("bench: count cost: interrupted: %w", err)
	}
	used := cpu.stop(1, 1)
	if len(used) == 0 {
		return CountCost{}, fmt.Errorf("bench: count cost: cannot read the cpu of ClickHouse (pid %d)", chPID)
	}
	return CountCost{Period: throughputPollInterval, Counts: counts.Load(),
		MillisPerSec: used[0].Seconds * 1000 / elapsed.Seconds()}, nil
}
