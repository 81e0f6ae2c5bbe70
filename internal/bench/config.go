package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// MaxRunDuration is the hard cap on one measured run, whatever Config.Duration
// and Config.Puts say.
const MaxRunDuration = 10 * time.Minute

// maxPuts bounds Config.Puts so that the recorded latencies (8 bytes a call,
// 24 more when rows are watched) stay within about 320 MB.
const maxPuts = 10_000_000

// maxClients bounds Config.Clients (one goroutine each).
const maxClients = 100_000

// maxTxn is the most puts a txn may carry: chute's and etcd's default
// --max-txn-ops.
const maxTxn = 128

// maxQueues bounds Config.Tables: each is a table the run creates and polls.
const maxQueues = 64

// Config is one benchmark run against one etcd-API server or cluster.
type Config struct {
	// Endpoints are host:port or http://host:port addresses of the server;
	// connection i dials endpoint i mod len(Endpoints) alone, so that the
	// connections reach the servers evenly and a server's connections
	// carry as many putters each as one server's would: a client given
	// every endpoint dials each, and against three nodes the putters
	// spread over twice the connections, each answer and each request
	// then sharing a write or a read with fewer others. Required.
	Endpoints []string

	// Clients is the number of concurrent putters. Zero is invalid.
	Clients int

	// Conns is the number of clientv3.Client connections the putters share
	// round-robin; it is lowered to Clients when larger. Zero is invalid,
	// and so is fewer than Endpoints (one would get none).
	Conns int

	// Puts is the number of measured puts (rows, with Tables). Zero is
	// invalid.
	Puts int

	// Txn is the number of puts each call carries in one txn (its Then
	// branch). Zero or one: unary puts. At most 128.
	Txn int

	// Duration caps the measured phase; putters start no new call after it.
	// Zero means no cap other than MaxRunDuration.
	Duration time.Duration

	// Rate paces the measured phase at this many puts per second in all
	// (a txn counts for Txn puts): call i starts no earlier than i calls'
	// worth of puts after the phase's start. A call that falls behind
	// starts at once. Zero: no pacing, every putter calls as fast as its
	// previous call returns.
	Rate float64

	// KeySize is the length of each key, or with Tables of the message
	// key after /q/ch:<table>/p/ (the put's number in base 36, padded).
	// Keys are never shorter; they are longer only when KeyPrefix and the
	// put's number do not fit. Zero is invalid.
	KeySize int

	// ValSize is the length of each value: printable random bytes, or with
	// Tables a JSON object {"id":<n>,"v":"<padding>"} of exactly ValSize
	// bytes (longer when the id alone does not fit). Zero means empty
	// values (the smallest object with Tables).
	ValSize int

	// Warmup is the number of puts made before the measured phase and not
	// measured. Zero means none.
	Warmup int

	// KeyPrefix starts every plain key, e.g. "bench/k3x9/", and the keys
	// of the connection probes. Empty means keys are bare numbers.
	KeyPrefix string

	// Tables, when set, turns the puts into rows of ClickHouse queues: call
	// i puts to /q/ch:<Tables[i%len]>/p/<key>. Empty: plain keys. At most
	// 64.
	Tables []string

	// ClickHouseURL, with Tables, is the ClickHouse (default user, no
	// password) the server inserts into: Run creates the tables in its
	// default database (id UInt64, v String), waits until every row of the
	// warmup and of the measured phase is counted there, measures rows/s
	// and put-to-row latency, and drops the tables. Empty: rows are not
	// watched.
	ClickHouseURL string

	// Claim, with Tables, is an endpoint that gets the first put to every
	// queue before any other call, so that its member claims them all and
	// dispatches them; Run waits until every endpoint of Endpoints shows
	// the same dispatcher record. Empty: the first put claims, wherever it
	// lands.
	Claim string

	// LandTimeout bounds the wait for rows once the puts have ended, and
	// for the warmup's rows. Zero: two minutes.
	LandTimeout time.Duration

	// DialTimeout bounds clientv3.New and the first put on each connection,
	// which proves the server answers. Zero is invalid.
	DialTimeout time.Duration

	// PutTimeout bounds every single call. Zero is invalid.
	PutTimeout time.Duration

	// Progress receives a progress line, rewritten in place (\r) while the
	// run goes on and erased at its end: for a terminal. Nil: none.
	Progress io.Writer

	// Label names the run in progress lines. Empty: the endpoints.
	Label string

	// measureHook, when set, is called just before the measured phase
	// starts (start true) and once its calls have all returned (false);
	// an error fails the run. The matrix reads a node's counters with it.
	// Nil: none.
	measureHook func(ctx context.Context, start bool) error
}

// DefaultConfig returns the defaults of chute-bench, without endpoints.
func DefaultConfig() Config {
	return Config{
		Clients:     100,
		Conns:       10,
		Puts:        100_000,
		KeySize:     16,
		ValSize:     256,
		Warmup:      1000,
		LandTimeout: 2 * time.Minute,
		DialTimeout: 5 * time.Second,
		PutTimeout:  5 * time.Second,
	}
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("bench: no endpoints"))
	}
	for _, ep := range c.Endpoints {
		if ep == "" {
			errs = append(errs, errors.New("bench: empty endpoint"))
		}
	}
	if c.Clients < 1 || c.Clients > maxClients {
		errs = append(errs, fmt.Errorf("bench: clients %d, want 1..%d", c.Clients, maxClients))
	}
	if c.Conns < 1 {
		errs = append(errs, fmt.Errorf("bench: conns %d, want at least 1", c.Conns))
	} else if n := len(c.Endpoints); n > 0 && c.Clients > 0 && c.conns() < n {
		errs = append(errs, fmt.Errorf("bench: %d connections for %d endpoints: each connection dials one, want one or more each", c.conns(), n))
	}
	if c.Puts < 1 || c.Puts > maxPuts {
		errs = append(errs, fmt.Errorf("bench: puts %d, want 1..%d", c.Puts, maxPuts))
	}
	if c.Txn < 0 || c.Txn > maxTxn {
		errs = append(errs, fmt.Errorf("bench: txn %d, want 0..%d puts", c.Txn, maxTxn))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("bench: duration %v is negative", c.Duration))
	}
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("bench: rate %v is negative", c.Rate))
	}
	if c.KeySize < 1 {
		errs = append(errs, fmt.Errorf("bench: key size %d, want at least 1", c.KeySize))
	}
	if c.ValSize < 0 {
		errs = append(errs, fmt.Errorf("bench: value size %d is negative", c.ValSize))
	}
	if c.Warmup < 0 || c.Warmup > maxPuts {
		errs = append(errs, fmt.Errorf("bench: warmup %d, want 0..%d", c.Warmup, maxPuts))
	}
	if len(c.Tables) > maxQueues {
		errs = append(errs, fmt.Errorf("bench: %d tables, want at most %d", len(c.Tables), maxQueues))
	}
	for _, t := range c.Tables {
		if !isTableName(t) {
			errs = append(errs, fmt.Errorf("bench: table %q, want [A-Za-z_][A-Za-z0-9_]*", t))
		}
	}
	if c.ClickHouseURL != "" && len(c.Tables) == 0 {
		errs = append(errs, errors.New("bench: a ClickHouse URL needs tables to watch"))
	}
	if c.Claim != "" && len(c.Tables) == 0 {
		errs = append(errs, errors.New("bench: a claim endpoint needs tables to claim"))
	}
	if c.LandTimeout < 0 {
		errs = append(errs, fmt.Errorf("bench: land timeout %v is negative", c.LandTimeout))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("bench: dial timeout %v, want positive", c.DialTimeout))
	}
	if c.PutTimeout <= 0 {
		errs = append(errs, fmt.Errorf("bench: put timeout %v, want positive", c.PutTimeout))
	}
	return errors.Join(errs...)
}

// isTableName reports whether s is a bare ClickHouse identifier, which
// needs no quoting in SQL or in a ch: queue name.
func isTableName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// conns is the number of connections a run opens.
func (c Config) conns() int {
	return min(c.Conns, c.Clients)
}

// perCall is the number of puts one call carries.
func (c Config) perCall() int {
	return max(c.Txn, 1)
}

// calls is the number of calls that make n puts: the last may carry fewer
// than perCall.
func (c Config) calls(n int) int64 {
	k := c.perCall()
	return int64((n + k - 1) / k)
}

// measureFor is how long the measured phase may start new calls.
func (c Config) measureFor() time.Duration {
	if c.Duration > 0 && c.Duration < MaxRunDuration {
		return c.Duration
	}
	return MaxRunDuration
}

// rowPollInterval is the period of the run's row counts: fine when the run
// is paced (it measures put-to-row latency), coarser when it measures
// throughput.
func (c Config) rowPollInterval() time.Duration {
	if c.Rate > 0 {
		return pollInterval
	}
	return throughputPollInterval
}

// landTimeout is LandTimeout with its default.
func (c Config) landTimeout() time.Duration {
	if c.LandTimeout > 0 {
		return c.LandTimeout
	}
	return 2 * time.Minute
}

// label names the run in progress lines.
func (c Config) label() string {
	if c.Label != "" {
		return c.Label
	}
	return fmt.Sprint(c.Endpoints)
}
