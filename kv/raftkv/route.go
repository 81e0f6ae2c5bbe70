package raftkv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/internal/backoff"
	"chute/kv"
)

// Bounds of route's retries, besides the call's context: a leader
// change takes raft an election timeout or two, which the tries and
// their pauses cover; a leader unreachable for longer is no leader.
const (
	maxTries     = 10
	retryMin     = 10 * time.Millisecond
	retryMax     = 500 * time.Millisecond
	leaderPoll   = 10 * time.Millisecond // the wait for raft to know a leader
	logRetryFrom = 3                     // tries before a retry is logged at Info
)

// route runs a call where the leader is: local when this member leads,
// else remote with the address of the leader's peer listener (its raft
// address). A try that fails because the leader changed, stepped down
// or could not be reached (errLeaderGone) is tried again, after a pause,
// on whichever member leads then; so is one whose leader lost its
// leadership midway (kv.ErrLeaderChanged) when the call is idempotent
// (reads and renewals, not commands, which may still commit). The tries
// are bounded in number and by ctx. When they run out, or ctx's ApplyTimeout does while no leader
// is known, route returns kv.ErrNoLeader.
func (c *Consensus) route(ctx context.Context, idempotent bool, local func(context.Context) error,
	remote func(context.Context, raft.ServerAddress) error) error {
	pause := backoff.Backoff{Min: retryMin, Max: retryMax}
	var last error
	for try := range maxTries {
		if try > 0 {
			if err := c.sleep(ctx, pause.Next()); err != nil {
				return noLeader(ctx, last)
			}
		}
		addr, err := c.waitLeader(ctx)
		if err != nil {
			return err
		}
		if addr == "" {
			err = local(ctx)
		} else {
			err = c.tryRemote(ctx, idempotent, addr, remote)
		}
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil && endedByContext(err):
			return context.Cause(ctx) // kv.ErrTimeout for ApplyTimeout
		case !errors.Is(err, errLeaderGone) && !(idempotent && errors.Is(err, kv.ErrLeaderChanged)):
			return err
		}
		last = err
		level := slog.LevelDebug
		if try+1 >= logRetryFrom {
			level = slog.LevelInfo
		}
		c.log.Log(ctx, level, "leader gone, trying again", "leader", string(addr), "try", try+1, "err", err)
	}
	return fmt.Errorf("%w: %d tries, the last: %v", kv.ErrNoLeader, maxTries, last)
}

// errNoAnswer: a leader did not answer a try of an idempotent call
// within TryTimeout.
var errNoAnswer = errors.New("raftkv: no answer from the leader in time")

// tryRemote makes one remote try. An idempotent one is bounded by
// TryTimeout too, and ending by it is errLeaderGone, so that route asks
// again, of whoever leads by then: a frozen leader keeps its connections
// open and would hold the call for all of ApplyTimeout, past the new
// leader's election.
func (c *Consensus) tryRemote(ctx context.Context, idempotent bool, addr raft.ServerAddress,
	remote func(context.Context, raft.ServerAddress) error) error {
	if !idempotent {
		return remote(ctx, addr)
	}
	tctx, cancel := context.WithTimeoutCause(ctx, c.cfg.TryTimeout, errNoAnswer)
	defer cancel()
	err := remote(tctx, addr)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(tctx), errNoAnswer) {
		return fmt.Errorf("%w: %w (%v): %w", errLeaderGone, errNoAnswer, c.cfg.TryTimeout, err)
	}
	return err
}

// noLeader is the error of a call whose ctx ended between tries:
// kv.ErrNoLeader when its ApplyTimeout ran out, else the caller's.
func noLeader(ctx context.Context, last error) error {
	if cause := context.Cause(ctx); !errors.Is(cause, kv.ErrTimeout) {
		return cause
	}
	return fmt.Errorf("%w: the last try: %v", kv.ErrNoLeader, last)
}

// endedByContext reports whether err is a context's end, as a Go error
// or as a gRPC status.
func endedByContext(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, kv.ErrTimeout)
}

// waitLeader returns the address of the leader's peer listener, "" when
// this member leads, waiting while raft knows none.
func (c *Consensus) waitLeader(ctx context.Context) (raft.ServerAddress, error) {
	for {
		if c.raft.State() == raft.Leader {
			return "", nil
		}
		if addr, _ := c.raft.LeaderWithID(); addr != "" {
			return addr, nil
		}
		if err := c.sleep(ctx, leaderPoll); err != nil {
			return "", noLeader(ctx, errors.New("raft knows no leader"))
		}
	}
}

// sleep waits d, or less if ctx ends or Close is called.
func (c *Consensus) sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return kv.ErrStopped
	}
}

// remoteCall is route's remote for a call of its own: one forward.
func (c *Consensus) remoteCall(call func(context.Context, peerpb.KVClient) error) func(context.Context, raft.ServerAddress) error {
	return func(ctx context.Context, addr raft.ServerAddress) error {
		return c.forward(ctx, addr, call)
	}
}

// forward makes one call on the leader at addr and maps its error back.
func (c *Consensus) forward(ctx context.Context, addr raft.ServerAddress,
	call func(context.Context, peerpb.KVClient) error) error {
	client, err := c.client(addr)
	if err != nil {
		return err
	}
	return fromStatus(call(peer.OutgoingContext(ctx, c.cfg.ClusterID, c.cfg.MemberID), client))
}

// client returns a client of the peer listener at addr.
func (c *Consensus) client(addr raft.ServerAddress) (peerpb.KVClient, error) {
	conn, err := c.conns.Get(string(addr))
	if errors.Is(err, peer.ErrConnsClosed) {
		return nil, kv.ErrStopped
	}
	if err != nil {
		return nil, err
	}
	return peerpb.NewKVClient(conn), nil
}
