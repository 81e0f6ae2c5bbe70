package gossip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"chute/gossip/peer/peerpb"
)

// A Replicator keeps this member's key space in step with the other alive
// members'. It serves the Peer service on the peer link (gossip/peer's
// listener, which its owner starts and stops), sends every local
// change to every peer over one long-lived stream each (batched frames,
// bounded queue), and exchanges digests with each peer periodically, pulling
// the buckets that differ and pushing its own, so a change lost to a full
// queue, a broken stream or a frozen member is repaired. A new peer link
// starts with a pull, so a joining or returning member gets the whole state.

// Peer is another member as the replicator dials it.
type Peer struct {
	ID   uint64
	Addr string // host:port of its peer listener
	Boot string // this run of its process (the serf tag "boot")
}

// PeerSource tells the replicator who the other alive members are. Peers
// must be safe for concurrent use and cheap: it is polled.
type PeerSource interface {
	Peers() []Peer
}

// ReplicatorConfig configures a Replicator. Zero values are documented per
// field; NewReplicator never reads flags, files or the environment.
type ReplicatorConfig struct {
	// ClusterID is sent with every call; the peer listeners refuse calls
	// of another cluster.
	ClusterID uint64
	// MemberID identifies this member to its peers.
	MemberID uint64
	// QueueWrites bounds the changes waiting for one peer; beyond it they
	// are dropped and the next digest exchange repairs them. Zero: 65536.
	QueueWrites int
	// BatchWrites bounds the changes in one frame. Zero: 512.
	BatchWrites int
	// DigestInterval is how often digests are exchanged with each peer.
	// Zero: 2s.
	DigestInterval time.Duration
	// PeersInterval is how often the peer list is read. Zero: 200ms.
	PeersInterval time.Duration
	// Logger receives the replicator's logs. Nil: discarded.
	Logger *slog.Logger
	// Credentials secure the replicator's connections to its peers: those
	// of the peer listeners (peer.Config.Credentials). Nil: plain text.
	Credentials credentials.TransportCredentials
}

func (c ReplicatorConfig) withDefaults() ReplicatorConfig {
	if c.QueueWrites == 0 {
		c.QueueWrites = 65536
	}
	if c.BatchWrites == 0 {
		c.BatchWrites = 512
	}
	if c.DigestInterval == 0 {
		c.DigestInterval = 2 * time.Second
	}
	if c.PeersInterval == 0 {
		c.PeersInterval = 200 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Replicator is described above.
type Replicator struct {
	cfg ReplicatorConfig
	log *slog.Logger

	store Store
	peers PeerSource

	mu    sync.RWMutex // guards links
	links map[uint64]*peerLink

	refused  *refusals     // logs what peers sent that was refused
	dropped  atomic.Uint64 // changes dropped on full queues
	synced   chan struct{} // closed by markCaughtUp
	syncOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// NewReplicator builds a replicator; Start runs it.
func NewReplicator(cfg ReplicatorConfig) (*Replicator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Replicator{
		cfg:   cfg,
		log:   cfg.Logger,
		links: make(map[uint64]*peerLink),
		stop:  make(chan struct{}),
	}
	r.synced = make(chan struct{})
	return r, nil
}

// Replicate queues writes for every peer without blocking; a peer whose
// queue is full misses them until the next digest exchange. It implements
// kv.Replicator.
func (r *Replicator) Replicate(writes []*peerpb.Write) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, l := range r.links {
		for _, w := range writes {
			select {
			case l.queue <- w:
			default:
				r.dropped.Add(1)
				l.behind.Store(true)
			}
		}
	}
}

// Start registers the Peer service over store on srv, the peer listener,
// which must not serve yet, and starts following peers. Call it once.
func (r *Replicator) Start(store Store, peers PeerSource, srv grpc.ServiceRegistrar) {
	r.store, r.peers = store, peers
	r.refused = newRefusals(r.log, time.Now)
	peerpb.RegisterPeerServer(srv, &peerService{store: store, refused: r.refused})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.run()
	}()
}

// CaughtUp is closed once this member has finished a digest exchange,
// pulling what differed, with every peer it links to, at least one: it
// then holds every change those peers held. A single peer is not enough,
// as changes reach members one by one and a peer may itself be catching
// up. CaughtUp is never closed while no peer answers, so a member alone
// decides for itself whether it needs a peer. Once closed it stays so.
func (r *Replicator) CaughtUp() <-chan struct{} { return r.synced }

// checkCaughtUp closes synced when every link has finished an exchange.
func (r *Replicator) checkCaughtUp() {
	r.mu.RLock()
	defer r.mu.RUnlock()
	r.checkCaughtUpLocked()
}

// checkCaughtUpLocked is checkCaughtUp with r.mu held.
func (r *Replicator) checkCaughtUpLocked() {
	if len(r.links) == 0 {
		return
	}
	for _, l := range r.links {
		if !l.synced.Load() {
			return
		}
	}
	r.syncOnce.Do(func() { close(r.synced) })
}

// Dropped returns how many changes were dropped on full peer queues.
func (r *Replicator) Dropped() uint64 { return r.dropped.Load() }

// Shutdown closes the links; the Peer service stops with the peer
// listener. Replicate streams are cut rather than drained: what they
// carried is repaired by digests. It is safe to call more than once, and
// before Start.
func (r *Replicator) Shutdown(context.Context) error {
	r.stopOnce.Do(func() { close(r.stop) })
	r.wg.Wait()
	return nil
}

// run follows the peer list and runs the digest timer until stop.
func (r *Replicator) run() {
	peersTick := time.NewTicker(r.cfg.PeersInterval)
	defer peersTick.Stop()
	digestTick := time.NewTicker(r.cfg.DigestInterval)
	defer digestTick.Stop()
	r.syncLinks()
	for {
		select {
		case <-r.stop:
			r.mu.Lock()
			for id, l := range r.links {
				l.close()
				delete(r.links, id)
			}
			r.mu.Unlock()
			return
		case <-peersTick.C:
			r.syncLinks()
		case <-digestTick.C:
			r.mu.RLock()
			for _, l := range r.links {
				l.kick(true)
			}
			r.mu.RUnlock()
		}
	}
}

// syncLinks opens a link to every new peer and closes those of peers gone.
func (r *Replicator) syncLinks() {
	want := make(map[uint64]Peer)
	for _, p := range r.peers.Peers() {
		if p.ID != r.cfg.MemberID && p.Addr != "" {
			want[p.ID] = p
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, l := range r.links {
		if p, ok := want[id]; !ok || p.Addr != l.peer.Addr {
			l.close()
			delete(r.links, id)
			r.log.Info("peer link closed", "peer", ID(id))
		}
	}
	for id, p := range want {
		if _, ok := r.links[id]; ok {
			continue
		}
		l, err := r.newLink(p)
		if err != nil {
			r.log.Warn("peer link", "peer", ID(id), "err", err)
			continue
		}
		r.links[id] = l
		r.log.Info("peer link opened", "peer", ID(id), "addr", p.Addr)
	}
	r.checkCaughtUpLocked() // the peers not yet pulled from may be gone
}

// dialOptions are the options of the replicator's own connections.
func (r *Replicator) dialOptions() []grpc.DialOption {
	if r.cfg.Credentials == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(r.cfg.Credentials)}
}

// errRefused marks a pull ended because the store refused a chunk.
var errRefused = errors.New("gossip: pulled writes refused")

// drainPull applies every chunk of a Pull stream. Changes the store
// refuses are skipped; the first refusal is returned once the stream ends.
func drainPull(stream grpc.ServerStreamingClient[peerpb.PullChunk], store Store) (int, error) {
	n := 0
	var refused error
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, refused
		}
		if err != nil {
			return n, err
		}
		applied, err := store.ApplyRemote(chunk.Writes)
		if err != nil && refused == nil {
			refused = fmt.Errorf("%w: %w", errRefused, err)
		}
		n += applied
	}
}
