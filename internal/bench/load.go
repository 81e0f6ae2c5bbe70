package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxReserved caps the latencies and acknowledgements reserved per putter.
const maxReserved = 1 << 16

// putter is one load goroutine's state. Only its goroutine writes it, until
// runPhase has waited for it.
type putter struct {
	cli     *clientv3.Client
	payload *payload
	ops     []clientv3.Op   // reused for txns
	lat     []time.Duration // latency of each successful call
	acks    []ack           // each successful call, when the phase records them
	puts    int64           // puts of the successful calls
	errs    int64           // puts of the failed calls
	first   error
}

// ack is one successful call of a phase that records them: when it was
// sent and answered (since the phase's start), which table its rows went
// to, and how many.
type ack struct {
	sent, done time.Duration
	table      int32
	rows       int32
}

// phase is one batch of puts: numbers first..first+puts-1, in calls of
// cfg.perCall puts, started within budget of the phase's start.
type phase struct {
	first  int64
	puts   int64
	budget time.Duration
	// rate paces the calls (puts per second); zero: unpaced.
	rate float64
	// record keeps an ack per successful call (for rows watched).
	record bool
	// label names the phase in progress lines.
	label string
}

// outcome is what a phase measured.
type outcome struct {
	start    time.Time
	lat      []time.Duration // successful call latencies, merged
	acks     []ack           // merged, in no particular order
	puts     int64
	errs     int64
	firstErr error
	elapsed  time.Duration
	conns    int
	clients  int
}

// runPhase runs cfg.Clients putters over clis (putter i uses clis[i%len])
// until every call of p has been started, p.budget has passed, or ctx
// ends. It returns once every putter has stopped.
func runPhase(ctx context.Context, cfg Config, clis []*clientv3.Client, p phase) outcome {
	per := int64(cfg.perCall())
	calls := (p.puts + per - 1) / per
	putters := make([]*putter, cfg.Clients)
	perPutter := int(calls)/cfg.Clients + 1
	// An uneven share without regrowing, up to a cap: a long run's slices
	// grow on append instead of reserving its whole bound up front.
	room := min(int(calls), perPutter+perPutter/2+16, maxReserved)
	for i := range putters {
		pt := &putter{
			cli:     clis[i%len(clis)],
			payload: newPayload(cfg, uint64(p.first)+uint64(i)),
			lat:     make([]time.Duration, 0, room),
		}
		if p.record {
			pt.acks = make([]ack, 0, room)
		}
		if per > 1 {
			pt.ops = make([]clientv3.Op, per)
		}
		putters[i] = pt
	}
	var interval time.Duration
	if p.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(per) / p.rate)
	}
	sched := schedule{first: p.first, puts: p.puts, per: per, calls: calls, interval: interval, tables: len(cfg.Tables)}

	var next atomic.Int64 // index of the next call to start, 0..calls
	sched.start = time.Now()
	deadline := sched.start.Add(p.budget)
	if cfg.Progress != nil {
		bar := startProgress(cfg.Progress, p.label, p.puts, p.budget, "puts", func() int64 {
			return min(next.Load(), calls) * per
		})
		defer bar.end()
	}
	var wg sync.WaitGroup
	for _, pt := range putters {
		wg.Go(func() { pt.loop(ctx, cfg.PutTimeout, sched, &next, deadline) })
	}
	wg.Wait()

	o := outcome{start: sched.start, elapsed: time.Since(sched.start), conns: len(clis), clients: cfg.Clients}
	var nlat, nacks int
	for _, pt := range putters {
		nlat += len(pt.lat)
		nacks += len(pt.acks)
	}
	o.lat = make([]time.Duration, 0, nlat)
	if p.record {
		o.acks = make([]ack, 0, nacks)
	}
	for _, pt := range putters {
		o.lat = append(o.lat, pt.lat...)
		o.acks = append(o.acks, pt.acks...)
		o.puts += pt.puts
		o.errs += pt.errs
		if o.firstErr == nil {
			o.firstErr = pt.first
		}
	}
	return o
}

// schedule is what every putter of a phase shares, read-only: which puts
// call i makes, and when it may start.
type schedule struct {
	start    time.Time
	first    int64 // number of the phase's first put
	puts     int64
	per      int64 // puts per call
	calls    int64
	interval time.Duration // between call starts; zero: unpaced
	tables   int
}

// call returns the number of call i's first put, its put count and its
// table (0 without tables).
func (s schedule) call(i int64) (first int64, n int, table int) {
	first = s.first + i*s.per
	n = int(min(s.per, s.puts-i*s.per))
	if s.tables > 0 {
		table = int(i % int64(s.tables))
	}
	return first, n, table
}

// loop makes calls until the shared counter reaches the phase's calls,
// deadline passes or ctx ends. A call cut short by ctx is neither a
// success nor an error.
func (pt *putter) loop(ctx context.Context, putTimeout time.Duration, s schedule, next *atomic.Int64, deadline time.Time) {
	for ctx.Err() == nil {
		if !time.Now().Before(deadline) {
			return
		}
		i := next.Add(1) - 1
		if i >= s.calls {
			return
		}
		if s.interval > 0 && !sleepUntil(ctx, s.start.Add(time.Duration(i)*s.interval)) {
			return
		}
		first, n, table := s.call(i)

		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		t0 := time.Now()
		err := pt.call(pctx, first, n, table)
		t1 := time.Now()
		cancel()

		switch {
		case err == nil:
			pt.lat = append(pt.lat, t1.Sub(t0))
			pt.puts += int64(n)
			if pt.acks != nil {
				pt.acks = append(pt.acks, ack{sent: t0.Sub(s.start), done: t1.Sub(s.start), table: int32(table), rows: int32(n)})
			}
		case ctx.Err() != nil:
			return
		default:
			pt.errs += int64(n)
			if pt.first == nil {
				pt.first = err
			}
		}
	}
}

// call makes one unary put (n == 1 without ops) or one txn of n puts,
// numbers first..first+n-1, to table's queue with tables.
func (pt *putter) call(ctx context.Context, first int64, n, table int) error {
	if pt.ops == nil {
		_, err := pt.cli.Put(ctx, pt.payload.keyFor(first, table), pt.payload.valueFor(first))
		return err
	}
	ops := pt.ops[:n]
	for j := range ops {
		k := first + int64(j)
		ops[j] = clientv3.OpPut(pt.payload.keyFor(k, table), pt.payload.valueFor(k))
	}
	_, err := pt.cli.Txn(ctx).Then(ops...).Commit()
	return err
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
