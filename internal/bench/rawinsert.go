package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
)

// rawInsert is the ceiling of the sink: the rows chute would insert,
// posted as JSONEachRow straight to ClickHouse by concurrent posters, each
// with one insert in flight.
type rawInsert struct {
	url       string        // ClickHouse, default user
	rows      int64         // rows in all, at most
	duration  time.Duration // no insert starts after it; zero: MaxRunDuration
	posters   int
	batchRows int // rows per insert, lowered to fit the caps
	valSize   int // bytes per row, as Config.ValSize
	progress  io.Writer
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
	var wg sync.WaitGroup
	for _, p := range posters {
		wg.Go(func() {
			for pctx.Err() == nil && time.Now().Before(deadline) && next.Add(1) <= batches {
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
	elapsed := time.Since(start)

	res := RawResult{BatchRows: batch, BatchBytes: len(posters[0].body), Posters: ri.posters, ValSize: ri.valSize, Elapsed: elapsed}
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
