package gossip

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
)

// Store is the key space a Replicator keeps in step with the other members'
// copies. kv.Server implements it. All methods are safe for concurrent use.
type Store interface {
	// ApplyRemote applies the changes whose stamps are newer than the
	// key's and returns how many it applied. It skips a change no member
	// could have made (a stamp far ahead of its clock, a key or value over
	// its limits) and returns the first such refusal, an error carrying
	// the gRPC status to answer, after applying the others.
	ApplyRemote(writes []*peerpb.Write) (int, error)
	// Digest returns one hash per bucket of the key space.
	Digest() []uint64
	// Entries returns every key state in the buckets, all when nil.
	Entries(buckets []uint32) []*peerpb.Write
}

// pullChunkWrites bounds the writes in one Pull response.
const pullChunkWrites = 1024

// peerService serves the Peer service over the member's Store.
type peerService struct {
	peerpb.UnimplementedPeerServer
	store   Store
	refused *refusals
}

var _ peerpb.PeerServer = (*peerService)(nil)

func (p *peerService) Replicate(stream grpc.ClientStreamingServer[peerpb.WriteBatch, peerpb.ReplicateSummary]) error {
	var sum peerpb.ReplicateSummary
	for {
		batch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&sum)
		}
		if err != nil {
			return err
		}
		if _, err := p.store.ApplyRemote(batch.Writes); err != nil {
			from, _ := peer.CallerMember(stream.Context())
			p.refused.warn(from, "replicated writes refused", err)
			return status.Convert(err).Err()
		}
		sum.Batches++
		sum.Writes += uint64(len(batch.Writes))
	}
}

func (p *peerService) Digest(_ context.Context, _ *peerpb.DigestRequest) (*peerpb.DigestResponse, error) {
	return &peerpb.DigestResponse{Buckets: p.store.Digest()}, nil
}

func (p *peerService) Pull(r *peerpb.PullRequest, stream grpc.ServerStreamingServer[peerpb.PullChunk]) error {
	var buckets []uint32
	if !r.All {
		if len(r.Buckets) == 0 {
			return nil
		}
		buckets = r.Buckets
	}
	entries := p.store.Entries(buckets)
	for len(entries) > 0 {
		n, bytes := 0, 0
		for n < len(entries) && n < pullChunkWrites && (n == 0 || bytes+writeBytes(entries[n]) <= maxFrameBytes) {
			bytes += writeBytes(entries[n])
			n++
		}
		if err := stream.Send(&peerpb.PullChunk{Writes: entries[:n]}); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// refusals logs what peers sent that was refused: one WARN per peer per
// refusalLogEvery, so a peer that keeps sending garbage cannot flood the log.
type refusals struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex           // guards last
	last map[uint64]time.Time // by member id: when its last refusal was logged
}

// refusalLogEvery is how often a refusal is logged per peer.
const refusalLogEvery = time.Minute

// refusalPeers bounds the peers whose last refusal is remembered; member
// ids come from the caller, so a caller could make up many.
const refusalPeers = 1024

func newRefusals(log *slog.Logger, now func() time.Time) *refusals {
	return &refusals{log: log, now: now, last: make(map[uint64]time.Time)}
}

// warn logs err, refused from member, unless a refusal from member was
// logged less than refusalLogEvery ago.
func (r *refusals) warn(member uint64, msg string, err error) {
	now := r.now()
	r.mu.Lock()
	if t, ok := r.last[member]; ok && now.Sub(t) < refusalLogEvery {
		r.mu.Unlock()
		return
	}
	if len(r.last) >= refusalPeers {
		clear(r.last)
	}
	r.last[member] = now
	r.mu.Unlock()
	r.log.Warn(msg, "peer", ID(member), "err", err)
}
