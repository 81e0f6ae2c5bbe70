package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// putter is one load goroutine's state. Only its goroutine writes it, until
// runPhase has waited for it.
type putter struct {
	cli      *clientv3.Client
	payload  *payload
	lat      []time.Duration
	errs     int64
	firstErr error
}

// runPhase runs cfg.Clients putters over clis (putter i uses clis[i%len])
// until p.count puts have been started, p.budget has passed, or ctx ends.
// It returns once every putter has stopped.
func runPhase(ctx context.Context, cfg Config, clis []*clientv3.Client, p phase) outcome {
	putters := make([]*putter, cfg.Clients)
	perPutter := int(p.count)/cfg.Clients + 1
	for i := range putters {
		putters[i] = &putter{
			cli:     clis[i%len(clis)],
			payload: newPayload(cfg.KeyPrefix, cfg.KeySize, cfg.ValSize, uint64(p.first)+uint64(i)),
			// Room for an uneven share without regrowing on the hot path.
			lat: make([]time.Duration, 0, min(int(p.count), perPutter+perPutter/2+16)),
		}
	}

	var next atomic.Int64 // index of the next put to start, 0..p.count
	start := time.Now()
	deadline := start.Add(p.budget)
	var wg sync.WaitGroup
	for _, pt := range putters {
		wg.Go(func() { pt.loop(ctx, cfg.PutTimeout, p.first, p.count, &next, deadline) })
	}
	wg.Wait()
	elapsed := time.Since(start)

	o := outcome{elapsed: elapsed, conns: len(clis), clients: cfg.Clients}
	total := 0
	for _, pt := range putters {
		total += len(pt.lat)
	}
	o.lat = make([]time.Duration, 0, total)
	for _, pt := range putters {
		o.lat = append(o.lat, pt.lat...)
		o.errs += pt.errs
		if o.firstErr == nil {
			o.firstErr = pt.firstErr
		}
	}
	return o
}

// loop puts until the shared counter reaches count, deadline passes or ctx
// ends. A put cut short by ctx is neither a success nor an error.
func (pt *putter) loop(ctx context.Context, putTimeout time.Duration, first, count int64, next *atomic.Int64, deadline time.Time) {
	for ctx.Err() == nil {
		if !time.Now().Before(deadline) {
			return
		}
		i := next.Add(1) - 1
		if i >= count {
			return
		}
		n := first + i
		key, val := pt.payload.keyFor(n), pt.payload.valueFor(n)

		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		t0 := time.Now()
		_, err := pt.cli.Put(pctx, key, val)
		d := time.Since(t0)
		cancel()

		switch {
		case err == nil:
			pt.lat = append(pt.lat, d)
		case ctx.Err() != nil:
			return
		default:
			pt.errs++
			if pt.firstErr == nil {
				pt.firstErr = err
			}
		}
	}
}
