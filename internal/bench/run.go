package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrAllPutsFailed is returned (wrapped, with the first failure) when a run
// completed no put at all.
var ErrAllPutsFailed = errors.New("bench: every put failed")

// claimTimeout bounds the wait until every endpoint shows the dispatcher
// records of a claimed run.
const claimTimeout = 15 * time.Second

// Run opens cfg.Conns() clientv3 connections, proves each answers a put,
// makes cfg.Warmup unmeasured puts, then cfg.Puts measured ones from
// cfg.Clients concurrent putters. With cfg.Tables and cfg.ClickHouseURL it
// creates the tables first, waits for the warmup's rows, watches the
// measured rows land and drops the tables at the end; with cfg.Claim the
// queues are claimed first. It returns an error when cfg is invalid, a
// connection does not answer within cfg.DialTimeout, ctx ends, no measured
// put succeeded, or the rows do not all land; some failed puts alone are
// counted in Result.Errors. Result.Server is left for the caller to fill.
// cfg's measure hook, when set, is called around the measured phase.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.ClickHouseURL != "" {
		for _, t := range cfg.Tables {
			if err := createTable(ctx, cfg.ClickHouseURL, t); err != nil {
				return Result{}, err
			}
			defer func() { _ = dropTable(context.WithoutCancel(ctx), cfg.ClickHouseURL, t) }() // best effort
		}
	}
	clis, err := dialAll(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer closeAll(clis)

	pre := make([]int64, len(cfg.Tables)) // rows put before the measured phase, per table
	if cfg.Claim != "" {
		if err := claimQueues(ctx, cfg); err != nil {
			return Result{}, err
		}
		for i := range pre {
			pre[i]++
		}
	}
	if err := probeAll(ctx, cfg, clis); err != nil {
		return Result{}, err
	}
	watch := cfg.ClickHouseURL != ""
	if cfg.Warmup > 0 {
		warm := runPhase(ctx, cfg, clis, phase{first: 0, puts: int64(cfg.Warmup), budget: MaxRunDuration, record: watch, label: cfg.label() + " warmup"})
		if err := warm.err(ctx); err != nil {
			return Result{}, fmt.Errorf("bench: warmup: %w", err)
		}
		for _, a := range warm.acks {
			pre[a.table] += int64(a.rows)
		}
	}
	var rw *rowWatch
	if watch {
		base, err := settleRows(ctx, cfg.ClickHouseURL, cfg.Tables, pre, cfg.landTimeout())
		if err != nil {
			return Result{}, fmt.Errorf("bench: warmup rows: %w", err)
		}
		if rw, err = startRowWatch(ctx, cfg.ClickHouseURL, cfg.rowPollInterval(), cfg.Tables, base); err != nil {
			return Result{}, err
		}
		defer rw.stop()
	}
	if cfg.measureHook != nil {
		if err := cfg.measureHook(ctx, true); err != nil {
			return Result{}, err
		}
	}
	got := runPhase(ctx, cfg, clis, phase{
		first: int64(cfg.Warmup), puts: int64(cfg.Puts), budget: cfg.measureFor(),
		rate: cfg.Rate, record: watch, label: cfg.label(),
	})
	if err := got.err(ctx); err != nil {
		return Result{}, err
	}
	if cfg.measureHook != nil {
		if err := cfg.measureHook(ctx, false); err != nil {
			return Result{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("bench: interrupted: %w", err)
	}
	r := got.result(cfg)
	if rw != nil {
		if r.Rows, err = waitRows(ctx, cfg, rw, got); err != nil {
			return r, err
		}
	}
	return r, nil
}

// waitRows waits until every row of the measured phase got made is in
// ClickHouse and computes what rw saw of it.
func waitRows(ctx context.Context, cfg Config, rw *rowWatch, got outcome) (*RowsResult, error) {
	want := make([]int64, len(cfg.Tables))
	var total int64
	for _, a := range got.acks {
		want[a.table] += int64(a.rows)
		total += int64(a.rows)
	}
	if cfg.Progress != nil {
		bar := startProgress(cfg.Progress, cfg.label()+" rows", total, 0, "rows", rw.landed.Load)
		defer bar.end()
	}
	if err := rw.finish(want, cfg.landTimeout()); err != nil {
		return nil, err
	}
	return rw.result(ctx, got.start, got.acks)
}

// dialAll creates the run's clients, client i of endpoint i mod
// len(cfg.Endpoints) alone (Config.Endpoints). clientv3.New does not wait
// for a connection; probeAll does.
func dialAll(ctx context.Context, cfg Config) ([]*clientv3.Client, error) {
	clis := make([]*clientv3.Client, 0, cfg.conns())
	for i := range cfg.conns() {
		cli, err := newClient(ctx, []string{connEndpoint(cfg, i)}, cfg.DialTimeout)
		if err != nil {
			closeAll(clis)
			return nil, err
		}
		clis = append(clis, cli)
	}
	return clis, nil
}

// connEndpoint is the endpoint connection i of a run dials.
func connEndpoint(cfg Config, i int) string {
	return cfg.Endpoints[i%len(cfg.Endpoints)]
}

// newClient is a clientv3 client of endpoints that logs nothing.
func newClient(ctx context.Context, endpoints []string, dialTimeout time.Duration) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("bench: client for %v: %w", endpoints, err)
	}
	return cli, nil
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
// DialTimeout instead of PutTimeout per put. Probes are plain keys.
func probeAll(ctx context.Context, cfg Config, clis []*clientv3.Client) error {
	errs := make([]error, len(clis))
	var wg sync.WaitGroup
	for i, cli := range clis {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
			defer cancel()
			key := fmt.Sprintf("%sprobe/%d", cfg.KeyPrefix, i)
			if _, err := cli.Put(pctx, key, ""); err != nil {
				errs[i] = fmt.Errorf("bench: connection %d to %s does not answer a put within %v: %w",
					i, connEndpoint(cfg, i), cfg.DialTimeout, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// claimQueues puts one row to every queue of cfg.Tables through cfg.Claim,
// so that its member claims them, then waits until every endpoint of
// cfg.Endpoints answers the dispatcher record the claim endpoint answers.
func claimQueues(ctx context.Context, cfg Config) error {
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	claimer, err := newClient(cctx, []string{cfg.Claim}, cfg.DialTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = claimer.Close() }()
	records := make([]string, len(cfg.Tables))
	pad := make([]byte, cfg.ValSize)
	for i := range pad {
		pad[i] = 'c'
	}
	for i, t := range cfg.Tables {
		if _, err := claimer.Put(cctx, queueKeyPrefix(t)+"claim", string(appendRow(nil, 0, cfg.ValSize, pad))); err != nil {
			return fmt.Errorf("bench: claim %s through %s: %w", queueName(t), cfg.Claim, err)
		}
		resp, err := claimer.Get(cctx, queueRecordKey(t))
		if err != nil {
			return fmt.Errorf("bench: dispatcher record of %s on %s: %w", queueName(t), cfg.Claim, err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("bench: %s has no dispatcher record of %s after a put", cfg.Claim, queueName(t))
		}
		records[i] = string(resp.Kvs[0].Value)
	}
	for _, ep := range cfg.Endpoints {
		if err := waitRecords(cctx, ep, cfg, records); err != nil {
			return err
		}
	}
	return nil
}

// waitRecords polls endpoint until it answers records for the queues of
// cfg.Tables.
func waitRecords(ctx context.Context, endpoint string, cfg Config, records []string) error {
	cli, err := newClient(ctx, []string{endpoint}, cfg.DialTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	for i, t := range cfg.Tables {
		for {
			resp, err := cli.Get(ctx, queueRecordKey(t))
			if err == nil && len(resp.Kvs) > 0 && string(resp.Kvs[0].Value) == records[i] {
				break
			}
			if !sleepUntil(ctx, time.Now().Add(pollInterval)) {
				return fmt.Errorf("bench: %s does not show the dispatcher record %q of %s (last error %v): %w",
					endpoint, records[i], queueName(t), err, ctx.Err())
			}
		}
	}
	return nil
}

// err reports a phase in which no put succeeded.
func (o outcome) err(ctx context.Context) error {
	if o.puts > 0 {
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
		Queues:  len(cfg.Tables),
		Rate:    cfg.Rate,
		Puts:    o.puts,
		Calls:   int64(len(o.lat)),
		Errors:  o.errs,
		Elapsed: o.elapsed,
	}
	if cfg.perCall() > 1 {
		r.Txn = cfg.perCall()
	}
	if o.firstErr != nil {
		r.FirstError = o.firstErr.Error()
	}
	if o.elapsed > 0 {
		r.PutsPerSec = float64(r.Puts) / o.elapsed.Seconds()
	}
	r.P50, r.P99, r.P999 = percentiles(o.lat)
	return r
}
