package raftpeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/gossip/peer/peerpb"
)

// service is the Raft service: it checks what a peer sends against the
// Config's bounds, hands it to raft and answers with raft's answer. A peer
// is trusted to be a member (the peer listener checked that), not to be
// correct.
type service struct {
	peerpb.UnimplementedRaftServer
	t *Transport
}

var _ peerpb.RaftServer = (*service)(nil)

func (s *service) AppendEntries(ctx context.Context, in *peerpb.RaftRequest) (*peerpb.RaftResponse, error) {
	var req raft.AppendEntriesRequest
	if err := s.t.decodeRequest(in.Msgpack, &req); err != nil {
		return nil, toStatus(err)
	}
	return s.t.serve(ctx, &req, isHeartbeat(&req))
}

func (s *service) RequestVote(ctx context.Context, in *peerpb.RaftRequest) (*peerpb.RaftResponse, error) {
	var req raft.RequestVoteRequest
	if err := s.t.decodeRequest(in.Msgpack, &req); err != nil {
		return nil, toStatus(err)
	}
	return s.t.serve(ctx, &req, false)
}

func (s *service) RequestPreVote(ctx context.Context, in *peerpb.RaftRequest) (*peerpb.RaftResponse, error) {
	var req raft.RequestPreVoteRequest
	if err := s.t.decodeRequest(in.Msgpack, &req); err != nil {
		return nil, toStatus(err)
	}
	return s.t.serve(ctx, &req, false)
}

func (s *service) TimeoutNow(ctx context.Context, in *peerpb.RaftRequest) (*peerpb.RaftResponse, error) {
	var req raft.TimeoutNowRequest
	if err := s.t.decodeRequest(in.Msgpack, &req); err != nil {
		return nil, toStatus(err)
	}
	return s.t.serve(ctx, &req, false)
}

// AppendEntriesPipeline answers each request before it reads the next, so
// answers go out in the order of the requests. A request out of bounds
// ends the stream.
func (s *service) AppendEntriesPipeline(stream grpc.BidiStreamingServer[peerpb.RaftRequest, peerpb.RaftResponse]) error {
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var req raft.AppendEntriesRequest
		if err := s.t.decodeRequest(in.Msgpack, &req); err != nil {
			return toStatus(err)
		}
		out, err := s.t.serve(stream.Context(), &req, false)
		if err != nil {
			return err
		}
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}

// InstallSnapshot hands raft the request with a reader of the chunks that
// follow it, and checks them as they come: each at most
// SnapshotChunkBytes, all together exactly the announced size. A stream
// out of bounds fails raft's read and is answered with the bound's error.
func (s *service) InstallSnapshot(stream grpc.ClientStreamingServer[peerpb.SnapshotChunk, peerpb.RaftResponse]) error {
	t, ctx := s.t, stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	var req raft.InstallSnapshotRequest
	if err := t.decodeRequest(first.Request, &req); err != nil {
		return toStatus(err)
	}
	if len(first.Data) > 0 {
		return toStatus(fmt.Errorf("%w: snapshot data before the request", ErrMalformed))
	}
	if req.Size < 0 || req.Size > t.cfg.MaxSnapshotBytes {
		return toStatus(fmt.Errorf("%w: announced %d bytes, at most %d", ErrSnapshotTooLarge, req.Size, t.cfg.MaxSnapshotBytes))
	}
	in := &snapshotReader{chunks: make(chan []byte), stop: t.ctx.Done(), timeout: t.cfg.Timeout,
		deadline: time.Now().Add(t.snapshotTimeout(req.Size))}
	respCh := make(chan raft.RPCResponse, 1)
	if err := t.dispatch(ctx, raft.RPC{Command: &req, Reader: in, RespChan: respCh}, false); err != nil {
		return toStatus(err)
	}
	ended := t.feedSnapshot(stream, req.Size, in, respCh)
	in.finish(ended)
	select {
	case r := <-respCh:
		if ended != nil {
			return toStatus(ended)
		}
		out, err := t.encodeResponse(r)
		if err != nil {
			return toStatus(err)
		}
		return stream.SendAndClose(out)
	case <-ctx.Done():
		return toStatus(ctx.Err())
	case <-t.ctx.Done():
		return toStatus(raft.ErrTransportShutdown)
	}
}

// feedSnapshot passes the stream's chunks to in until the stream ends, and
// returns why it ended if not as announced. It stops early, returning nil,
// when raft answered without reading all.
func (t *Transport) feedSnapshot(stream grpc.ClientStreamingServer[peerpb.SnapshotChunk, peerpb.RaftResponse], size int64, in *snapshotReader, respCh chan raft.RPCResponse) error {
	ctx := stream.Context()
	var got int64
	for {
		c, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF) && got < size:
			return fmt.Errorf("%w: %d bytes, announced %d", ErrSnapshotSize, got, size)
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		case len(c.Request) > 0:
			return fmt.Errorf("%w: a second request in a snapshot stream", ErrMalformed)
		case len(c.Data) > t.cfg.SnapshotChunkBytes:
			return fmt.Errorf("%w: chunk of %d bytes, at most %d", ErrSnapshotTooLarge, len(c.Data), t.cfg.SnapshotChunkBytes)
		case int64(len(c.Data)) > size-got:
			return fmt.Errorf("%w: more than the announced %d bytes", ErrSnapshotSize, size)
		}
		got += int64(len(c.Data))
		if len(c.Data) == 0 {
			continue
		}
		select {
		case in.chunks <- c.Data:
		case r := <-respCh:
			respCh <- r // for the caller, which waits for it; respCh holds one
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.ctx.Done():
			return raft.ErrTransportShutdown
		}
	}
}

// serve hands one request to raft, a heartbeat to the heartbeat handler
// when one is set, and returns raft's answer.
func (t *Transport) serve(ctx context.Context, cmd any, heartbeat bool) (*peerpb.RaftResponse, error) {
	respCh := make(chan raft.RPCResponse, 1)
	if err := t.dispatch(ctx, raft.RPC{Command: cmd, RespChan: respCh}, heartbeat); err != nil {
		return nil, toStatus(err)
	}
	select {
	case r := <-respCh:
		out, err := t.encodeResponse(r)
		return out, toStatus(err)
	case <-ctx.Done():
		return nil, toStatus(ctx.Err())
	case <-t.ctx.Done():
		return nil, toStatus(raft.ErrTransportShutdown)
	}
}

// dispatch hands rpc to raft, waiting at most Timeout for raft to take it.
// raft answers on rpc.RespChan, which must hold one answer.
func (t *Transport) dispatch(ctx context.Context, rpc raft.RPC, heartbeat bool) error {
	if err := t.checkAddressee(ctx); err != nil {
		return err
	}
	if err := t.checkCluster(ctx, rpc.Command); err != nil {
		return err
	}
	if heartbeat {
		if fn := t.heartbeatHandler(); fn != nil {
			fn(rpc)
			return nil
		}
	}
	timer := time.NewTimer(t.cfg.Timeout)
	defer timer.Stop()
	select {
	case t.consumeCh <- rpc:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.ctx.Done():
		return raft.ErrTransportShutdown
	case <-timer.C:
		return fmt.Errorf("%w: raft did not take the request within %v", ErrStalled, t.cfg.Timeout)
	}
}

// isHeartbeat reports whether req is a heartbeat, by the test raft's
// NetworkTransport uses: a term and a leader, and nothing else. Every
// member runs raft 1.8, which names the leader in RPCHeader.Addr, so the
// deprecated Leader field is not consulted.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return req.Term != 0 && len(req.Addr) != 0 &&
		req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}
