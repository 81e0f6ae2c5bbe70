package bench

import (
	"context"
	"fmt"
	"log/slog"
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
