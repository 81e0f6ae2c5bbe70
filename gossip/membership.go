package gossip

// Design notes: membership.
//
// A Membership is one serf agent (serf over memberlist: SWIM failure
// detection plus gossip) and three goroutines of ours: the event loop, the
// join loop and, while Leave runs, the leave call. Shutdown stops them and
// waits for them (Membership.wg).
//
//   - Identity. Serf's node name is Config.Name; the member id is
//     MemberID(name), computed, never read from the wire. The tags carry
//     "cluster", "id" (hex member id, for tools), "peer" and "client"
//     (comma-joined URLs), "version", "boot" and "started"; they are
//     fixed for the life of the Membership. SetTags adds or replaces other
//     packages' tags beside them (serf's encoded tags are limited to 512
//     bytes), and the other members see the change as an EventUpdate.
//   - Clusters never merge. memberlist's Label is the cluster name: it
//     prefixes every packet and stream (and is GCM additional data when a
//     key is set), and a node drops whatever carries another label. A serf
//     merge delegate (clusterMerge) also refuses any member whose
//     "cluster" tag differs, on join and on every alive message.
//   - Encryption. Config.Key is memberlist's SecretKey with
//     GossipVerifyIncoming/Outgoing on: a node with another key, or none,
//     cannot decrypt or be decrypted, so its join fails.
//   - Joining. New binds but does not join. Start runs the join loop: every
//     round tries the seeds in order, one serf.Join per seed, and stops at
//     the first seed that answers and leaves us with another alive member
//     (a DNS name may resolve to ourselves); otherwise it waits a jittered,
//     doubling backoff. Nodes therefore start in any order. Being joined by
//     others does not stop the loop: our own seeds may be in yet another
//     partial cluster, which only our join merges.
//   - Events. serf's event channel is buffered and read by one loop that
//     converts member events to Event values and offers each to every
//     subscriber without blocking; a full subscriber loses the event and
//     the loss is counted (Dropped). serf sends while holding its member
//     lock, so nothing may block that loop.
//   - Leaving. Leave is serf's Leave: broadcast the intent, leave
//     memberlist, wait LeavePropagateDelay. Others then report "left"
//     instead of "failed". Shutdown without Leave looks like a crash.
//     Two serf hazards are fenced: a Join that finishes after Leave began
//     broadcasts a newer join intent, and the others then report the node
//     failed (joinMu serializes the two); and memberlist panics when it
//     leaves after shutdown, so Shutdown waits for a Leave in flight.
//   - Unique names: see names.go. A node that finds an earlier node
//     under its name stops serf; Stopped reports it, and any other
//     shutdown of serf that Shutdown did not ask for.
//   - Locks: mu guards the subscriber set and lifecycle flags; joinMu
//     serializes serf.Join with serf.Leave. They are never held together.
//   - Failure detection: see fastTimings and lanTimings in config.go.
//   - No state on disk (no serf snapshot): a restarted node rejoins
//     through its seeds, and a node that comes back under its name from
//     another address may reclaim the name once memberlist's
//     DeadNodeReclaimTime has passed. A node restarted at its address
//     while the others still gossip about its previous run must not hear
//     of itself before memberlist lists it alive: see gatedTransport.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// ErrShutdown is returned by Leave once Shutdown has been called.
var ErrShutdown = errors.New("gossip: membership is shut down")

// ErrSerfStopped is wrapped by Err when serf shut down without Shutdown
// asking it to: the node is out of the cluster for good.
var ErrSerfStopped = errors.New("gossip: serf stopped without being asked")

// serfEventBuffer is the capacity of the channel between serf and the
// event loop. serf blocks on it while holding its member lock, so it is
// large enough to absorb bursts while the loop fans out.
const serfEventBuffer = 1024

// resolveTimeout bounds New's DNS lookups of the bind and advertise hosts.
const resolveTimeout = 5 * time.Second

// Status is a member's state as serf reports it. The zero Status is not a
// state (String: "unknown").
type Status int

// Statuses of a member.
const (
	StatusAlive   Status = iota + 1 // answering probes
	StatusLeaving                   // announced a leave that is in progress
	StatusLeft                      // left gracefully
	StatusFailed                    // stopped answering probes
)

func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusLeaving:
		return "leaving"
	case StatusLeft:
		return "left"
	case StatusFailed:
		return "failed"
	default:
		return "unknown"
	}
}

func statusFromSerf(s serf.MemberStatus) Status {
	switch s {
	case serf.StatusAlive:
		return StatusAlive
	case serf.StatusLeaving:
		return StatusLeaving
	case serf.StatusLeft:
		return StatusLeft
	case serf.StatusFailed:
		return StatusFailed
	default:
		return 0
	}
}

// Member is one node as this node's serf knows it. The slices are the
// caller's.
type Member struct {
	Name       string
	ID         uint64 // MemberID(Name)
	Addr       string // gossip host:port
	PeerURLs   []string
	ClientURLs []string
	Version    string
	Boot       string // this run of its process
	Status     Status
	// Leaving: the member began to stop (MarkLeaving), and still answers
	// while it hands its work over.
	Leaving bool
	// Tags are the tags other packages publish with SetTags (raft's, for
	// one); nil when there are none. chute's own tags are the fields above.
	Tags map[string]string
}

func memberFromSerf(sm serf.Member) Member {
	return Member{
		Name:       sm.Name,
		ID:         MemberID(sm.Name),
		Addr:       net.JoinHostPort(sm.Addr.String(), strconv.Itoa(int(sm.Port))),
		PeerURLs:   splitTag(sm.Tags[tagPeer]),
		ClientURLs: splitTag(sm.Tags[tagClient]),
		Version:    sm.Tags[tagVersion],
		Boot:       sm.Tags[tagBoot],
		Status:     statusFromSerf(sm.Status),
		Leaving:    sm.Tags[tagLeaving] == "1",
		Tags:       extraTags(sm.Tags),
	}
}

// extraTags returns the tags of tags that are not chute's own, or nil.
func extraTags(tags map[string]string) map[string]string {
	var out map[string]string
	for k, v := range tags {
		if ownTag(k) {
			continue
		}
		if out == nil {
			out = make(map[string]string)
		}
		out[k] = v
	}
	return out
}

func splitTag(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// clusterMerge is serf's merge delegate: it refuses members of another
// cluster (or of none), whether they come in a join's state exchange or in
// an alive message.
type clusterMerge struct {
	cluster string
}

var _ serf.MergeDelegate = clusterMerge{}

func (d clusterMerge) NotifyMerge(members []*serf.Member) error {
	for _, m := range members {
		if got := m.Tags[tagCluster]; got != d.cluster {
			return fmt.Errorf("gossip: member %q is in cluster %q, not %q", m.Name, got, d.cluster)
		}
	}
	return nil
}

// Membership is this node's view of the cluster. Its methods are safe for
// concurrent use.
type Membership struct {
	log  *slog.Logger
	name string
	serf *serf.Serf
	// serfConf is serf's configuration, which serf keeps and reads;
	// tests shorten its BroadcastTimeout.
	serfConf *serf.Config
	events   chan serf.Event   // serf -> eventLoop
	seeds    []string          // Config.Join without our own address
	own      map[string]string // chute's own tags; read-only after New

	tagsMu     sync.Mutex        // guards extra and leavingTag, and serializes tag updates
	extra      map[string]string // the tags of the last SetTags
	leavingTag bool              // MarkLeaving published the leaving tag

	joinBackoffMin, joinBackoffMax time.Duration

	stop       chan struct{} // closed by Shutdown
	leaving    chan struct{} // closed by the first Leave
	leaveOnce  sync.Once
	joined     chan struct{} // closed by markJoined
	joinedOnce sync.Once
	stopped    chan struct{} // closed by markStopped
	conflict   chan struct{} // nameGuard found an older claimant; cap 1

	// joinMu is held around every serf.Join and around serf.Leave. A join
	// that ends after a leave began would broadcast a join intent newer
	// than the leave intent, and the others would then report this node
	// failed, not left.
	joinMu sync.Mutex

	dropped atomic.Uint64 // events lost to full subscribers

	// seedsSelf is set when there is no other node to join: no seeds, or
	// a join round in which every seed answered as this node.
	seedsSelf atomic.Bool

	// peersGen counts serf member events; peers caches Peers' answer for
	// one generation.
	peersGen atomic.Uint64
	peers    atomic.Pointer[peerList]

	mu      sync.Mutex // guards the fields below and wg.Add
	started bool
	closed  bool  // Shutdown called: no new goroutines
	stopErr error // why serf stopped on its own; set before stopped closes
	nameErr error // the first name conflict this node lost
	subs    map[*subscriber]struct{}

	wg           sync.WaitGroup // every goroutine of ours
	leaveWG      sync.WaitGroup // serf.Leave calls in flight
	shutdownOnce sync.Once
	shutdownErr  error
}

// New validates cfg, resolves its addresses and creates the serf agent,
// bound to cfg.BindAddr. It does not join: Start does.
func New(cfg Config) (*Membership, error) {
	if cfg.Boot == "" {
		cfg.Boot = strconv.FormatUint(rand.Uint64(), 36)
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	bind, err := resolveGossipAddr(ctx, cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip: bind address %q: %w", cfg.BindAddr, err)
	}
	advertise := bind
	if cfg.AdvertiseAddr != "" {
		if advertise, err = resolveGossipAddr(ctx, cfg.AdvertiseAddr); err != nil {
			return nil, fmt.Errorf("gossip: advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
	}
	if ip := net.ParseIP(advertise.host); ip != nil && ip.IsUnspecified() {
		advertise.host = "" // memberlist picks a private address
	}

	m := &Membership{
		log:      logger,
		name:     cfg.Name,
		events:   make(chan serf.Event, serfEventBuffer),
		stop:     make(chan struct{}),
		leaving:  make(chan struct{}),
		joined:   make(chan struct{}),
		stopped:  make(chan struct{}),
		conflict: make(chan struct{}, 1),
		subs:     make(map[*subscriber]struct{}),
	}
	m.joinBackoffMin, m.joinBackoffMax = cfg.joinBackoff()
	for _, seed := range cfg.Join {
		if seed == cfg.BindAddr || seed == cfg.AdvertiseAddr {
			continue
		}
		m.seeds = append(m.seeds, seed)
	}
	if len(m.seeds) == 0 {
		m.seedsSelf.Store(true)
		m.markJoined()
	}

	names := &nameGuard{
		name:    cfg.Name,
		boot:    cfg.Boot,
		started: cfg.Started.UnixMilli(),
		log:     logger,
		yield:   m.lostName,
	}
	sc := cfg.serfConfig(bind, advertise, m.events, names, newSerfLogger(logger))
	m.own = cfg.tags()
	m.extra = maps.Clone(cfg.Tags)
	m.serfConf = sc
	ml := sc.MemberlistConfig
	tr, err := newGatedTransport(ml.BindAddr, ml.BindPort, ml.Logger)
	if err != nil {
		return nil, fmt.Errorf("gossip: start serf on %s: %w", cfg.BindAddr, err)
	}
	ml.Transport = tr
	if m.serf, err = serf.Create(sc); err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("gossip: start serf on %s: %w", cfg.BindAddr, err)
	}
	tr.open() // memberlist has set us alive: see gatedTransport
	local := m.Local()
	names.bound(local.Addr)
	logger.Info("gossip bound", "name", local.Name, "member_id", ID(local.ID),
		"bind", cfg.BindAddr, "advertise", local.Addr, "cluster", cfg.Cluster,
		"encrypted", len(cfg.Key) > 0, "seeds", len(m.seeds))
	return m, nil
}

// resolveGossipAddr returns addr with its host as an IP literal (IPv4
// preferred) or empty. addr has passed Validate.
func resolveGossipAddr(ctx context.Context, addr string) (resolvedAddr, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return resolvedAddr{}, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return resolvedAddr{}, err
	}
	if host == "" || net.ParseIP(host) != nil {
		return resolvedAddr{host: host, port: port}, nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return resolvedAddr{}, err
	}
	if len(ips) == 0 {
		return resolvedAddr{}, fmt.Errorf("%s resolves to no address", host)
	}
	pick := ips[0].IP
	for _, ip := range ips {
		if ip.IP.To4() != nil {
			pick = ip.IP
			break
		}
	}
	return resolvedAddr{host: pick.String(), port: port}, nil
}

// Start starts the event loop and, when there are seeds, the join loop.
// It returns at once; only the first call, before Shutdown, does anything.
// Call it soon after New: until then serf's events queue up (1024 fit).
func (m *Membership) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	m.wg.Add(1)
	go m.eventLoop()
	if len(m.seeds) > 0 {
		m.wg.Add(1)
		go m.joinLoop()
	}
}

// Local returns this node as serf knows it.
func (m *Membership) Local() Member {
	return memberFromSerf(m.serf.LocalMember())
}

// Members returns every member serf knows, whatever its status, sorted by
// name. Failed and left members stay until serf reaps them (ReconnectTimeout,
// TombstoneTimeout: see config.go).
func (m *Membership) Members() []Member {
	sms := m.serf.Members()
	out := make([]Member, 0, len(sms))
	for _, sm := range sms {
		out = append(out, memberFromSerf(sm))
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Alive returns the alive members, this node included, sorted by name.
func (m *Membership) Alive() []Member {
	return slices.DeleteFunc(m.Members(), func(mb Member) bool { return mb.Status != StatusAlive })
}

// Member returns the member whose id is id, whatever its status.
func (m *Membership) Member(id uint64) (Member, bool) {
	for _, sm := range m.serf.Members() {
		if MemberID(sm.Name) == id {
			return memberFromSerf(sm), true
		}
	}
	return Member{}, false
}

// Joined is closed once a seed answered (see Config.Join), and is closed
// from the start when there are no seeds. It is never closed when no seed
// ever answers, for example for a node of another cluster or with another
// key.
func (m *Membership) Joined() <-chan struct{} {
	return m.joined
}

// SelfSeeded reports whether this node has no seed but itself: Config.Join
// is empty or names only this node, or in some join round every seed
// answered as this node (a DNS name of a one-node cluster, which resolves
// to itself). Such a node starts the cluster; its key space is the one
// others catch up with. Once true it stays true; the join loop goes on.
func (m *Membership) SelfSeeded() bool {
	return m.seedsSelf.Load()
}

func (m *Membership) markJoined() {
	m.joinedOnce.Do(func() { close(m.joined) })
}

// Stopped is closed when serf stopped without Shutdown asking it to; Err
// then says why. The node is out of the cluster for good: others report
// it failed, and it neither gossips nor learns of changes any more. It is
// never closed by Shutdown.
func (m *Membership) Stopped() <-chan struct{} {
	return m.stopped
}

// Err returns nil until Stopped is closed, then why serf stopped, wrapping
// ErrSerfStopped.
func (m *Membership) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopErr
}

// lostName records that another node holds our name (the first reason
// wins) and wakes the event loop, which stops serf. It never blocks: it
// runs in serf's merge delegate.
func (m *Membership) lostName(err error) {
	m.mu.Lock()
	if m.nameErr == nil {
		m.nameErr = err
	}
	m.mu.Unlock()
	select {
	case m.conflict <- struct{}{}:
	default:
	}
}

// markStopped records that serf stopped on its own because of cause (nil:
// unknown) and closes Stopped, unless Shutdown was called first.
func (m *Membership) markStopped(cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.stopErr != nil {
		return
	}
	m.stopErr = ErrSerfStopped
	if cause != nil {
		m.stopErr = fmt.Errorf("%w: %w", ErrSerfStopped, cause)
	}
	close(m.stopped)
}

// Leave leaves the cluster gracefully: serf broadcasts the intent and
// leaves memberlist, so others report this node "left", not "failed". It
// stops the join loop. It returns when serf is done or ctx ends, whichever
// is first; in the second case serf finishes in the background and
// Shutdown waits for it before it stops serf (memberlist panics on a
// leave after shutdown). serf bounds a leave by twice its BroadcastTimeout
// plus LeavePropagateDelay: 11s with LAN timings, 2.2s with Fast ones;
// with the cluster answering, it takes about LeavePropagateDelay (1s LAN).
// Calling Leave again after it returned is a no-op, and so is Leave after
// serf stopped on its own (see Stopped): there is nothing left to leave.
// Call Shutdown afterwards.
func (m *Membership) Leave(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrShutdown
	}
	if m.serf.State() == serf.SerfShutdown {
		m.mu.Unlock()
		m.log.Info("not leaving: serf has already stopped", "name", m.name)
		return nil
	}
	m.leaveOnce.Do(func() { close(m.leaving) })
	done := make(chan error, 1)
	m.wg.Add(1)
	m.leaveWG.Add(1)
	m.mu.Unlock()

	m.log.Info("leaving cluster", "name", m.name)
	go func() {
		defer m.wg.Done()
		defer m.leaveWG.Done()
		m.joinMu.Lock() // waits for a join in flight; no join starts now
		var err error
		if m.serf.State() != serf.SerfShutdown { // yieldName may have stopped it
			err = m.serf.Leave()
		}
		m.joinMu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("gossip: leave: %w", err)
		}
		m.log.Info("left cluster", "name", m.name)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gossip: leave: %w", ctx.Err())
	}
}

// ErrReservedTag is returned by SetTags for a tag chute itself sets.
var ErrReservedTag = errors.New("gossip: tag is reserved")

// ErrTagsTooLarge is returned by SetTags when the tags would not fit in
// serf's 512 bytes.
var ErrTagsTooLarge = errors.New("gossip: tags exceed serf's limit")

// SetTags publishes extra beside chute's own tags, replacing the extra
// tags set before; the other members see an EventUpdate and the new tags
// in Member.Tags. It refuses chute's own tag names and tags too large for
// serf. The map is copied.
func (m *Membership) SetTags(extra map[string]string) error {
	for k := range extra {
		if ownTag(k) {
			return fmt.Errorf("%w: %q", ErrReservedTag, k)
		}
	}
	m.tagsMu.Lock()
	defer m.tagsMu.Unlock()
	if err := m.publishLocked(extra, m.leavingTag); err != nil {
		return err
	}
	m.extra = maps.Clone(extra)
	return nil
}

// MarkLeaving publishes that this member began to stop: the others stop
// choosing it for new work (a queue's backup) while it hands its own
// over. It is not undone; the next run starts without it.
func (m *Membership) MarkLeaving() error {
	m.tagsMu.Lock()
	defer m.tagsMu.Unlock()
	if m.leavingTag {
		return nil
	}
	if err := m.publishLocked(m.extra, true); err != nil {
		return err
	}
	m.leavingTag = true
	return nil
}

// publishLocked sets serf's tags to extra, chute's own and, if leaving,
// the leaving tag. The caller holds tagsMu.
func (m *Membership) publishLocked(extra map[string]string, leaving bool) error {
	tags := make(map[string]string, len(m.own)+len(extra)+1)
	maps.Copy(tags, extra)
	maps.Copy(tags, m.own)
	if leaving {
		tags[tagLeaving] = "1"
	}
	if n := tagsSize(tags); n > memberlist.MetaMaxSize {
		return fmt.Errorf("%w: about %d bytes, at most %d", ErrTagsTooLarge, n, memberlist.MetaMaxSize)
	}
	if err := m.serf.SetTags(tags); err != nil {
		if !strings.Contains(err.Error(), broadcastTimeout) {
			return fmt.Errorf("gossip: set tags: %w", err)
		}
		// serf set the tags and queued their broadcast; it only gave up
		// waiting for it to go out (a starved gossip loop on a loaded
		// machine). Gossip and the next push/pull carry them.
		m.log.Warn("tags set, their broadcast not out yet", "err", err)
	}
	return nil
}

// broadcastTimeout is memberlist's error when an update's broadcast has
// not gone out within serf's BroadcastTimeout: the update is made.
const broadcastTimeout = "timeout waiting for update broadcast"

// Shutdown stops serf (its sockets close at once: without a prior Leave,
// others detect a failure) and the membership's goroutines, waits for
// them and closes every subscriber's channel. It is idempotent; later
// calls return the first call's result. It waits for a Leave in flight,
// and for a join attempt in flight, which memberlist cannot cancel: that
// is bounded by its TCPTimeout per seed address (10s LAN, 1s Fast; a seed
// that refuses connections fails at once).
func (m *Membership) Shutdown() error {
	m.shutdownOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		m.leaveWG.Wait()
		if err := m.serf.Shutdown(); err != nil {
			m.shutdownErr = fmt.Errorf("gossip: shutdown serf: %w", err)
		}
		close(m.stop)
		m.wg.Wait()
		m.closeSubscribers()
	})
	return m.shutdownErr
}
