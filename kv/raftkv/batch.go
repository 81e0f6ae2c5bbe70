package raftkv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
	"chute/kv"
)

// Bounds of one forwarded Propose call (group commit): a follower sends
// the commands that gathered while its earlier calls were on the way,
// with at most maxInFlight calls to one leader at a time.
const (
	maxBatchCommands = peerpb.MaxProposeCommands // commands in one call; the leader refuses more
	maxBatchBytes    = 4 << 20                   // bytes of commands in one call, past the first
	maxInFlight      = 4                         // calls in flight to one leader
)

// proposal is one command waiting for its forwarded call.
type proposal struct {
	cmd  []byte
	done chan error // buffered: the sender never waits for the caller
}

// proposeQueue is the commands waiting to be forwarded to one leader
// and the senders forwarding them.
type proposeQueue struct {
	c       *Consensus
	addr    raft.ServerAddress
	mu      sync.Mutex // guards pending and senders
	pending []*proposal
	senders int
}

// proposeRemote forwards cmd to the leader at addr in the next call to
// it and returns the command's outcome, or ctx's end.
func (c *Consensus) proposeRemote(ctx context.Context, addr raft.ServerAddress, cmd []byte) error {
	q := c.proposeQueue(addr)
	p := &proposal{cmd: cmd, done: make(chan error, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, p)
	start := q.senders < maxInFlight
	if start {
		q.senders++
	}
	q.mu.Unlock()
	if start && !c.goAttach(q.run) {
		return kv.ErrStopped
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.stop:
		return kv.ErrStopped
	}
}

// proposeQueue returns the queue to the leader at addr, made on first
// use. A member knows a few leaders in its life, so queues are kept.
func (c *Consensus) proposeQueue(addr raft.ServerAddress) *proposeQueue {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[addr]
	if q == nil {
		q = &proposeQueue{c: c, addr: addr}
		c.queues[addr] = q
	}
	return q
}

// run is a sender: it forwards what is pending, a call at a time, until
// nothing is.
func (q *proposeQueue) run() {
	for {
		batch := q.take()
		if batch == nil {
			return
		}
		q.send(batch)
	}
}

// take removes the next call's commands from pending, or, when none are
// left, ends the sender that asks and returns nil.
func (q *proposeQueue) take() []*proposal {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		q.senders--
		q.pending = nil // lets a burst's backing array go
		return nil
	}
	n, size := 0, 0
	for n < len(q.pending) && n < maxBatchCommands {
		size += len(q.pending[n].cmd)
		if n > 0 && size > maxBatchBytes {
			break
		}
		n++
	}
	batch := q.pending[:n:n]
	q.pending = q.pending[n:]
	return batch
}

// send makes one call with batch's commands, bounded by ApplyTimeout
// and Close, and hands each its outcome: the call's error when it
// failed as a whole, else the command's own result.
func (q *proposeQueue) send(batch []*proposal) {
	c := q.c
	cmds := make([][]byte, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	ctx, cancel := context.WithTimeoutCause(c.life, c.cfg.ApplyTimeout, kv.ErrTimeout)
	defer cancel()
	c.forwards.Add(1)
	var out *peerpb.ProposeResponse
	var sent error // the call's own error, before fromStatus
	err := c.forward(ctx, q.addr, func(ctx context.Context, leader peerpb.KVClient) error {
		out, sent = leader.Propose(ctx, &peerpb.ProposeRequest{Commands: cmds})
		return sent
	})
	switch {
	case err != nil && ctx.Err() != nil && endedByContext(err):
		err = context.Cause(ctx)
	case sent != nil && errors.Is(err, errLeaderGone) && !refusedUnsent(sent):
		// The leader may have applied the commands before the call
		// broke: another try could apply them twice, so the caller
		// learns that the outcome is unknown, as etcd's clients do.
		err = fmt.Errorf("%w: the call to the leader broke: %w", kv.ErrLeaderChanged, sent)
	case err == nil && len(out.Results) != len(batch):
		// A peer is trusted to be a member, not to be correct; whether
		// the commands were applied is unknown, so none is tried again.
		err = fmt.Errorf("raftkv: the leader answered %d results for %d commands", len(out.Results), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- err
			continue
		}
		p.done <- resultError(out.Results[i])
	}
}

// refusedUnsent reports whether a forwarded call's error proves that its
// commands were not applied: the leader refused them (not leader, before
// raft took them) or the connection to it was never made. A call that
// broke on the way (a reset, a closing transport, a leader that stopped
// with commands in flight) may have been applied.
func refusedUnsent(err error) bool {
	if errors.Is(err, rpctypes.ErrGRPCNotLeader) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	msg := st.Message()
	return strings.Contains(msg, "Error while dialing") || strings.Contains(msg, "connect: connection refused") ||
		strings.Contains(msg, "there is no address available")
}

// resultError is the error of one command's result, mapped back as a
// whole call's would be (fromStatus).
func resultError(r *peerpb.ProposeResult) error {
	if r.Code == uint32(codes.OK) {
		return nil
	}
	return fromStatus(status.Error(codes.Code(r.Code), r.Message))
}

// applyBatch applies cmds through this member's raft, in order, in the
// entries of its apply queue (pack.go), and returns each one's result
// once raft answered all of them, or ctx's end.
func (c *Consensus) applyBatch(ctx context.Context, cmds [][]byte) ([]*peerpb.ProposeResult, error) {
	out, err := c.applies.apply(ctx, 0, cmds)
	if err != nil {
		return nil, err
	}
	results := make([]*peerpb.ProposeResult, len(cmds))
	for i, ch := range out {
		select {
		case o := <-ch:
			r := &peerpb.ProposeResult{Index: o.index}
			if o.err != nil {
				st := status.Convert(toStatus(o.err))
				r.Code, r.Message = uint32(st.Code()), st.Message()
			}
			results[i] = r
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-c.stop:
			return nil, kv.ErrStopped
		}
	}
	return results, nil
}
