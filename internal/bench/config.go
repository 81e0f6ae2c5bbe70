package bench

import (
	"errors"
	"fmt"
	"time"
)

// MaxRunDuration is the hard cap on one measured run, whatever Config.Duration
// and Config.Puts say.
const MaxRunDuration = 10 * time.Minute

// maxPuts bounds Config.Puts so that the recorded latencies (8 bytes a put)
// stay within 80 MB.
const maxPuts = 10_000_000

// maxClients bounds Config.Clients (one goroutine each).
const maxClients = 100_000

// Config is one benchmark run against one etcd-API server.
type Config struct {
	// Endpoints are host:port or http://host:port addresses of the server.
	// Required.
	Endpoints []string

	// Clients is the number of concurrent putters. Zero is invalid.
	Clients int

	// Conns is the number of clientv3.Client connections the putters share
	// round-robin; it is lowered to Clients when larger. Zero is invalid.
	Conns int

	// Puts is the number of measured puts. Zero is invalid.
	Puts int

	// Duration caps the measured phase; putters start no new put after it.
	// Zero means no cap other than MaxRunDuration.
	Duration time.Duration

	// KeySize is the length of each key. Keys are never shorter; they are
	// longer only when KeyPrefix and the put's number do not fit. Zero is
	// invalid.
	KeySize int

	// ValSize is the length of each value, printable random bytes. Zero means
	// empty values.
	ValSize int

	// Warmup is the number of puts made before the measured phase and not
	// measured. Zero means none.
	Warmup int

	// KeyPrefix starts every key, e.g. "bench/k3x9/". Empty means keys are
	// bare numbers.
	KeyPrefix string

	// DialTimeout bounds clientv3.New and the first put on each connection,
	// which proves the server answers. Zero is invalid.
	DialTimeout time.Duration

	// PutTimeout bounds every single put. Zero is invalid.
	PutTimeout time.Duration
}

// DefaultConfig returns the defaults of `chute bench`, without endpoints.
func DefaultConfig() Config {
	return Config{
		Clients:     100,
		Conns:       10,
		Puts:        100_000,
		KeySize:     16,
		ValSize:     256,
		Warmup:      1000,
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
	}
	if c.Puts < 1 || c.Puts > maxPuts {
		errs = append(errs, fmt.Errorf("bench: puts %d, want 1..%d", c.Puts, maxPuts))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("bench: duration %v is negative", c.Duration))
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
	if c.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("bench: dial timeout %v, want positive", c.DialTimeout))
	}
	if c.PutTimeout <= 0 {
		errs = append(errs, fmt.Errorf("bench: put timeout %v, want positive", c.PutTimeout))
	}
	return errors.Join(errs...)
}

// conns is the number of connections a run opens.
func (c Config) conns() int {
	return min(c.Conns, c.Clients)
}

// measureFor is how long the measured phase may start new puts.
func (c Config) measureFor() time.Duration {
	if c.Duration > 0 && c.Duration < MaxRunDuration {
		return c.Duration
	}
	return MaxRunDuration
}
