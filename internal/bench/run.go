package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrAllPutsFailed is returned (wrapped, with the first failure) when a run
// completed no put at all.
var ErrAllPutsFailed = errors.New("bench: every put failed")

// Run opens cfg.Conns() clientv3 connections, proves each answers a put,
// makes cfg.Warmup unmeasured puts, then cfg.Puts measured ones from
// cfg.Clients concurrent putters. It returns an error when cfg is invalid, a
// connection does not answer within cfg.DialTimeout, ctx ends, or no measured
// put succeeded; some failed puts alone are counted in Result.Errors.
// Result.Server is left for the caller to fill.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	clis, err := dialAll(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer closeAll(clis)

	if err := probeAll(ctx, cfg, clis); err != nil {
		return Result{}, err
	}
	if cfg.Warmup > 0 {
		warm := runPhase(ctx, cfg, clis, phase{first: 0, count: int64(cfg.Warmup), budget: MaxRunDuration})
		if err := warm.err(ctx); err != nil {
			return Result{}, fmt.Errorf("bench: warmup: %w", err)
		}
	}
	got := runPhase(ctx, cfg, clis, phase{first: int64(cfg.Warmup), count: int64(cfg.Puts), budget: cfg.measureFor()})
	if err := got.err(ctx); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("bench: interrupted: %w", err)
	}
	return got.result(cfg), nil
}

// dialAll creates the run's clients. clientv3.New does not wait for a
// connection; probeAll does.
func dialAll(ctx context.Context, cfg Config) ([]*clientv3.Client, error) {
	clis := make([]*clientv3.Client, 0, cfg.conns())
	for range cfg.conns() {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   cfg.Endpoints,
			DialTimeout: cfg.DialTimeout,
			Context:     ctx,
		})
		if err != nil {
			closeAll(clis)
			return nil, fmt.Errorf("bench: client for %v: %w", cfg.Endpoints, err)
		}
		clis = append(clis, cli)
	}
	return clis, nil
}

// closeAll closes clis. clientv3's Close reports the cancellation of its own
// context, which is not a failure here, so its error is dropped.
func closeAll(clis []*clientv3.Client) {
	for _, cli := range clis {
		_ = cli.Close()
	}
}

// probeAll makes one put per connection, concurrently, each bounded by
// cfg.DialTimeout, so that an unreachable server fails the run in
// DialTimeout instead of PutTimeout per put.
func probeAll(ctx context.Context, cfg Config, clis []*clientv3.Client) error {
	errs := make([]error, len(clis))
	var wg sync.WaitGroup
	for i, cli := range clis {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
			defer cancel()
			key := fmt.Sprintf("%sprobe/%d", cfg.KeyPrefix, i)
			if _, err := cli.Put(pctx, key, ""); err != nil {
				errs[i] = fmt.Errorf("bench: connection %d to %v does not answer a put within %v: %w",
					i, cfg.Endpoints, cfg.DialTimeout, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// phase is one batch of puts: numbers first..first+count-1, started within
// budget of the phase's start.
type phase struct {
	first  int64
	count  int64
	budget time.Duration
}

// outcome is what a phase measured.
type outcome struct {
	lat      []time.Duration // successful put latencies, merged
	errs     int64
	firstErr error
	elapsed  time.Duration
	conns    int
	clients  int
}

// err reports a phase in which no put succeeded.
func (o outcome) err(ctx context.Context) error {
	if len(o.lat) > 0 {
		return nil
	}
	if o.errs > 0 {
		return fmt.Errorf("%w (%d failed): %w", ErrAllPutsFailed, o.errs, o.firstErr)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench: interrupted: %w", err)
	}
	return errors.New("bench: no put completed")
}

func (o outcome) result(cfg Config) Result {
	r := Result{
		Clients: o.clients,
		Conns:   o.conns,
		KeySize: cfg.KeySize,
		ValSize: cfg.ValSize,
		Puts:    int64(len(o.lat)),
		Errors:  o.errs,
		Elapsed: o.elapsed,
	}
	if o.firstErr != nil {
		r.FirstError = o.firstErr.Error()
	}
	if o.elapsed > 0 {
		r.PutsPerSec = float64(r.Puts) / o.elapsed.Seconds()
	}
	r.P50, r.P99 = percentiles(o.lat)
	return r
}
