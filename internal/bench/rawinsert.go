package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// rawMaxBatchRows and rawMaxBatchBytes are chute's default caps of one
	// insert (dispatch: 100000 rows, 8 MiB); a raw batch stays under both.
	rawMaxBatchRows  = 100_000
	rawMaxBatchBytes = 8 << 20
	// rawDefaultBatchRows is the raw batch when no chute batch size is
	// known.
	rawDefaultBatchRows = 10_000
	// floorBatchRows is the batch of the ClickHouse floors: large enough
	// that ClickHouse's cost per insert hardly shows per row.
	floorBatchRows = 30_000
)

// rawInsert is the rows chute would insert, posted as JSONEachRow
// straight to ClickHouse by concurrent posters, each with one insert in
// flight: unpaced, the ceiling of the sink; paced in large batches, a
// ClickHouse floor (floor.go).
type rawInsert struct {
	url       string        // ClickHouse, default user
	rows      int64         // rows in all, at most
	duration  time.Duration // no insert starts after it; zero: MaxRunDuration
	posters   int
	batchRows int // rows per insert, lowered to fit the caps
	valSize   int // bytes per row, as Config.ValSize
	// rate paces the inserts at this many rows per second in all: insert
	// i starts no earlier than i batches' worth of rows after the first,
	// and the run lasts at least rows/rate, as the run it stands for
	// did, counting the rows (poll) until then. Zero: every poster posts
	// as fast as its last insert returns.
	rate float64
	// poll, when set, counts the table's rows this often while the
	// inserts go on, as a watched run counts its rows. Zero: no counts.
	poll     time.Duration
	progress io.Writer
}

// RawResult is what the raw inserts measured.
type RawResult struct {
	// Rows is the number of rows inserted, counted in the table after.
	Rows       int64 `json:"rows"`
	Inserts    int64 `json:"inserts"`
	BatchRows  int   `json:"batch_rows"`
	BatchBytes int   `json:"batch_bytes"`
	Posters    int   `json:"posters"`
	ValSize    int   `json:"val_size"`
	// Elapsed runs from the first insert's start to the last one's answer.
	Elapsed    time.Duration `json:"elapsed_ns"`
	RowsPerSec float64       `json:"rows_per_sec"`
	// P50 and P99 are nearest-rank percentiles of the inserts' latencies.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// Rate is the pace asked for in rows/s; zero: unpaced.
	Rate float64 `json:"rate,omitempty"`
	// Txn, on a floor, is the puts per call of the chute cells it is the
	// floor of (zero: unary).
	Txn int `json:"txn,omitempty"`
	// ClickHouseCPU is the CPU time of the ClickHouse process from the
	// table's creation to the count after the last insert, per row
	// inserted, and ClientCPU the bench process's; nil: not measured.
	ClickHouseCPU *NodeCPU `json:"clickhouse_cpu,omitempty"`
	ClientCPU     *NodeCPU `json:"client_cpu,omitempty"`
	// Runs is the number of runs folded into this one: the run whose
	// ClickHouse µs/row is the median, its extremes in
	// MinClickHouseMicrosPerRow and MaxClickHouseMicrosPerRow. Zero or
	// one: a single run.
	Runs                      int     `json:"runs,omitempty"`
	MinClickHouseMicrosPerRow float64 `json:"min_clickhouse_cpu_us_per_row,omitempty"`
	MaxClickHouseMicrosPerRow float64 `json:"max_clickhouse_cpu_us_per_row,omitempty"`
}

// poster is one raw-insert goroutine's state; only it writes it until
// runRawInsert has waited for it.
type poster struct {
	body []byte
	lat  []time.Duration
	err  error
}

// runRawInsert creates a table, has ri.posters goroutines post one
// prebuilt batch each over and over until ri.rows rows have been sent or
// ri.duration has passed, checks the table's count and drops it. Any
// failed insert fails the run.
func runRawInsert(ctx context.Context, ri rawInsert) (RawResult, error) {
	if ri.posters < 1 || ri.rows < 1 {
		return RawResult{}, fmt.Errorf("bench: raw insert: %d posters, %d rows, want at least 1 of each", ri.posters, ri.rows)
	}
	rowLen := len(appendRow(nil, 1_000_000_000, ri.valSize, bytes.Repeat([]byte("x"), ri.valSize))) + 1
	batch := max(1, min(ri.batchRows, rawMaxBatchRows, rawMaxBatchBytes/rowLen, int(ri.rows)))
	table := "bench_" + newRunID() + "_raw"
	if err := createTable(ctx, ri.url, table); err != nil {
		return RawResult{}, err
	}
	defer func() { _ = dropTable(context.WithoutCancel(ctx), ri.url, table) }() // best effort

	insertURL := strings.TrimSuffix(ri.url, "/") + "/?query=" + url.QueryEscape("INSERT INTO default."+table+" FORMAT JSONEachRow")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: ri.posters, DisableCompression: true}}
	defer client.CloseIdleConnections()

	posters := make([]*poster, ri.posters)
	pad := []byte(strings.Repeat(alphabet, ri.valSize/len(alphabet)+1))
	for i := range posters {
		var b []byte
		for j := range batch {
			b = appendRow(b, int64(i*batch+j), ri.valSize, pad)
			b = append(b, '\n')
		}
		posters[i] = &poster{body: b}
	}

	batches := (ri.rows + int64(batch) - 1) / int64(batch)
	var next atomic.Int64
	budget := ri.duration
	if budget <= 0 || budget > MaxRunDuration {
		budget = MaxRunDuration
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(budget)
	if ri.progress != nil {
		bar := startProgress(ri.progress, "raw JSONEachRow", batches*int64(batch), ri.duration, "rows", func() int64 {
			return min(next.Load(), batches) * int64(batch)
		})
		defer bar.end()
	}
	var interval time.Duration
	if ri.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(batch) / ri.rate)
	}
	var polls sync.WaitGroup
	pollStop := make(chan struct{})
	if ri.poll > 0 {
		polls.Go(func() { pollCounts(pctx, ri.url, table, ri.poll, pollStop, nil) })
	}
	var wg sync.WaitGroup
	for _, p := range posters {
		wg.Go(func() {
			for pctx.Err() == nil && time.Now().Before(deadline) {
				i := next.Add(1) - 1
				if i >= batches || interval > 0 && !sleepUntil(pctx, start.Add(time.Duration(i)*interval)) {
					return
				}
				t0 := time.Now()
				if err := postBatch(pctx, client, insertURL, p.body); err != nil {
					p.err = err
					cancel() // one failure ends the run
					return
				}
				p.lat = append(p.lat, time.Since(t0))
			}
		})
	}
	wg.Wait()
	if ri.rate > 0 {
		sleepUntil(pctx, start.Add(time.Duration(float64(time.Second)*float64(ri.rows)/ri.rate)))
	}
	elapsed := time.Since(start)
	close(pollStop)
	polls.Wait()

	res := RawResult{BatchRows: batch, BatchBytes: len(posters[0].body), Posters: ri.posters, ValSize: ri.valSize, Elapsed: elapsed, Rate: ri.rate}
	var lat []time.Duration
	for _, p := range posters {
		if p.err != nil {
			return RawResult{}, fmt.Errorf("bench: raw insert: %w", p.err)
		}
		lat = append(lat, p.lat...)
	}
	if err := ctx.Err(); err != nil {
		return RawResult{}, fmt.Errorf("bench: raw insert: interrupted: %w", err)
	}
	res.Inserts = int64(len(lat))
	res.P50, res.P99, _ = percentiles(lat)
	counts, err := chCounts(ctx, ri.url, []string{table})
	if err != nil {
		return RawResult{}, err
	}
	if want := res.Inserts * int64(batch); counts[0] != want {
		return RawResult{}, fmt.Errorf("bench: raw insert: %s holds %d rows after %d inserts of %d, want %d", table, counts[0], res.Inserts, batch, want)
	}
	res.Rows = counts[0]
	if elapsed > 0 {
		res.RowsPerSec = float64(res.Rows) / elapsed.Seconds()
	}
	return res, nil
}

// postBatch posts one JSONEachRow batch; anything but 200 is an error.
func postBatch(ctx context.Context, client *http.Client, insertURL string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, insertURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024)) // the error's text, if any
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("insert: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// pollCounts counts table's rows every period until stop is closed or
// ctx ends, adding each count made to n unless nil. A count that fails
// is not retried: the counts only load ClickHouse as a watched run's do.
func pollCounts(ctx context.Context, url, table string, period time.Duration, stop <-chan struct{}, n *atomic.Int64) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := chCounts(ctx, url, []string{table}); err == nil && n != nil {
			n.Add(1)
		}
	}
}

// medianRaw folds the runs of one floor into the run whose ClickHouse
// µs/row is the median (the lower middle of an even count), with the
// number of runs and the extremes of that figure. One run is returned as
// it is; runs without the ClickHouse figure count as zero.
func medianRaw(runs []RawResult) RawResult {
	if len(runs) <= 1 {
		if len(runs) == 0 {
			return RawResult{}
		}
		return runs[0]
	}
	ch := func(r RawResult) float64 {
		if r.ClickHouseCPU == nil {
			return 0
		}
		return r.ClickHouseCPU.MicrosPerRow
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b RawResult) int { return cmp.Compare(ch(a), ch(b)) })
	out := sorted[(len(sorted)-1)/2]
	out.Runs = len(runs)
	out.MinClickHouseMicrosPerRow, out.MaxClickHouseMicrosPerRow = ch(sorted[0]), ch(sorted[len(sorted)-1])
	return out
}
