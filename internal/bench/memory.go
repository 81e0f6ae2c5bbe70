package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/nodeprobe"
)

const (
	// memoryRows is how many rows the memory cell queues at most.
	memoryRows = 100_000
	// memoryQueueBytes is how many bytes of rows it queues at most: under
	// a queue's default cap (max_bytes, 64 MiB).
	memoryQueueBytes = 48 << 20
	// gcWaitLimit bounds the wait for the garbage collections that show a
	// node's live heap.
	gcWaitLimit = time.Minute
	// gcsAfter is how many collections must end after the wait begins:
	// the first may have started before, the second marked everything
	// allocated up to then.
	gcsAfter = 2
)

// errNoGC marks a node whose collections could not be seen: its live heap
// is unknown.
var errNoGC = errors.New("bench: no garbage collection seen")

// MemoryResult is what queued rows cost the chute node that holds them:
// a ClickHouse queue of a node without ClickHouse keeps every row.
type MemoryResult struct {
	// Rows is the number of rows queued.
	Rows    int64 `json:"rows"`
	ValSize int   `json:"val_size"`
	KeySize int   `json:"key_size"`
	// HeapBytes is the growth of the node's live heap: the heap goals the
	// garbage collector set before and after the rows were queued, each
	// divided by 1+GOGC/100.
	HeapBytes int64 `json:"heap_bytes"`
	// HeapGoalBefore and HeapGoalAfter are those two goals, kept so that
	// a reading that is off shows which of them is.
	HeapGoalBefore int64 `json:"heap_goal_before"`
	HeapGoalAfter  int64 `json:"heap_goal_after"`
	// HeapPerRow is HeapBytes per row, and OverheadPerRow the same less
	// the value: what the queue spends on a row beyond its value.
	HeapPerRow     float64 `json:"heap_per_row"`
	OverheadPerRow float64 `json:"overhead_per_row"`
	// RSSBytes is the growth of the node's resident memory, garbage and
	// the heap's headroom included, and RSSPerRow the same per row.
	RSSBytes  int64   `json:"rss_bytes"`
	RSSPerRow float64 `json:"rss_per_row"`
	// GOGC is the node's go_gc_gogc_percent.
	GOGC int `json:"gogc"`
	// Runs is the number of runs, each on a fresh node, folded into this
	// one: the run whose RSSPerRow is the median, the extremes in
	// MinRSSPerRow and MaxRSSPerRow. Zero or one: a single run.
	Runs         int     `json:"runs,omitempty"`
	MinRSSPerRow float64 `json:"min_rss_per_row,omitempty"`
	MaxRSSPerRow float64 `json:"max_rss_per_row,omitempty"`
}

// medianMemory folds the runs of the memory cell into the run whose RSS
// growth per row is the median (the lower middle of an even count), with
// the number of runs and the extremes of that figure. One run is
// returned as it is.
func medianMemory(runs []MemoryResult) MemoryResult {
	if len(runs) <= 1 {
		if len(runs) == 0 {
			return MemoryResult{}
		}
		return runs[0]
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b MemoryResult) int { return cmp.Compare(a.RSSPerRow, b.RSSPerRow) })
	out := sorted[(len(sorted)-1)/2]
	out.Runs, out.MinRSSPerRow, out.MaxRSSPerRow = len(runs), sorted[0].RSSPerRow, sorted[len(sorted)-1].RSSPerRow
	return out
}

// memoryRowsFor is how many rows of valSize and a message key of keySize
// the memory cell queues: memoryRows, fewer when they would pass
// memoryQueueBytes.
func memoryRowsFor(valSize, keySize, limit int) int {
	per := valSize + keySize + 64 // the queue counts keys and values
	return max(1, min(limit, memoryQueueBytes/per))
}

// measureRowMemory queues rows rows on the node of t, whose ClickHouse
// is unreachable, after a first tranche of as many, and measures what the
// second tranche cost it. cfg gives the sizes and the
// timeouts; its endpoints, tables and load are set here.
func measureRowMemory(ctx context.Context, t *target, cfg Config, rows int) (MemoryResult, error) {
	table := "bench_" + newRunID() + "_mem"
	cfg.Endpoints = []string{t.endpoint}
	cfg.Tables = []string{table}
	cfg.ClickHouseURL, cfg.Claim = "", ""
	cfg.Puts, cfg.Warmup, cfg.Rate, cfg.Duration = rows, 0, 0, 0
	cfg.Txn, cfg.Clients, cfg.Conns = maxTxn, 8, 2
	cfg.Label = t.name + " memory"

	// The queue must exist before the first reading: one put claims it.
	claim := cfg
	claim.Puts, claim.Txn, claim.Clients, claim.Conns, claim.Progress = 1, 0, 1, 1, nil
	if _, err := Run(ctx, claim); err != nil {
		return MemoryResult{}, fmt.Errorf("bench: memory: create the queue: %w", err)
	}
	// Room for both tranches: the queue's default cap holds about one.
	if err := putQueueSettings(ctx, t.endpoint, queueName(table), fmt.Sprintf(`{"max_bytes":%d}`, 4*memoryQueueBytes)); err != nil {
		return MemoryResult{}, fmt.Errorf("bench: memory: %w", err)
	}
	// A first tranche of as many rows, not measured: what does not grow
	// with the queue (the drainer's batches and their requests, which it
	// builds and tries while ClickHouse is unreachable; gRPC's buffers)
	// is in place before the first reading, so the readings' difference
	// is what the second tranche's rows cost.
	if r, err := Run(ctx, cfg); err != nil || r.Errors > 0 {
		return MemoryResult{}, fmt.Errorf("bench: memory: first tranche: %v, %d puts failed (%s)", err, r.Errors, r.FirstError)
	}
	goal0, gogc, err := heapGoalAfterGC(ctx, t.metrics)
	if err != nil {
		return MemoryResult{}, err
	}
	rss0, err := nodeprobe.ReadRSS(t.proc.cmd.Process.Pid)
	if err != nil {
		return MemoryResult{}, err
	}

	r, err := Run(ctx, cfg)
	if err != nil {
		return MemoryResult{}, fmt.Errorf("bench: memory: %w", err)
	}
	if r.Errors > 0 {
		return MemoryResult{}, fmt.Errorf("bench: memory: %d puts failed, e.g. %s", r.Errors, r.FirstError)
	}
	st, err := fetchStatus(ctx, t.metrics)
	if err != nil {
		return MemoryResult{}, err
	}
	q, _ := nodeprobe.Queue(st, queueName(table))
	if want := 2*rows + 1; q.Rows != want {
		return MemoryResult{}, fmt.Errorf("bench: memory: %s holds %d rows of %s, want %d", t.name, q.Rows, queueName(table), want)
	}
	goal1, _, err := heapGoalAfterGC(ctx, t.metrics)
	if err != nil {
		return MemoryResult{}, err
	}
	rss1, err := nodeprobe.ReadRSS(t.proc.cmd.Process.Pid)
	if err != nil {
		return MemoryResult{}, err
	}
	return memoryResult(int64(rows), cfg.ValSize, cfg.KeySize, goal0, goal1, rss0, rss1, gogc), nil
}

// memoryResult computes a MemoryResult from two heap goals and two
// resident sizes.
func memoryResult(rows int64, valSize, keySize int, goal0, goal1, rss0, rss1 int64, gogc int) MemoryResult {
	m := MemoryResult{Rows: rows, ValSize: valSize, KeySize: keySize, GOGC: gogc, RSSBytes: rss1 - rss0,
		HeapGoalBefore: goal0, HeapGoalAfter: goal1}
	m.HeapBytes = int64(float64(goal1-goal0) / (1 + float64(gogc)/100))
	if rows > 0 {
		m.HeapPerRow = float64(m.HeapBytes) / float64(rows)
		m.OverheadPerRow = m.HeapPerRow - float64(valSize)
		m.RSSPerRow = float64(m.RSSBytes) / float64(rows)
	}
	return m
}

// heapGoalAfterGC reads the node's metrics until gcsAfter more garbage
// collections have ended, and returns the heap goal the last one set and
// GOGC. The goal is live heap × (1+GOGC/100), plus a term for stacks and
// globals that barely moves, so a difference of goals shows the growth of
// the live heap. Reading /metrics allocates on the node, so the reads
// themselves bring the collections about.
func heapGoalAfterGC(ctx context.Context, metricsAddr string) (goal int64, gogc int, err error) {
	const gcCount = "go_gc_duration_seconds_count"
	m, err := fetchMetrics(ctx, metricsAddr)
	if err != nil {
		return 0, 0, err
	}
	start, ok := m.Sum(gcCount)
	if !ok {
		return 0, 0, fmt.Errorf("%w: %s has no %s", errNoGC, metricsAddr, gcCount)
	}
	deadline := time.Now().Add(gcWaitLimit)
	for n := start; n < start+gcsAfter; n, _ = m.Sum(gcCount) {
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%w: %s ran %v collections in %v, want %d", errNoGC, metricsAddr, n-start, gcWaitLimit, gcsAfter)
		}
		if m, err = fetchMetrics(ctx, metricsAddr); err != nil {
			return 0, 0, err
		}
	}
	g, okG := m.Sum("go_memstats_next_gc_bytes")
	p, okP := m.Sum("go_gc_gogc_percent")
	if !okG || !okP || p <= 0 {
		return 0, 0, fmt.Errorf("%w: %s shows no heap goal or GOGC (%v)", errNoGC, metricsAddr, p)
	}
	return int64(g), int(p), nil
}

// putQueueSettings writes a queue's settings (/config/queues/{name}) on
// the server at endpoint.
func putQueueSettings(ctx context.Context, endpoint, queue, settings string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: readyAttemptTimeout, Context: ctx})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	_, err = cli.Put(ctx, "/config/queues/"+queue, settings)
	return err
}
