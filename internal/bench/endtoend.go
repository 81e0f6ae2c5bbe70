package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EndToEnd configures the end-to-end run: rows put to a ClickHouse queue
// of a chute node until they are all in ClickHouse.
type EndToEnd struct {
	Endpoint      string // the chute node's client address
	ClickHouseURL string // the ClickHouse the node inserts into, for counting rows
	Rows          int    // rows in all
	Clients       int    // concurrent producers
	Batch         int    // puts per txn (1: unary puts)
}

// EndToEndResult is what the end-to-end run measured.
type EndToEndResult struct {
	Server     string // the node's label, ServerChute or ServerChuteTraced; set by the caller
	Rows       int
	Clients    int
	Batch      int
	PutsPerSec float64       // rows acknowledged by chute per second
	RowsPerSec float64       // rows landed in ClickHouse per second, first put to last row
	P50, P99   time.Duration // put-to-row latency
	// Trace is set on a run against a traced node; its Spans include the
	// INSERT spans of the ClickHouse batches. Nil: not traced.
	Trace *TraceCount
}

// runEndToEnd creates a table, puts the rows with clientv3 to
// /q/ch:<table>/p/<id>, and polls count() every 5 ms. The put-to-row latency
// of the i-th acknowledged row is the first poll that saw more than i rows
// minus the time its put returned: inserts keep arrival order, so this is
// exact up to the poll period.
func runEndToEnd(ctx context.Context, e EndToEnd, logger *slog.Logger) (EndToEndResult, error) {
	table := "bench_" + newRunID()
	if _, err := chQuery(ctx, e.ClickHouseURL, "CREATE TABLE default."+table+" (id UInt64, v String) ENGINE = MergeTree ORDER BY id"); err != nil {
		return EndToEndResult{}, err
	}
	defer func() { _, _ = chQuery(context.Background(), e.ClickHouseURL, "DROP TABLE IF EXISTS default."+table) }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return EndToEndResult{}, err
	}
	defer cli.Close()

	var (
		mu     sync.Mutex
		acked  []time.Time // put-return time of each row, in acknowledgement order
		next   atomic.Int64
		firstE error
		wg     sync.WaitGroup
	)
	value := strings.Repeat("x", 200)
	start := time.Now()
	for range e.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				first := next.Add(int64(e.Batch)) - int64(e.Batch)
				if first >= int64(e.Rows) {
					return
				}
				n := min(int64(e.Batch), int64(e.Rows)-first)
				ops := make([]clientv3.Op, n)
				for i := range n {
					id := first + i
					ops[i] = clientv3.OpPut(fmt.Sprintf("/q/ch:%s/p/%d", table, id), fmt.Sprintf(`{"id":%d,"v":"%s"}`, id, value))
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := cli.Txn(cctx).Then(ops...).Commit()
				cancel()
				done := time.Now()
				mu.Lock()
				if err != nil {
					if firstE == nil {
						firstE = err
					}
					mu.Unlock()
					return
				}
				for range n {
					acked = append(acked, done)
				}
				mu.Unlock()
			}
		}()
	}

	type poll struct {
		at    time.Time
		count int
	}
	var polls []poll
	deadline := time.Now().Add(MaxRunDuration)
	putsDone := make(chan struct{})
	go func() { wg.Wait(); close(putsDone) }()
	var putsEnd time.Time
	for {
		c, err := chCount(ctx, e.ClickHouseURL, "default."+table)
		if err != nil {
			return EndToEndResult{}, err
		}
		polls = append(polls, poll{time.Now(), c})
		select {
		case <-putsDone:
			if putsEnd.IsZero() {
				putsEnd = time.Now()
			}
		default:
		}
		mu.Lock()
		failed := firstE
		mu.Unlock()
		if failed != nil {
			return EndToEndResult{}, fmt.Errorf("bench: end-to-end put: %w", failed)
		}
		if c >= e.Rows {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return EndToEndResult{}, fmt.Errorf("bench: only %d of %d rows reached ClickHouse", c, e.Rows)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if putsEnd.IsZero() {
		<-putsDone
		putsEnd = time.Now()
	}
	landed := polls[len(polls)-1].at
	lat := make([]time.Duration, 0, len(acked))
	p := 0
	for i, at := range acked {
		for p < len(polls) && polls[p].count <= i {
			p++
		}
		if p == len(polls) {
			break
		}
		lat = append(lat, max(polls[p].at.Sub(at), 0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res := EndToEndResult{
		Rows: e.Rows, Clients: e.Clients, Batch: e.Batch,
		PutsPerSec: float64(e.Rows) / putsEnd.Sub(start).Seconds(),
		RowsPerSec: float64(e.Rows) / landed.Sub(start).Seconds(),
	}
	if len(lat) > 0 {
		res.P50 = lat[len(lat)*50/100]
		res.P99 = lat[min(len(lat)*99/100, len(lat)-1)]
	}
	logger.Info("end-to-end run finished", "rows", e.Rows, "rows_per_sec", int(res.RowsPerSec), "p50", res.P50, "p99", res.P99)
	return res, nil
}

// writeEndToEnd prints the end-to-end results as a markdown table, then
// the spans the traced runs sent.
func writeEndToEnd(w io.Writer, rs []EndToEndResult) error {
	var b strings.Builder
	b.WriteString("\n| server | rows | clients | puts per txn | puts/s | rows/s in ClickHouse | put-to-row p50 ms | p99 ms |\n")
	b.WriteString("|--------|-----:|--------:|-------------:|-------:|---------------------:|------------------:|-------:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.0f | %.0f | %.1f | %.1f |\n", r.Server, r.Rows, r.Clients, r.Batch, r.PutsPerSec, r.RowsPerSec,
			float64(r.P50.Microseconds())/1000, float64(r.P99.Microseconds())/1000)
	}
	for _, r := range rs {
		if r.Trace != nil {
			fmt.Fprintf(&b, "\nspans received by the bench's OTLP sink in the %s run of %d rows, %d puts per txn: %d, for %d KV calls and their INSERT batches\n",
				r.Server, r.Rows, r.Batch, r.Trace.Spans, r.Trace.Calls)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// chQuery runs a statement over ClickHouse's HTTP interface and returns
// the body.
func chQuery(ctx context.Context, url, sql string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: clickhouse: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("bench: clickhouse: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

func chCount(ctx context.Context, url, table string) (int, error) {
	out, err := chQuery(ctx, url, "SELECT count() FROM "+table)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}
