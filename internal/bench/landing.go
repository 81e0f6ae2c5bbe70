package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// pollInterval is the period of the row counts of a paced run, the
// resolution of its put-to-row latencies; of the waits for records and
// rows outside a measured phase too.
const pollInterval = 10 * time.Millisecond

// throughputPollInterval is the period of the row counts of a run that is
// not paced, which measures throughput: each count costs ClickHouse CPU
// on the machine the server under test shares, so counting every 10 ms
// would take a share of a core from it. Over a run of seconds, 50 ms
// between counts changes rows/s by little.
const throughputPollInterval = 50 * time.Millisecond

// errWatchStopped ends a row watch stopped before its rows were in.
var errWatchStopped = errors.New("bench: row watch stopped")

// rowPoll is a count of every table of a run, less what each held before
// the measured phase.
type rowPoll struct {
	at     time.Time
	counts []int64
}

// rowWatch counts the rows of a run's tables every period from the
// start of its measured phase until they hold the rows it is told to wait
// for. Its goroutine is its own: finish or stop ends it and waits for it.
type rowWatch struct {
	url    string
	period time.Duration
	tables []string
	base   []int64 // rows each table held before the measured phase
	before insertEvents

	want     chan landWant
	stopc    chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	landed   atomic.Int64 // rows counted at the last poll, for progress

	// polls (one per change of the counts) and err are written by the
	// goroutine only; read them once done is closed.
	polls []rowPoll
	err   error
}

// startRowWatch reads ClickHouse's insert counters, then polls tables
// (which held base rows each) every period until finish or stop.
func startRowWatch(ctx context.Context, url string, period time.Duration, tables []string, base []int64) (*rowWatch, error) {
	before, err := chInsertEvents(ctx, url)
	if err != nil {
		return nil, err
	}
	w := &rowWatch{
		url: url, period: period, tables: tables, base: base, before: before,
		want:  make(chan landWant, 1),
		stopc: make(chan struct{}),
		done:  make(chan struct{}),
	}
	go w.loop(ctx)
	return w, nil
}

// loop polls until the counts cover the rows finish asked for, timeout
// after it asked, a count fails, stop, or ctx ends.
func (w *rowWatch) loop(ctx context.Context) {
	defer close(w.done)
	tick := time.NewTicker(w.period)
	defer tick.Stop()
	var (
		want     []int64
		deadline time.Time
		timeout  time.Duration
	)
	for {
		counts, err := chCounts(ctx, w.url, w.tables)
		if err != nil {
			w.err = err
			return
		}
		at := time.Now()
		var total int64
		for i := range counts {
			counts[i] -= w.base[i]
			total += counts[i]
		}
		if n := len(w.polls); n == 0 || !slices.Equal(w.polls[n-1].counts, counts) {
			w.polls = append(w.polls, rowPoll{at: at, counts: counts})
		}
		w.landed.Store(total)
		if want != nil {
			if covers(counts, want) {
				return
			}
			if at.After(deadline) {
				var sum int64
				for _, n := range want {
					sum += n
				}
				w.err = fmt.Errorf("bench: only %d of %d rows reached ClickHouse within %v of the last put", total, sum, timeout)
				return
			}
		}
		select {
		case lw := <-w.want:
			want, timeout = lw.rows, lw.timeout
			deadline = time.Now().Add(timeout)
		case <-tick.C:
		case <-w.stopc:
			w.err = errWatchStopped
			return
		case <-ctx.Done():
			w.err = fmt.Errorf("bench: interrupted waiting for rows: %w", ctx.Err())
			return
		}
	}
}

// landWant is what finish tells the watch: the rows each table must hold
// beyond its base, and how long they may take.
type landWant struct {
	rows    []int64
	timeout time.Duration
}

// covers reports whether every count is at least its want.
func covers(counts, want []int64) bool {
	for i, w := range want {
		if counts[i] < w {
			return false
		}
	}
	return true
}

// finish waits until the tables hold want rows each (beyond their base),
// at most timeout, and returns the watch's error.
func (w *rowWatch) finish(want []int64, timeout time.Duration) error {
	w.want <- landWant{rows: slices.Clone(want), timeout: timeout}
	<-w.done
	return w.err
}

// stop ends the watch and waits for it. It is idempotent, and harmless
// after finish.
func (w *rowWatch) stop() {
	w.stopOnce.Do(func() { close(w.stopc) })
	<-w.done
}

// result computes what the watch saw of a measured phase that started at
// start and made acks. Call it after finish returned nil.
func (w *rowWatch) result(ctx context.Context, start time.Time, acks []ack) (*RowsResult, error) {
	last := w.polls[len(w.polls)-1]
	r := &RowsResult{Elapsed: last.at.Sub(start)}
	for _, n := range last.counts {
		r.Rows += n
	}
	if r.Elapsed > 0 {
		r.RowsPerSec = float64(r.Rows) / r.Elapsed.Seconds()
	}
	r.P50, r.P99, r.P999 = weightedPercentiles(rowLatencies(start, acks, w.polls, len(w.tables)))
	after, err := chInsertEvents(ctx, w.url)
	if err != nil {
		return nil, err
	}
	if r.Inserts = after.queries - w.before.queries; r.Inserts > 0 {
		r.RowsPerInsert = float64(after.rows-w.before.rows) / float64(r.Inserts)
	}
	return r, nil
}

// rowLatencies returns the put-to-row latency of every acknowledged row:
// a table's rows are taken to land in the order their calls were
// answered (a queue keeps its order, and its inserts too), so the rows of
// the i-th answered call are in once a poll counts all rows answered up to
// it; their latency runs from the call's start to that poll. Rows no poll
// covers are left out.
func rowLatencies(start time.Time, acks []ack, polls []rowPoll, tables int) []weighted {
	byTable := make([][]ack, tables)
	for _, a := range acks {
		byTable[a.table] = append(byTable[a.table], a)
	}
	out := make([]weighted, 0, len(acks))
	for t, as := range byTable {
		slices.SortFunc(as, func(a, b ack) int { return cmp.Compare(a.done, b.done) })
		var cum int64
		p := 0
		for _, a := range as {
			cum += int64(a.rows)
			for p < len(polls) && polls[p].counts[t] < cum {
				p++
			}
			if p == len(polls) {
				break
			}
			out = append(out, weighted{d: max(polls[p].at.Sub(start.Add(a.sent)), 0), n: int64(a.rows)})
		}
	}
	return out
}

// settleRows polls tables until each holds at least want rows, within
// timeout, and returns the counts.
func settleRows(ctx context.Context, url string, tables []string, want []int64, timeout time.Duration) ([]int64, error) {
	deadline := time.Now().Add(timeout)
	for {
		counts, err := chCounts(ctx, url, tables)
		if err != nil {
			return nil, err
		}
		if covers(counts, want) {
			return counts, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: tables hold %v rows, want %v, after %v", counts, want, timeout)
		}
		if !sleepUntil(ctx, time.Now().Add(pollInterval)) {
			return nil, fmt.Errorf("bench: interrupted waiting for rows: %w", ctx.Err())
		}
	}
}
