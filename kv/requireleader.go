package kv

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// A client that sets etcd's "hasleader" metadata
// (clientv3.WithRequireLeader; clientv3's lease keep-alives always do)
// asks a member that knows no raft leader to fail its calls with
// "etcdserver: no leader" rather than serve them, so that it moves to a
// member on the majority's side. As in etcd, a call is refused at its
// start, and a stream already running is ended with that error once the
// member has known no leader for noLeaderChecks checks in a row (a watch
// on a member cut off from the others would otherwise wait forever,
// quietly). A member alone always has a leader: itself. Queue puts are
// refused too: a client that sets the metadata asked for a leader.

// noLeaderChecks is how many checks in a row (Config.LeaderCheckInterval
// apart) must find no leader before the streams that require one end:
// etcd ends them after three election timeouts, about three seconds with
// its defaults.
const noLeaderChecks = 3

// requiresLeader reports whether the call's metadata asks for a leader.
// It runs on every call: it looks the one key up rather than copy the
// metadata (metadata.FromIncomingContext does).
func requiresLeader(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, rpctypes.MetadataRequireLeaderKey)
	return len(v) > 0 && v[0] == rpctypes.MetadataHasLeader
}

// hasNoLeader reports whether this member, part of a cluster, knows no
// leader.
func (s *Server) hasNoLeader() bool {
	return s.consensus != nil && s.consensus.Status().Leader == 0
}

// requireLeaderUnary refuses a call that asks for a leader while this
// member knows none. It asks raft first: a client that does not set the
// metadata makes requiresLeader compare each of the call's keys with
// it, 1.8% of a node's CPU per single put in a CPU profile of 100
// clients putting, where reading raft's Status took 0.2%.
func (s *Server) requireLeaderUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.hasNoLeader() && requiresLeader(ctx) {
		return nil, rpctypes.ErrGRPCNoLeader
	}
	return handler(ctx, req)
}

// requireLeaderStream refuses a stream that asks for a leader while this
// member knows none, and hands the others to leaderStreams, which ends
// them once the member has lost its leader.
func (s *Server) requireLeaderStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !requiresLeader(ss.Context()) || s.consensus == nil {
		return handler(srv, ss)
	}
	if s.hasNoLeader() {
		return rpctypes.ErrGRPCNoLeader
	}
	ctx, cancel := context.WithCancelCause(ss.Context())
	defer cancel(nil)
	done := s.leaderStreams.add(cancel)
	defer done()
	err := handler(srv, ctxStream{ServerStream: ss, ctx: ctx})
	if errors.Is(context.Cause(ctx), ErrNoLeader) {
		return rpctypes.ErrGRPCNoLeader
	}
	return err
}

// ctxStream is a stream whose handlers see ctx as its context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// leaderStreams is the running streams that asked for a leader, each by
// the cancel of its context.
type leaderStreams struct {
	mu      sync.Mutex // guards streams and next
	streams map[uint64]context.CancelCauseFunc
	next    uint64
}

// add registers a stream's cancel and returns its removal.
func (l *leaderStreams) add(cancel context.CancelCauseFunc) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams == nil {
		l.streams = make(map[uint64]context.CancelCauseFunc)
	}
	id := l.next
	l.next++
	l.streams[id] = cancel
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.streams, id)
	}
}

// endAll ends every registered stream with ErrNoLeader and returns how
// many it ended.
func (l *leaderStreams) endAll() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.streams)
	for id, cancel := range l.streams {
		cancel(ErrNoLeader)
		delete(l.streams, id)
	}
	return n
}

// runLeaderStreams checks every LeaderCheckInterval whether this member
// knows a leader, and ends the streams that asked for one after
// noLeaderChecks misses in a row, until the server stops.
func (s *Server) runLeaderStreams() {
	t := time.NewTicker(s.cfg.LeaderCheckInterval)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if !s.hasNoLeader() {
			misses = 0
			continue
		}
		if misses++; misses >= noLeaderChecks {
			misses = 0
			if n := s.leaderStreams.endAll(); n > 0 {
				s.log.Info("no leader: ended the streams that require one", "streams", n)
			}
		}
	}
}
