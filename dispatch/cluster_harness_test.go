package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/kv"
	"chute/kv/kvtest"

	"chute/internal/testutil"
)

// peerList is a Cluster and gossip.PeerSource the test edits, standing in
// for serf.
type peerList struct {
	mu    sync.Mutex
	peers []gossip.Peer
	known []gossip.Peer // gone by gossip, still known (not reaped)
	// onLeaving, set by a test, is what MarkLeaving makes the others see.
	onLeaving func()
}

// MarkLeaving is gossip's (Membership.MarkLeaving): onLeaving, if set.
func (p *peerList) MarkLeaving() error {
	p.mu.Lock()
	fn := p.onLeaving
	p.mu.Unlock()
	if fn != nil {
		fn()
	}
	return nil
}

// setLeaving shows member id leaving (gossip.Peer.Leaving).
func (p *peerList) setLeaving(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := slices.Clone(p.peers)
	for i := range ps {
		if ps[i].ID == id {
			ps[i].Leaving = true
		}
	}
	p.peers = ps
}

func (p *peerList) Peers() []gossip.Peer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]gossip.Peer(nil), p.peers...)
}

// Lookup finds a peer, alive or still known: a member the test stopped is
// forgotten at once, as serf forgets a reaped one, unless set as known.
func (p *peerList) Lookup(id uint64) (gossip.Peer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range append(append([]gossip.Peer(nil), p.peers...), p.known...) {
		if q.ID == id {
			return q, true
		}
	}
	return gossip.Peer{}, false
}

// setGone makes gone look failed to gossip: no longer a peer, still known.
func (p *peerList) setGone(gone gossip.Peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var alive []gossip.Peer
	for _, q := range p.peers {
		if q.ID != gone.ID {
			alive = append(alive, q)
		}
	}
	p.peers = alive
	p.known = append(p.known, gone)
}

func (p *peerList) set(ps []gossip.Peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peers = ps
}

// cluster is the in-process cluster of one test: its members share one
// key space, a kvtest.Log, as the members of a real cluster share raft's.
type cluster struct {
	t   *testing.T
	log *kvtest.Log
	// records, when set, gives the members' managers their key space
	// (Manager.Start) through a wrapper; nil: the member's kv.Server.
	records func(name string, s *kv.Server) RecordStore
}

// newCluster returns an empty cluster for t.
func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, log: kvtest.New()}
}

// member is one in-process cluster member: kv and queues.
type member struct {
	name  string
	id    uint64
	kv    *kv.Server
	seat  *seat        // kv's membership of the cluster's key space
	link  *peer.Server // the peer listener: queues
	mgr   *Manager
	peers *peerList
	cli   *clientv3.Client
	once  sync.Once
}

// start starts a member called name, its manager's config changed by
// mutate, and joins it to the cluster's key space: a member started
// again under a name already used catches up from the others' snapshot.
func (cl *cluster) start(name string, mutate func(*Config)) *member {
	t := cl.t
	t.Helper()
	id := gossip.MemberID(name)
	clusterID := gossip.ClusterID("test")
	// The peer link decodes with the codec a node's does (cmd/chute).
	link, err := peer.NewServer(peer.Config{ListenURLs: []string{"http://127.0.0.1:0"}, ClusterID: clusterID, ServerOptions: kv.MessageBufferOptions()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MemberID: id, ClusterID: clusterID, Visibility: time.Minute, ReconcileInterval: 20 * time.Millisecond}
	if os.Getenv("CHUTE_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", name)
	} else {
		// Kept, and shown only when the test fails.
		var logs testutil.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", name)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("logs of %s (the last %d lines):\n%s", name, failedLogLines, lastLines(logs.String(), failedLogLines))
			}
		})
	}
	if mutate != nil {
		mutate(&cfg)
	}
	mgr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kcfg := kv.DefaultConfig()
	kcfg.Name, kcfg.MemberID, kcfg.ClusterID = name, id, clusterID
	kcfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	kcfg.Queues = mgr
	srv, err := kv.New(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &seat{log: cl.log, srv: srv, id: id}
	if err := st.join(); err != nil {
		t.Fatal(err)
	}
	srv.SetConsensus(st)
	if err := srv.Start(); err != nil {
		st.leave()
		t.Fatal(err)
	}
	// As a node is ready: its key space caught up, queue puts served.
	waitUntil(t, 5*time.Second, name+" synced with the log", srv.Synced)
	mb := &member{name: name, id: id, kv: srv, seat: st, link: link, mgr: mgr, peers: &peerList{}}
	link.RegisterService(&peerpb.Queues_ServiceDesc, mgr.PeerService())
	if err := link.Start(); err != nil {
		st.leave()
		_ = srv.Shutdown(context.Background())
		t.Fatal(err)
	}
	var rs RecordStore = srv
	if cl.records != nil {
		rs = cl.records(name, srv)
	}
	mgr.Start(rs, mb.peers)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientAddrs()[0].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	mb.cli = cli
	t.Cleanup(func() { mb.stop() })
	return mb
}

// seat is a member's Consensus: its place in the cluster's log, which a
// test may take away while the member runs (leave: the member is cut
// off, as in a minority partition, and its writes fail with
// kv.ErrNoLeader) and give back (join: it catches up from the leader's
// snapshot).
type seat struct {
	log *kvtest.Log
	srv *kv.Server
	id  uint64

	mu      sync.Mutex   // guards c and delayed
	c       kv.Consensus // the last Join's; out of the log once left
	delayed *delay       // proposals held back; nil: none
}

// delay holds back the proposals that match, as a slow commit would,
// until open is closed or the proposal's context ends.
type delay struct {
	match   func(cmd []byte) bool
	blocked chan struct{} // a token each time a proposal starts waiting
	open    chan struct{}
}

// delay makes the member's proposals that match wait until release is
// called (the test's cleanup calls it too) or their context ends, and
// returns a channel that gets a token whenever one starts waiting.
func (s *seat) delay(t *testing.T, match func(cmd []byte) bool) (blocked <-chan struct{}, release func()) {
	d := &delay{match: match, blocked: make(chan struct{}, 1), open: make(chan struct{})}
	s.mu.Lock()
	s.delayed = d
	s.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			s.delayed = nil
			s.mu.Unlock()
			close(d.open)
		})
	}
	t.Cleanup(release)
	return d.blocked, release
}

// join takes srv into the log; first out of it, if it was in.
func (s *seat) join() error {
	s.log.Leave(s.srv)
	c, err := s.log.Join(s.srv, s.id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.c = c
	s.mu.Unlock()
	return nil
}

// leave takes srv out of the log.
func (s *seat) leave() { s.log.Leave(s.srv) }

func (s *seat) current() kv.Consensus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

func (s *seat) Propose(ctx context.Context, cmd []byte) error {
	s.mu.Lock()
	d := s.delayed
	s.mu.Unlock()
	if d != nil && d.match(cmd) {
		select {
		case d.blocked <- struct{}{}:
		default:
		}
		select {
		case <-d.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.current().Propose(ctx, cmd)
}

func (s *seat) ProposeAsLeader(ctx context.Context, term uint64, cmd []byte) error {
	return s.current().ProposeAsLeader(ctx, term, cmd)
}

func (s *seat) ReadIndex(ctx context.Context) (uint64, error) { return s.current().ReadIndex(ctx) }

func (s *seat) RenewLease(ctx context.Context, id int64) (int64, error) {
	return s.current().RenewLease(ctx, id)
}

func (s *seat) TransferLeader(ctx context.Context, member uint64) error {
	return s.current().TransferLeader(ctx, member)
}

func (s *seat) Status() kv.ConsensusStatus { return s.current().Status() }

// failedLogLines is how much of a member's log a failed test shows.
const failedLogLines = 60

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stop shuts the member down as a crash would look to the others once
// they drop it from their peer lists: it leaves the key space first, so
// nothing it still tries to write (a record, a consumer) gets there.
func (mb *member) stop() {
	mb.once.Do(func() {
		mb.seat.leave()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = mb.cli.Close()
		_ = mb.kv.Shutdown(ctx)
		_ = mb.mgr.Shutdown(ctx)
		_ = mb.link.Shutdown(ctx)
	})
}

func (mb *member) asPeer() gossip.Peer {
	return gossip.Peer{ID: mb.id, Addr: mb.link.Addrs()[0].String(), Boot: mb.mgr.cfg.Boot}
}

// pairWithDirs starts two connected members, a and b, each with a data
// dir of its own.
func pairWithDirs(t *testing.T) (a, b *member) {
	cl := newCluster(t)
	withDir := func(c *Config) { c.DataDir = t.TempDir() }
	a, b = cl.start("a", withDir), cl.start("b", withDir)
	connect(a, b)
	return a, b
}

// connect makes every member see every other alive.
func connect(ms ...*member) {
	for _, m := range ms {
		var ps []gossip.Peer
		for _, o := range ms {
			if o != m {
				ps = append(ps, o.asPeer())
			}
		}
		m.peers.set(ps)
	}
}

// recordOn returns the queue's dispatcher record as member m has it.
func recordOn(m *member, queue string) string {
	return string(m.kv.Get(RecordKey(queue)))
}

// newClient returns another client of m.
func (mb *member) newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{mb.kv.ClientAddrs()[0].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// consumeAll reads n deliveries from wc, acknowledging each through ack,
// and returns their tails in arrival order; it fails on a tail seen twice,
// and when no delivery comes for idle. A stall fails it, not a machine
// that is slow but moving: how fast n messages go through depends on
// the load, and ctx bounds the whole test.
func consumeAll(t *testing.T, ctx context.Context, wc clientv3.WatchChan, ack *clientv3.Client, n int, idle time.Duration) []string {
	t.Helper()
	seen := make(map[string]bool, n)
	var tails []string
	for len(tails) < n {
		for _, ev := range next(t, wc, idle) {
			k := ParseKey(string(ev.Kv.Key))
			if seen[k.Tail] {
				t.Fatalf("%s delivered twice (attempt %d)", k.Tail, ev.Kv.Version)
			}
			seen[k.Tail] = true
			tails = append(tails, k.Tail)
			r, err := ack.Delete(ctx, string(ev.Kv.Key))
			if err != nil {
				t.Fatalf("ack %s: %v", ev.Kv.Key, err)
			}
			if r.Deleted != 1 {
				t.Fatalf("ack %s removed nothing", ev.Kv.Key)
			}
		}
	}
	return tails
}

// noRedelivery fails t when w delivers anything within a second: every
// message was acknowledged already, while (what the test did meanwhile).
func noRedelivery(t *testing.T, w clientv3.WatchChan, while string) {
	t.Helper()
	select {
	case resp := <-w:
		if len(resp.Events) > 0 {
			t.Fatalf("%s, acknowledged %s, delivered again", resp.Events[0].Kv.Key, while)
		}
	case <-time.After(time.Second):
	}
}

// checkProducerOrder checks tails "<producer>-<n>" arrive in n order per
// producer, each once, all of them.
func checkProducerOrder(t *testing.T, tails []string, producers, each int) {
	t.Helper()
	last := make([]int, producers)
	for i := range last {
		last[i] = -1
	}
	for _, tail := range tails {
		var p, i int
		if _, err := fmt.Sscanf(tail, "%d-%d", &p, &i); err != nil {
			t.Fatalf("tail %q: %v", tail, err)
		}
		if i != last[p]+1 {
			t.Fatalf("producer %d: message %d after %d", p, i, last[p])
		}
		last[p] = i
	}
	for p, l := range last {
		if l != each-1 {
			t.Fatalf("producer %d: last message %d, want %d", p, l, each-1)
		}
	}
}

// linkProxy passes TCP connections to a member's peer link until it is
// cut: then it closes every connection and refuses new ones until it is
// mended. A link that breaks for a moment, shorter than the failure
// detection, is what it stands for. Stalled, it keeps every connection
// open and passes nothing either way until it flows again, as a dead
// path whose TCP connections nothing ends.
type linkProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	flowing *sync.Cond // signaled when stalled or cut changes
	cut     bool
	stalled bool
	conns   map[net.Conn]struct{}
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.flowing = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		p.mu.Lock()
		if err != nil || p.cut {
			p.mu.Unlock()
			_ = c.Close()
			if u != nil {
				_ = u.Close()
			}
			continue
		}
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.copy(u, c)
		go p.copy(c, u)
	}
}

func (p *linkProxy) copy(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitFlowing() {
				break
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// waitFlowing waits while the link is stalled; false: it was cut.
func (p *linkProxy) waitFlowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.stalled && !p.cut {
		p.flowing.Wait()
	}
	return !p.cut
}

// setStalled stalls the link (nothing passes, nothing closes) or lets
// it flow again, what was held back first.
func (p *linkProxy) setStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = stalled
	p.flowing.Broadcast()
}

// setCut cuts the link (closing what is open) or mends it.
func (p *linkProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	p.flowing.Broadcast()
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}
