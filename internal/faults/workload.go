package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
)

// WorkloadConfig configures a Workload. Build it with DefaultWorkloadConfig
// and set Queue, Endpoints and a bound.
type WorkloadConfig struct {
	// Queue is the queue's name, such as "ch:events": puts go to
	// /q/{Queue}/p/{producer}-{n}. Required.
	Queue string
	// Endpoints are etcd API addresses (host:port). Producer i talks to
	// Endpoints[i%len(Endpoints)] alone, with a client of its own, so a
	// test decides which node each producer's puts arrive on. Required.
	Endpoints []string
	// Producers is how many producers run, each one goroutine putting one
	// request after another. Zero: 4.
	Producers int
	// FirstProducer is the number of the first producer (ids and keys
	// carry it), so that two workloads on one queue never share an id.
	// Zero: 0.
	FirstProducer int
	// Batch is how many puts one request carries: 1 is a unary Put, more
	// a Txn of that many puts (all or nothing). Zero: 1.
	Batch int
	// Rate is each producer's requests per second. Zero: as fast as the
	// answers come.
	Rate float64
	// PutTimeout bounds one request; one without an answer by then is
	// TimedOut. Zero: 5s.
	PutTimeout time.Duration
	// FailurePause is how long a producer waits after a request that did
	// not succeed, so that an endpoint that refuses at once does not make
	// it spin. Zero: 50ms.
	FailurePause time.Duration
	// DialTimeout bounds the creation of each client. Zero: 5s.
	DialTimeout time.Duration
	// MaxPuts bounds each producer's puts. Zero: no bound of its own.
	MaxPuts int
	// Duration bounds the run: producers start no request after it. Zero:
	// no bound of its own. At least one of MaxPuts and Duration is
	// required: a workload always ends.
	Duration time.Duration
	// Pad is how many bytes of filler each value carries in its "pad"
	// field, to reach a byte cap with few puts. Zero: no pad field.
	Pad int
}

// DefaultWorkloadConfig returns 4 producers of unary puts, as fast as
// possible, with 5 s per put. Queue, Endpoints and a bound are left to
// the caller.
func DefaultWorkloadConfig() WorkloadConfig {
	return WorkloadConfig{
		Producers:    4,
		Batch:        1,
		PutTimeout:   5 * time.Second,
		FailurePause: 50 * time.Millisecond,
		DialTimeout:  5 * time.Second,
	}
}

func (c WorkloadConfig) withDefaults() WorkloadConfig {
	d := DefaultWorkloadConfig()
	if c.Producers == 0 {
		c.Producers = d.Producers
	}
	if c.Batch == 0 {
		c.Batch = d.Batch
	}
	if c.PutTimeout == 0 {
		c.PutTimeout = d.PutTimeout
	}
	if c.FailurePause == 0 {
		c.FailurePause = d.FailurePause
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	return c
}

// maxBatch is etcd's default --max-txn-ops: a bigger Batch would only be
// refused.
const maxBatch = 128

// Validate reports a config StartWorkload would refuse.
func (c WorkloadConfig) Validate() error {
	var errs []error
	if c.Queue == "" || strings.Contains(c.Queue, "/") {
		errs = append(errs, fmt.Errorf("queue %q: want one key segment", c.Queue))
	}
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("no endpoints"))
	}
	if c.Producers < 0 || c.FirstProducer < 0 || c.FirstProducer+c.Producers > 1<<31 {
		errs = append(errs, fmt.Errorf("producers %d from %d: want a count >= 0 and numbers below 2^31", c.Producers, c.FirstProducer))
	}
	if c.Batch < 0 || c.Batch > maxBatch {
		errs = append(errs, fmt.Errorf("batch %d: want 1 to %d", c.Batch, maxBatch))
	}
	if c.Rate < 0 || c.PutTimeout < 0 || c.FailurePause < 0 || c.DialTimeout < 0 || c.Pad < 0 {
		errs = append(errs, errors.New("rate, timeouts, pause and pad must not be negative"))
	}
	if c.MaxPuts < 0 || c.MaxPuts >= 1<<32 || c.Duration < 0 {
		errs = append(errs, fmt.Errorf("max puts %d, duration %v: want 0 <= max puts < 2^32 and a duration >= 0", c.MaxPuts, c.Duration))
	}
	if c.MaxPuts == 0 && c.Duration == 0 {
		errs = append(errs, errors.New("unbounded: set MaxPuts, Duration or both"))
	}
	return errors.Join(errs...)
}

// Workload is producers putting unique ids to one queue and recording how
// every put ended. Its methods may be called from any goroutine.
type Workload struct {
	cfg     WorkloadConfig
	pad     string
	clients []*clientv3.Client

	stop     chan struct{} // closed by Stop or the Duration's timer
	stopOnce sync.Once
	done     chan struct{} // closed when every producer returned
	timer    *time.Timer   // nil without Duration

	acked, failed, timedOut atomic.Int64

	mu       sync.Mutex // guards log and firstErr
	log      Log
	firstErr map[codes.Code]string // the first error of each code, for messages
}

// StartWorkload creates one client per producer and starts the producers.
// It returns an error, and starts nothing, if the config is invalid or a
// client cannot be created.
func StartWorkload(cfg WorkloadConfig) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("faults: workload: %w", err)
	}
	cfg = cfg.withDefaults()
	w := &Workload{
		cfg:      cfg,
		pad:      strings.Repeat("x", cfg.Pad),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		firstErr: make(map[codes.Code]string),
	}
	for i := range cfg.Producers {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{cfg.Endpoints[i%len(cfg.Endpoints)]},
			DialTimeout: cfg.DialTimeout,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			w.closeClients()
			return nil, fmt.Errorf("faults: workload: client of producer %d on %s: %w", cfg.FirstProducer+i, cfg.Endpoints[i%len(cfg.Endpoints)], err)
		}
		w.clients = append(w.clients, cli)
	}
	if cfg.Duration > 0 {
		w.timer = time.AfterFunc(cfg.Duration, w.signalStop)
	}
	var wg sync.WaitGroup
	for i, cli := range w.clients {
		wg.Go(func() { w.produce(cfg.FirstProducer+i, cli) })
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w, nil
}

// Done is closed once every producer has ended, by Stop or a bound.
func (w *Workload) Done() <-chan struct{} { return w.done }

// Stop makes the producers start no new request, waits for the requests
// in flight to end (at most PutTimeout), closes the clients and returns
// the log. It may be called more than once.
func (w *Workload) Stop() Log {
	w.signalStop()
	<-w.done
	w.closeClients()
	return w.Log()
}

func (w *Workload) signalStop() {
	w.stopOnce.Do(func() {
		if w.timer != nil {
			w.timer.Stop()
		}
		close(w.stop)
	})
}

func (w *Workload) closeClients() {
	w.mu.Lock()
	clients := w.clients
	w.clients = nil
	w.mu.Unlock()
	for _, cli := range clients {
		_ = cli.Close() // a closed client has nothing left to lose
	}
}

// Log returns the outcomes so far, in the order their answers came.
func (w *Workload) Log() Log {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(Log(nil), w.log...)
}

// Counts returns how many puts so far were acknowledged, failed and
// timed out, without copying the log.
func (w *Workload) Counts() (acked, failed, timedOut int) {
	return int(w.acked.Load()), int(w.failed.Load()), int(w.timedOut.Load())
}

// FirstErrors returns the first error message seen for each gRPC code.
func (w *Workload) FirstErrors() map[codes.Code]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[codes.Code]string, len(w.firstErr))
	for c, s := range w.firstErr {
		m[c] = s
	}
	return m
}

// Key is the producer key of put n of producer p.
func Key(queue string, p int, n uint64) string {
	return fmt.Sprintf("/q/%s/p/%d-%d", queue, p, n)
}

// value is the JSON row of put n of producer p.
func (w *Workload) value(p int, n uint64) string {
	if w.pad == "" {
		return fmt.Sprintf(`{"id":%d,"p":%d,"n":%d}`, ID(p, n), p, n)
	}
	return fmt.Sprintf(`{"id":%d,"p":%d,"n":%d,"pad":"%s"}`, ID(p, n), p, n, w.pad)
}

// produce is producer p's loop: one request after another until Stop, the
// Duration or MaxPuts.
func (w *Workload) produce(p int, cli *clientv3.Client) {
	var tick <-chan time.Time
	if w.cfg.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / w.cfg.Rate))
		defer t.Stop()
		tick = t.C
	}
	ops := make([]clientv3.Op, 0, w.cfg.Batch)
	for n := uint64(0); w.cfg.MaxPuts == 0 || n < uint64(w.cfg.MaxPuts); {
		if tick != nil {
			select {
			case <-w.stop:
				return
			case <-tick:
			}
		}
		select {
		case <-w.stop:
			return
		default:
		}
		k := uint64(w.cfg.Batch)
		if w.cfg.MaxPuts > 0 {
			k = min(k, uint64(w.cfg.MaxPuts)-n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.PutTimeout)
		start := time.Now()
		var err error
		if k == 1 {
			_, err = cli.Put(ctx, Key(w.cfg.Queue, p, n), w.value(p, n))
		} else {
			ops = ops[:0]
			for i := range k {
				ops = append(ops, clientv3.OpPut(Key(w.cfg.Queue, p, n+i), w.value(p, n+i)))
			}
			_, err = cli.Txn(ctx).Then(ops...).Commit()
		}
		end := time.Now()
		cancel()
		w.record(p, n, k, err, start, end)
		n += k
		if err != nil && w.cfg.FailurePause > 0 {
			select {
			case <-w.stop:
				return
			case <-time.After(w.cfg.FailurePause):
			}
		}
	}
}

// record adds the outcome of puts n to n+k-1 of producer p.
func (w *Workload) record(p int, n, k uint64, err error, start, end time.Time) {
	res, code := classify(err)
	switch res {
	case Acked:
		w.acked.Add(int64(k))
	case Failed:
		w.failed.Add(int64(k))
	case TimedOut:
		w.timedOut.Add(int64(k))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if _, ok := w.firstErr[code]; !ok {
			w.firstErr[code] = err.Error()
		}
	}
	for i := range k {
		w.log = append(w.log, Outcome{ID: ID(p, n+i), Producer: p, Result: res, Code: code, Start: start, End: end})
	}
}
