package gossip

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/internal/backoff"
)

// reconcileTimeout bounds one digest exchange with its pull.
const reconcileTimeout = 30 * time.Second

// peerLink is the replicator's connection to one peer: a send loop that
// owns the Replicate stream and a digest loop that reconciles on request.
// Both stop when the link is closed.
type peerLink struct {
	r      *Replicator
	peer   Peer
	conn   *grpc.ClientConn
	client peerpb.PeerClient
	ctx    context.Context // carries this member's identity; cancelled by close
	cancel context.CancelFunc

	queue      chan *peerpb.Write
	behind     atomic.Bool   // changes for this peer were lost: push at the next exchange
	synced     atomic.Bool   // an exchange with this peer finished: see Replicator.CaughtUp
	wantPush   atomic.Bool   // the pending exchange should also push
	reconcileC chan struct{} // capacity 1: an exchange is pending
}

func (r *Replicator) newLink(p Peer) (*peerLink, error) {
	conn, err := peer.Dial(p.Addr, r.dialOptions()...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(peer.OutgoingContext(context.Background(), r.cfg.ClusterID, r.cfg.MemberID))
	l := &peerLink{
		r:          r,
		peer:       p,
		conn:       conn,
		client:     peerpb.NewPeerClient(conn),
		ctx:        ctx,
		cancel:     cancel,
		queue:      make(chan *peerpb.Write, r.cfg.QueueWrites),
		reconcileC: make(chan struct{}, 1),
	}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		l.sendLoop()
	}()
	go func() {
		defer r.wg.Done()
		l.reconcileLoop()
	}()
	l.kick(false) // a new link starts with a pull
	return l, nil
}

// close stops the link's loops and its connection.
func (l *peerLink) close() {
	l.cancel()
	_ = l.conn.Close()
}

// kick asks for a digest exchange; push also sends this member's differing
// buckets to the peer.
func (l *peerLink) kick(push bool) {
	if push {
		l.wantPush.Store(true)
	}
	select {
	case l.reconcileC <- struct{}{}:
	default:
	}
}

// sendLoop keeps a Replicate stream open and pumps the queue into it,
// reconnecting with backoff. A broken stream loses what it was sending;
// the exchange it triggers repairs that.
func (l *peerLink) sendLoop() {
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for l.ctx.Err() == nil {
		stream, err := l.client.Replicate(l.ctx)
		if err == nil {
			b.Reset()
			err = l.pump(stream)
		}
		if l.ctx.Err() != nil {
			return
		}
		l.r.log.Debug("replication stream", "peer", ID(l.peer.ID), "err", err)
		l.behind.Store(true)
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(b.Next()):
		}
		l.kick(true)
	}
}

// pump sends batches until the stream fails or the link closes.
func (l *peerLink) pump(stream grpc.ClientStreamingClient[peerpb.WriteBatch, peerpb.ReplicateSummary]) error {
	limit := l.r.cfg.BatchWrites
	batch := make([]*peerpb.Write, 0, limit)
	for {
		batch = batch[:0]
		select {
		case w := <-l.queue:
			batch = append(batch, w)
		case <-l.ctx.Done():
			_, _ = stream.CloseAndRecv()
			return l.ctx.Err()
		}
		bytes := writeBytes(batch[0])
	drain:
		for len(batch) < limit && bytes < maxFrameBytes {
			select {
			case w := <-l.queue:
				batch = append(batch, w)
				bytes += writeBytes(w)
			default:
				break drain
			}
		}
		// SendMsg encodes before it returns, so batch may be reused.
		if err := stream.Send(&peerpb.WriteBatch{Writes: batch}); err != nil {
			return err
		}
	}
}

// maxFrameBytes bounds the key and value bytes of one replication frame or
// pull chunk (one may exceed it by a single write), far below the peer
// connection's message limit.
const maxFrameBytes = 4 << 20

func writeBytes(w *peerpb.Write) int { return len(w.Key) + len(w.Value) }

// pulled records that this member holds what the peer held at the
// exchange that just finished.
func (l *peerLink) pulled() {
	if !l.synced.Swap(true) {
		l.r.checkCaughtUp()
	}
}

// reconcileLoop runs the exchanges asked for until the link closes.
func (l *peerLink) reconcileLoop() {
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.reconcileC:
			if err := l.reconcile(l.wantPush.Swap(false)); err != nil && l.ctx.Err() == nil {
				l.r.log.Debug("digest exchange", "peer", ID(l.peer.ID), "err", err)
			}
		}
	}
}

// reconcile compares digests with the peer, pulls the buckets that differ
// and, when push is set or changes for the peer were lost, queues this
// member's state of those buckets for it.
func (l *peerLink) reconcile(push bool) error {
	ctx, cancel := context.WithTimeout(l.ctx, reconcileTimeout)
	defer cancel()
	store := l.r.store
	mine := store.Digest()
	resp, err := l.client.Digest(ctx, &peerpb.DigestRequest{Buckets: mine})
	if err != nil {
		return err
	}
	var diff []uint32
	for i, h := range mine {
		if i >= len(resp.Buckets) || resp.Buckets[i] != h {
			diff = append(diff, uint32(i))
		}
	}
	if len(diff) == 0 {
		l.behind.Store(false)
		l.pulled()
		return nil
	}
	stream, err := l.client.Pull(ctx, &peerpb.PullRequest{Buckets: diff})
	if err != nil {
		return err
	}
	if _, err := drainPull(stream, store); err != nil {
		if errors.Is(err, errRefused) {
			// The rest was applied: what the peer could send is here.
			l.pulled()
			l.r.refused.warn(l.peer.ID, "pulled writes refused", err)
		}
		return err
	}
	l.pulled()
	if push || l.behind.Swap(false) {
		for _, w := range store.Entries(diff) {
			select {
			case l.queue <- w:
			default:
				l.r.dropped.Add(1)
				l.behind.Store(true)
			}
		}
	}
	return nil
}
