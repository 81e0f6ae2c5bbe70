package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// ConsumerConfig configures a Consumer. Build it with
// DefaultConsumerConfig and set Queue, Endpoints and Duration.
type ConsumerConfig struct {
	// Queue is a plain queue's name, such as "jobs": consumer i watches
	// /q/{Queue}/c/faults-{i}. Required.
	Queue string
	// Endpoints are etcd API addresses (host:port). Consumer i watches on
	// Endpoints[i%len(Endpoints)] alone, with a client of its own.
	// Required.
	Endpoints []string
	// Consumers is how many consumer watches run. Zero: 1.
	Consumers int
	// Ackers is how many goroutines of each consumer acknowledge its
	// deliveries. Zero: 4.
	Ackers int
	// AckTimeout bounds one acknowledgement (a Delete). Zero: 5s.
	AckTimeout time.Duration
	// AckRetryFor is how long an acknowledgement that fails (a node down
	// or a dispatcher moving) is tried again; then it is given up, and
	// the message is left to be delivered again. Zero: 30s.
	AckRetryFor time.Duration
	// RetryPause is the pause before another try of an acknowledgement,
	// and before a watch that ended is created again. Zero: 100ms.
	RetryPause time.Duration
	// DialTimeout bounds the creation of each client. Zero: 5s.
	DialTimeout time.Duration
	// Duration bounds the run: the consumers stop after it, if Stop has
	// not come first. Required: a consumer always ends.
	Duration time.Duration
}

// DefaultConsumerConfig returns one consumer with 4 acknowledgers, 5 s
// per acknowledgement, tried for 30 s. Queue, Endpoints and Duration are
// left to the caller.
func DefaultConsumerConfig() ConsumerConfig {
	return ConsumerConfig{
		Consumers:   1,
		Ackers:      4,
		AckTimeout:  5 * time.Second,
		AckRetryFor: 30 * time.Second,
		RetryPause:  100 * time.Millisecond,
		DialTimeout: 5 * time.Second,
	}
}

func (c ConsumerConfig) withDefaults() ConsumerConfig {
	d := DefaultConsumerConfig()
	if c.Consumers == 0 {
		c.Consumers = d.Consumers
	}
	if c.Ackers == 0 {
		c.Ackers = d.Ackers
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = d.AckTimeout
	}
	if c.AckRetryFor == 0 {
		c.AckRetryFor = d.AckRetryFor
	}
	if c.RetryPause == 0 {
		c.RetryPause = d.RetryPause
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	return c
}

// Validate reports a config StartConsumer would refuse.
func (c ConsumerConfig) Validate() error {
	var errs []error
	if c.Queue == "" || strings.Contains(c.Queue, "/") {
		errs = append(errs, fmt.Errorf("queue %q: want one key segment", c.Queue))
	}
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("no endpoints"))
	}
	if c.Consumers < 0 || c.Ackers < 0 {
		errs = append(errs, fmt.Errorf("consumers %d, ackers %d: want counts >= 0", c.Consumers, c.Ackers))
	}
	if c.AckTimeout < 0 || c.AckRetryFor < 0 || c.RetryPause < 0 || c.DialTimeout < 0 {
		errs = append(errs, errors.New("timeouts and pauses must not be negative"))
	}
	if c.Duration <= 0 {
		errs = append(errs, errors.New("unbounded: set Duration"))
	}
	return errors.Join(errs...)
}

// Received is what the consumers made of one id.
type Received struct {
	// Deliveries counts the PUT events that carried it.
	Deliveries int
	// Acked counts the acknowledgements that deleted its delivery key;
	// AckedNothing those answered OK that deleted nothing (another
	// acknowledgement came first, or the dispatcher took this one for a
	// message it did not hold yet).
	Acked, AckedNothing int
	// AckFailed counts the acknowledgements given up after AckRetryFor.
	AckFailed int
}

// Receipts is what the consumers received, by id.
type Receipts map[uint64]Received

// Found returns, for every id a consumer received and acknowledged, how
// many times it was delivered: for a plain queue what CountIDs is for a
// ClickHouse table, so that Judge counts an id delivered but never
// acknowledged as absent and the deliveries beyond the first as extra
// copies. An acknowledgement answered OK counts whether it deleted the
// delivery key or nothing: a dispatcher takes an acknowledgement of a
// message it does not hold yet (one its restart has not recovered into the
// queue yet, or a handover has not brought) for when the message comes,
// and answers that it deleted nothing. One given up does not count.
func (r Receipts) Found() map[uint64]int {
	found := make(map[uint64]int, len(r))
	for id, rc := range r {
		if rc.Acked+rc.AckedNothing > 0 && rc.Deliveries > 0 {
			found[id] = rc.Deliveries
		}
	}
	return found
}

// Count sums the deliveries and each kind of acknowledgement over ids.
func (r Receipts) Count() Received {
	var sum Received
	for _, rc := range r {
		sum.Deliveries += rc.Deliveries
		sum.Acked += rc.Acked
		sum.AckedNothing += rc.AckedNothing
		sum.AckFailed += rc.AckFailed
	}
	return sum
}

// Consumer is consumer watches of one plain queue that acknowledge every
// delivery and record, by id, what they received. A watch that ends (its
// node killed, or canceled by the node) is created again after
// RetryPause. Its methods may be called from any goroutine.
type Consumer struct {
	cfg     ConsumerConfig
	ctx     context.Context // canceled by Stop or the Duration's timer
	cancel  context.CancelFunc
	clients []*clientv3.Client
	done    chan struct{} // closed when every goroutine returned
	timer   *time.Timer

	pending atomic.Int64 // deliveries received and not yet acknowledged or given up

	mu       sync.Mutex // guards got, foreign, watches and firstErr
	got      Receipts
	foreign  []string // delivery keys that carry no id of a Workload
	watches  int      // watches created
	firstErr error    // the first acknowledgement given up, or watch refused
}

// delivery is one PUT event of a consumer's watch.
type delivery struct {
	key string
	id  uint64
}

// StartConsumer creates one client per consumer and starts the watches.
// It returns an error, and starts nothing, if the config is invalid or a
// client cannot be created.
func StartConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("faults: consumer: %w", err)
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{}), got: make(Receipts)}
	for i := range cfg.Consumers {
		ep := cfg.Endpoints[i%len(cfg.Endpoints)]
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{ep},
			DialTimeout: cfg.DialTimeout,
			Logger:      zap.NewNop(),
			// A node killed and started again is reconnected to
			// within a second, not after gRPC's backoff of minutes.
			DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: time.Second,
			})},
		})
		if err != nil {
			cancel()
			c.closeClients()
			return nil, fmt.Errorf("faults: consumer %d on %s: %w", i, ep, err)
		}
		c.clients = append(c.clients, cli)
	}
	c.timer = time.AfterFunc(cfg.Duration, cancel)
	var wg sync.WaitGroup
	for i, cli := range c.clients {
		acks := make(chan delivery, 1024)
		var ackers sync.WaitGroup
		for range cfg.Ackers {
			ackers.Go(func() {
				for d := range acks {
					c.ack(cli, d)
					c.pending.Add(-1)
				}
			})
		}
		wg.Go(func() {
			c.consume(i, cli, acks)
			close(acks)
			ackers.Wait()
		})
	}
	go func() {
		wg.Wait()
		close(c.done)
	}()
	return c, nil
}

// ConsumerKey is the key consumer i of a Consumer watches.
func ConsumerKey(queue string, i int) string {
	return fmt.Sprintf("/q/%s/c/faults-%d", queue, i)
}

// consume is consumer i's loop: a watch of its key, created again when
// it ends, until Stop or the Duration. Every delivery goes to acks.
func (c *Consumer) consume(i int, cli *clientv3.Client, acks chan<- delivery) {
	key := ConsumerKey(c.cfg.Queue, i)
	for c.ctx.Err() == nil {
		c.mu.Lock()
		c.watches++
		c.mu.Unlock()
		for resp := range cli.Watch(c.ctx, key) {
			if resp.Canceled && c.ctx.Err() == nil {
				c.fail(fmt.Errorf("consumer %d: watch of %s canceled: %s", i, key, resp.CancelReason))
			}
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					c.addForeign(fmt.Sprintf("%v %s", ev.Type, ev.Kv.Key))
					continue
				}
				d, ok := c.parse(string(ev.Kv.Key))
				if !ok {
					c.addForeign(string(ev.Kv.Key))
					continue
				}
				c.mu.Lock()
				rc := c.got[d.id]
				rc.Deliveries++
				c.got[d.id] = rc
				c.mu.Unlock()
				c.pending.Add(1)
				select {
				case acks <- d:
				case <-c.ctx.Done():
					c.pending.Add(-1)
					return
				}
			}
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(c.cfg.RetryPause):
		}
	}
}

// parse reads the id of a delivery key /q/{queue}/{seq}/{p}-{n}, the
// tail of the producer key a Workload put (Key).
func (c *Consumer) parse(key string) (delivery, bool) {
	rest, ok := strings.CutPrefix(key, "/q/"+c.cfg.Queue+"/")
	if !ok {
		return delivery{}, false
	}
	seq, tail, ok := strings.Cut(rest, "/")
	if !ok {
		return delivery{}, false
	}
	pText, nText, ok := strings.Cut(tail, "-")
	if !ok {
		return delivery{}, false
	}
	_, err1 := strconv.ParseUint(seq, 10, 64)
	p, err2 := strconv.ParseUint(pText, 10, 31)
	n, err3 := strconv.ParseUint(nText, 10, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return delivery{}, false
	}
	return delivery{key: key, id: ID(int(p), n)}, true
}

// ack deletes d's delivery key, tried again after a failure until
// AckRetryFor has passed.
func (c *Consumer) ack(cli *clientv3.Client, d delivery) {
	giveUp := time.Now().Add(c.cfg.AckRetryFor)
	for {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.AckTimeout)
		resp, err := cli.Delete(ctx, d.key)
		cancel()
		if err == nil {
			c.mu.Lock()
			rc := c.got[d.id]
			if resp.Deleted > 0 {
				rc.Acked++
			} else {
				rc.AckedNothing++
			}
			c.got[d.id] = rc
			c.mu.Unlock()
			return
		}
		if c.ctx.Err() != nil {
			return // stopped: the message is delivered again, to whoever consumes next
		}
		if time.Now().After(giveUp) {
			c.mu.Lock()
			rc := c.got[d.id]
			rc.AckFailed++
			c.got[d.id] = rc
			c.mu.Unlock()
			c.fail(fmt.Errorf("acknowledge %s: given up after %v: %w", d.key, c.cfg.AckRetryFor, err))
			return
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(c.cfg.RetryPause):
		}
	}
}

func (c *Consumer) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstErr == nil {
		c.firstErr = err
	}
}

func (c *Consumer) addForeign(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.foreign = append(c.foreign, key)
}

// Stop ends the watches and the acknowledgements in flight, waits for
// every goroutine, closes the clients and returns the receipts. It may
// be called more than once.
func (c *Consumer) Stop() Receipts {
	c.timer.Stop()
	c.cancel()
	<-c.done
	c.closeClients()
	return c.Receipts()
}

func (c *Consumer) closeClients() {
	c.mu.Lock()
	clients := c.clients
	c.clients = nil
	c.mu.Unlock()
	for _, cli := range clients {
		_ = cli.Close() // a closed client has nothing left to lose
	}
}

// Receipts returns a copy of what the consumers received so far.
func (c *Consumer) Receipts() Receipts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.got)
}

// Pending counts the deliveries not yet acknowledged or given up.
func (c *Consumer) Pending() int { return int(c.pending.Load()) }

// Watches counts the watches created: one per consumer, and one more
// each time a watch ended and was created again.
func (c *Consumer) Watches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches
}

// Foreign returns the delivery keys that carried no id of a Workload,
// and the events that were not PUTs; a queue only a Workload feeds has
// none.
func (c *Consumer) Foreign() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.foreign...)
}

// Err returns the first acknowledgement given up or watch canceled by a
// node, nil if none.
func (c *Consumer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.firstErr
}
