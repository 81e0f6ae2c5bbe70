package raftkv

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/kv"
)

// service is the KV peer service: the calls followers forward to the
// leader. A member that does not lead answers "not leader" and never
// forwards again, so a call crosses the link at most once; the
// follower's route tries the next leader.
type service struct {
	peerpb.UnimplementedKVServer
	c *Consensus
}

var _ peerpb.KVServer = (*service)(nil)

func (s *service) Propose(ctx context.Context, in *peerpb.ProposeRequest) (*peerpb.ProposeResponse, error) {
	if err := s.checkBatch(ctx, in.Commands); err != nil {
		return nil, toStatus(err)
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	results, err := s.c.applyBatch(ctx, in.Commands)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerpb.ProposeResponse{Results: results}, nil
}

// checkBatch bounds a forwarded call as a follower's Propose does: at
// least one command, at most maxBatchCommands, none over
// MaxCommandBytes; a refusal is logged with the caller.
func (s *service) checkBatch(ctx context.Context, cmds [][]byte) error {
	var err error
	switch {
	case len(cmds) == 0:
		err = fmt.Errorf("%w: no command", ErrBadBatch)
	case len(cmds) > maxBatchCommands:
		err = fmt.Errorf("%w: %d commands, at most %d", ErrBadBatch, len(cmds), maxBatchCommands)
	}
	for _, cmd := range cmds {
		if n := len(cmd); err == nil && n > s.c.cfg.MaxCommandBytes {
			err = fmt.Errorf("%w: %d bytes, at most %d", ErrCommandTooLarge, n, s.c.cfg.MaxCommandBytes)
		}
	}
	if err != nil {
		from, _ := peer.CallerMember(ctx)
		s.c.log.Warn("refused forwarded commands", "from", fmt.Sprintf("%016x", from), "err", err)
	}
	return err
}

func (s *service) ReadIndex(ctx context.Context, _ *peerpb.ReadIndexRequest) (*peerpb.ReadIndexResponse, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	index, err := s.c.leaderRead(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerpb.ReadIndexResponse{Index: index}, nil
}

func (s *service) LeaseRenew(ctx context.Context, in *peerpb.LeaseRenewRequest) (*peerpb.LeaseRenewResponse, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	ttl, err := s.c.renewLocal(ctx, in.Id)
	if err != nil {
		return nil, toStatus(err)
	}
	return &peerpb.LeaseRenewResponse{Ttl: ttl}, nil
}

// begin refuses a call this member cannot serve, stopped or not
// leading, and bounds the rest by ApplyTimeout.
func (s *service) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.c.stopped() {
		return nil, nil, toStatus(kv.ErrStopped)
	}
	if s.c.raft.State() != raft.Leader {
		return nil, nil, toStatus(kv.ErrNotLeader)
	}
	ctx, cancel := s.c.callContext(ctx)
	return ctx, cancel, nil
}
