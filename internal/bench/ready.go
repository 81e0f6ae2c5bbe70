package bench

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// readyPoll is the pause between readiness attempts.
	readyPoll = 100 * time.Millisecond
	// readyAttemptTimeout bounds one readiness attempt's dial and put.
	readyAttemptTimeout = 2 * time.Second
)

// waitReady polls until the server of c at endpoint answers a clientv3 put,
// c exits, ctx ends or timeout passes.
func waitReady(ctx context.Context, c *child, endpoint string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		last := tryPut(wctx, endpoint)
		if last == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("%w before answering a put: %s: %v", errChildExited, c.name, c.exitErr())
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("bench: interrupted waiting for %s: %w", c.name, err)
			}
			return fmt.Errorf("bench: %s at %s did not answer a put within %v: %w", c.name, endpoint, timeout, last)
		case <-tick.C:
		}
	}
}

// tryPut makes one put on a fresh client. It first dials TCP, so that a
// server not listening yet fails fast instead of waiting out gRPC's
// reconnect backoff.
func tryPut(ctx context.Context, endpoint string) error {
	actx, cancel := context.WithTimeout(ctx, readyAttemptTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(actx, "tcp", hostPort(endpoint))
	if err != nil {
		return err
	}
	_ = conn.Close() // a probe only

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: readyAttemptTimeout,
		Context:     actx,
	})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }() // reports its own cancellation only
	_, err = cli.Put(actx, "bench/ready", "")
	return err
}

// hostPort strips the scheme from an endpoint.
func hostPort(endpoint string) string {
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		return rest
	}
	return endpoint
}
