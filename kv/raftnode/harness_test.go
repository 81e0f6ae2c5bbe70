package raftnode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/internal/testutil"
	"chute/kv/raftpeer"
)

// The nodes of these tests run raft over kv/raftpeer on real peer
// listeners, as cmd/chute will: a restart is then a new listener on the
// same address, and a killed node one that stops answering, without a
// test double of the network to keep connected.

// testCluster is the cluster id of the tests' peer listeners.
func testCluster() uint64 { return gossip.ClusterID("raftnode-test") }

// countFSM counts the commands it applies.
type countFSM struct {
	mu      sync.Mutex // guards applied
	applied []string
}

func (f *countFSM) Apply(l *raft.Log) any {
	if l.Type == raft.LogCommand {
		f.mu.Lock()
		f.applied = append(f.applied, string(l.Data))
		f.mu.Unlock()
	}
	return nil
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return emptySnapshot{}, nil }

func (f *countFSM) Restore(rc io.ReadCloser) error { return rc.Close() }

func (f *countFSM) state() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

type emptySnapshot struct{}

func (emptySnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (emptySnapshot) Release()                             {}

// world is what the membership layer knows: every member started so far
// and its status. Every node's MemberSource reads it.
type world struct {
	mu      sync.Mutex // guards members, sources and merged
	members []*member
	sources []*fakeSource
	// merged: every member sees every other; until then a member sees
	// only those of its own side (two gossip pools apart).
	merged bool
}

// member is one chute member of a test: a data dir, a peer address and,
// while running, a Node on its own listener.
type member struct {
	name string
	dir  string
	addr string
	log  testutil.Buffer
	side int // the members of one side see each other before world.merged

	// guarded by world.mu
	status Status
	node   *Node // the last one started, kept after Shutdown for its tags

	fsm          *countFSM
	stopListener func()
	// callTimeout bounds each raft call of its transport; zero: 5s.
	callTimeout time.Duration
}

// fakeSource is one node's MemberSource over the world.
type fakeSource struct {
	w       *world
	side    int // its member's
	joined  chan struct{}
	once    sync.Once
	changed chan struct{}
}

func (s *fakeSource) Members() []Member {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	var out []Member
	for _, m := range s.w.members {
		if m.node == nil || (!s.w.merged && m.side != s.side) {
			continue
		}
		out = append(out, Member{Addr: raft.ServerAddress(m.addr), Status: m.status, Tags: m.node.Tags()})
	}
	return out
}

func (s *fakeSource) Joined() <-chan struct{}  { return s.joined }
func (s *fakeSource) Changed() <-chan struct{} { return s.changed }

// answer closes Joined: a seed answered.
func (s *fakeSource) answer() { s.once.Do(func() { close(s.joined) }) }

// notifyLocked signals every source that members changed.
func (w *world) notifyLocked() {
	for _, s := range w.sources {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
}

func newMember(t *testing.T, w *world, name string) *member {
	t.Helper()
	m := &member{name: name, dir: t.TempDir(), addr: testutil.FreeAddr(t)}
	w.mu.Lock()
	w.members = append(w.members, m)
	w.mu.Unlock()
	t.Cleanup(func() {
		m.kill(t, w)
		if t.Failed() {
			t.Logf("log of %s:\n%s", m.name, m.log.String())
		}
	})
	return m
}

// testRaftConfig is raft tuned for loopback on a busy machine.
func testRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 400 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 20 * time.Millisecond
	return c
}

// start runs a Node for m on a new listener. seeded says whether its
// seeds have answered (or it has none); mutate adjusts its config.
func (m *member) start(t *testing.T, w *world, seeded bool, mutate func(*Config)) *fakeSource {
	t.Helper()
	src := &fakeSource{w: w, side: m.side, joined: make(chan struct{}), changed: make(chan struct{}, 1)}
	if seeded {
		src.answer()
	}
	tr, err := raftpeer.New(raftpeer.Config{
		LocalAddr: raft.ServerAddress(m.addr),
		ClusterID: testCluster(),
		MemberID:  gossip.MemberID(m.name),
		Timeout:   cmp.Or(m.callTimeout, 5*time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := peer.NewServer(peer.Config{
		ListenURLs: []string{"http://" + m.addr},
		ClusterID:  testCluster(),
	})
	if err != nil {
		t.Fatal(err)
	}
	tr.Register(srv)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	m.stopListener = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	m.fsm = &countFSM{}
	cfg := DefaultConfig()
	cfg.Dir = m.dir
	cfg.MemberID = gossip.MemberID(m.name)
	cfg.LocalAddr = raft.ServerAddress(m.addr)
	cfg.Transport = tr
	cfg.FSM = m.fsm
	cfg.Members = src
	cfg.ReconcileInterval = 100 * time.Millisecond
	cfg.DeadServerGrace = 2 * time.Second
	cfg.ChangeTimeout = 5 * time.Second
	cfg.Raft = testRaftConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&m.log, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", m.name)
	cfg.TagsChanged = func(map[string]string) { // gossip carries them to the others
		w.mu.Lock()
		w.notifyLocked()
		w.mu.Unlock()
	}
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		_ = tr.Close()
		m.stopListener()
		t.Fatal(err)
	}
	w.mu.Lock()
	m.node = n
	m.status = StatusAlive
	w.sources = append(w.sources, src)
	w.notifyLocked()
	w.mu.Unlock()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	return src
}

// kill shuts m's node down without leaving, as a crash would, and
// reports it failed.
func (m *member) kill(t *testing.T, w *world) {
	t.Helper()
	w.mu.Lock()
	n := m.node
	running := m.status == StatusAlive
	if running {
		m.status = StatusFailed
		w.notifyLocked()
	}
	w.mu.Unlock()
	if !running {
		return
	}
	if err := n.Shutdown(context.Background()); err != nil {
		t.Errorf("%s: shutdown: %v", m.name, err)
	}
	m.stopListener()
}

// leave stops m as a member stopped with SIGTERM does: it hands
// leadership on if it leads others, says it left (gossip's leave), and
// stops once the others' configuration is want, without it (the leader
// removes a member that left at once).
func (m *member) leave(t *testing.T, w *world, want map[raft.ServerID]raft.ServerSuffrage) {
	t.Helper()
	if cfg, err := m.node.Configuration(); err == nil && len(cfg.Servers) > 1 && m.node.IsLeader() {
		if err := m.node.Raft().LeadershipTransfer().Error(); err != nil {
			t.Fatalf("%s: leadership transfer: %v", m.name, err)
		}
	}
	w.mu.Lock()
	m.status = StatusLeft
	w.notifyLocked()
	w.mu.Unlock()
	if len(want) > 0 {
		waitConfiguration(t, w, want)
	}
	if err := m.node.Shutdown(context.Background()); err != nil {
		t.Errorf("%s: shutdown: %v", m.name, err)
	}
	m.stopListener()
}

// running returns the nodes of members that run.
func (w *world) running() []*Node {
	var out []*Node
	for _, m := range w.runningMembers() {
		out = append(out, m.node)
	}
	return out
}

// runningMembers returns the members that run.
func (w *world) runningMembers() []*member {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*member
	for _, m := range w.members {
		if m.status == StatusAlive {
			out = append(out, m)
		}
	}
	return out
}

// waitLeader waits until exactly one running node leads and every other
// follows it, and returns it.
func waitLeader(t *testing.T, w *world) *Node {
	t.Helper()
	return waitLeaderAmong(t, w.runningMembers)
}

// waitLeaderAmong is waitLeader for the members of one cluster, as
// members lists them at each try.
func waitLeaderAmong(t *testing.T, members func() []*member) *Node {
	t.Helper()
	var leader *Node
	testutil.Eventually(t, 30*time.Second, "one leader", func() error {
		leader = nil
		ms := members()
		for _, m := range ms {
			if n := m.node; n.IsLeader() {
				if leader != nil {
					return fmt.Errorf("%s and %s both lead", leader.ID(), n.ID())
				}
				leader = n
			}
		}
		if leader == nil {
			return errors.New("no leader")
		}
		for _, m := range ms {
			if _, id := m.node.Raft().LeaderWithID(); id != leader.ID() {
				return fmt.Errorf("%s follows %q, not %s", m.node.ID(), id, leader.ID())
			}
		}
		return nil
	})
	return leader
}

// suffrages maps the servers of cfg to their suffrage.
func suffrages(cfg raft.Configuration) map[raft.ServerID]raft.ServerSuffrage {
	out := make(map[raft.ServerID]raft.ServerSuffrage, len(cfg.Servers))
	for _, s := range cfg.Servers {
		out[s.ID] = s.Suffrage
	}
	return out
}

// waitConfiguration waits until every running node's configuration is
// want.
func waitConfiguration(t *testing.T, w *world, want map[raft.ServerID]raft.ServerSuffrage) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "configuration", func() error {
		for _, n := range w.running() {
			cfg, err := n.Configuration()
			if err != nil {
				return err
			}
			if got := suffrages(cfg); !equalSuffrages(got, want) {
				return fmt.Errorf("%s has %v, want %v", n.ID(), got, want)
			}
		}
		return nil
	})
}

func equalSuffrages(a, b map[raft.ServerID]raft.ServerSuffrage) bool {
	if len(a) != len(b) {
		return false
	}
	for id, s := range a {
		if t, ok := b[id]; !ok || t != s {
			return false
		}
	}
	return true
}

// applyOn applies n commands named prefix-i on the leader of w. A
// command the leader refused because it no longer led (an election under
// load) is applied again on the next leader; one it took and then lost
// is applied again only if the next leader's barrier shows it did not
// commit. The tries are bounded.
func applyOn(t *testing.T, w *world, prefix string, n int) []string {
	t.Helper()
	return applyAmong(t, w.runningMembers, prefix, n)
}

// applyAmong is applyOn for the members of one cluster, as members lists
// them at each try.
func applyAmong(t *testing.T, members func() []*member, prefix string, n int) []string {
	t.Helper()
	const tries = 10
	var cmds []string
	for i := range n {
		cmd := fmt.Sprintf("%s-%d", prefix, i)
		var err error
		lost := false // taken, then lost: whether it commits is not known
		for range tries {
			if lost {
				var done bool
				if done, err = committed(t, members, cmd); err != nil {
					continue // not settled: never apply it twice
				}
				if lost = false; done {
					break
				}
			}
			err = waitLeaderAmong(t, members).Raft().Apply([]byte(cmd), 10*time.Second).Error()
			lost = errors.Is(err, raft.ErrLeadershipLost)
			if !lost && !errors.Is(err, raft.ErrNotLeader) {
				break
			}
		}
		if err != nil {
			t.Fatalf("apply %s: %v", cmd, err)
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// committed reports whether cmd, taken by a leader that then lost its
// leadership, committed after all: once the next leader's barrier
// commits, every entry of earlier terms is either applied on it or gone.
func committed(t *testing.T, members func() []*member, cmd string) (bool, error) {
	t.Helper()
	leader := waitLeaderAmong(t, members)
	if err := leader.Raft().Barrier(10 * time.Second).Error(); err != nil {
		return false, err
	}
	for _, m := range members() {
		if m.node == leader {
			return slices.Contains(m.fsm.state(), cmd), nil
		}
	}
	return false, errors.New("the leader is no member")
}

// waitApplied waits until m applied want, and no other command but
// empty ones (raft cluster ids minted: mintEntry).
func waitApplied(t *testing.T, m *member, want []string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, m.name+" applied every command", func() error {
		got := slices.DeleteFunc(m.fsm.state(), func(cmd string) bool { return cmd == "" })
		if !slices.Equal(got, want) {
			return fmt.Errorf("applied %d commands, want %d", len(got), len(want))
		}
		return nil
	})
}

// startThree starts members a, b and c of w one after the other, their
// configs changed by mutate, each joining the cluster the first
// bootstraps, and returns them and the configuration of three voters
// they reach.
func startThree(t *testing.T, w *world, mutate func(*Config)) ([]*member, map[raft.ServerID]raft.ServerSuffrage) {
	t.Helper()
	ms := []*member{newMember(t, w, "a"), newMember(t, w, "b"), newMember(t, w, "c")}
	want := map[raft.ServerID]raft.ServerSuffrage{}
	for _, m := range ms {
		m.start(t, w, true, mutate)
		want[m.node.ID()] = raft.Voter
		waitConfiguration(t, w, want)
	}
	return ms, want
}
