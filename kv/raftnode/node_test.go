package raftnode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/kv/raftpeer"
)

// TestNode_bootstrapExpect_anyOrder starts three members expecting three
// in each order, each appearing to the others as it starts: exactly one
// cluster of the three comes up, with one leader.
func TestNode_bootstrapExpect_anyOrder(t *testing.T) {
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			w := &world{}
			ms := []*member{newMember(t, w, "a"), newMember(t, w, "b"), newMember(t, w, "c")}
			for i, idx := range order {
				ms[idx].start(t, w, true, func(c *Config) { c.BootstrapExpect = 3 })
				if i < len(order)-1 {
					time.Sleep(300 * time.Millisecond) // the started ones look at a partial world
					if n := ms[idx].node; n.HasState() {
						t.Fatalf("%s bootstrapped with %d of 3 members", ms[idx].name, i+1)
					}
				}
			}
			waitLeader(t, w)
			want := map[raft.ServerID]raft.ServerSuffrage{}
			for _, m := range ms {
				want[m.node.ID()] = raft.Voter
			}
			waitConfiguration(t, w, want)
			cmds := applyOn(t, w, "x", 3)
			for _, m := range ms {
				waitApplied(t, m, cmds)
				if got := strings.Count(m.log.String(), "bootstrapped raft cluster"); got > 1 {
					t.Errorf("%s bootstrapped %d times", m.name, got)
				}
			}
		})
	}
}

// TestNode_restart restarts a cluster of three on its data dirs (their
// logs and configuration come back, no second bootstrap), then one
// member on a wiped data dir (it is a new server, and the old one is
// removed at once).
func TestNode_restart(t *testing.T) {
	w := &world{}
	ms, want := startThree(t, w, nil)
	cmds := applyOn(t, w, "x", 5)
	for _, m := range ms {
		waitApplied(t, m, cmds)
	}

	// The whole cluster goes down and comes back on its data dirs.
	ids := make([]raft.ServerID, len(ms))
	for i, m := range ms {
		ids[i] = m.node.ID()
		m.kill(t, w)
	}
	bootstraps := strings.Count(ms[0].log.String(), "bootstrapped raft cluster")
	for i, m := range ms {
		m.start(t, w, true, nil)
		if !m.node.HasState() {
			t.Fatalf("%s restarted without raft state", m.name)
		}
		if m.node.ID() != ids[i] {
			t.Fatalf("%s restarted as %s, want %s", m.name, m.node.ID(), ids[i])
		}
	}
	waitConfiguration(t, w, want)
	for _, m := range ms {
		waitApplied(t, m, cmds)
	}
	if got := strings.Count(ms[0].log.String(), "bootstrapped raft cluster"); got != bootstraps {
		t.Fatalf("a bootstrapped again on restart")
	}

	// b comes back on a wiped data dir: a new server at the old address.
	b := ms[1]
	oldB := b.node.ID()
	b.kill(t, w)
	if err := os.RemoveAll(b.dir); err != nil {
		t.Fatal(err)
	}
	b.start(t, w, true, nil)
	if b.node.ID() == oldB {
		t.Fatalf("b kept its server id %s on a wiped data dir", oldB)
	}
	delete(want, oldB)
	want[b.node.ID()] = raft.Voter
	waitConfiguration(t, w, want)
	cmds = append(cmds, applyOn(t, w, "y", 2)...)
	for _, m := range ms {
		waitApplied(t, m, cmds)
	}
}

// TestNode_Tags_unjoinedSeedBlocksBootstrap is a node x with the default
// expect of 1 that joined its seed while the seed itself had not yet
// joined its own seeds, the member that holds the cluster: x sees one
// other member, without raft state, and must not bootstrap a cluster of
// its own (its log would then share indexes and terms with the real
// cluster's and hide its first entries). The seed tells it is not known
// yet whether it has raft state until its seeds answer.
func TestNode_Tags_unjoinedSeedBlocksBootstrap(t *testing.T) {
	w := &world{}
	// Server ids start with the member id: x's sorts first, so x is the
	// one that would bootstrap.
	x, seed := newMember(t, w, "x"), newMember(t, w, "seed")
	seedSrc := seed.start(t, w, false, nil)
	x.start(t, w, true, nil)

	// A bounded number of x's reconcile rounds (100 ms apart).
	const rounds = 10
	for range rounds {
		time.Sleep(100 * time.Millisecond)
		if got := seed.node.Tags()[TagState]; got != statePending {
			t.Fatalf("seed whose seeds have not answered: got TagState %q, want %q", got, statePending)
		}
		if x.node.HasState() || seed.node.HasState() {
			t.Fatalf("x bootstrapped while its seed had not joined its own seeds:\n%s", x.log.String())
		}
	}

	// The seed's seeds answer and there is no cluster after all: the two
	// bootstrap one together, x first.
	seedSrc.answer()
	waitLeader(t, w)
	want := map[raft.ServerID]raft.ServerSuffrage{x.node.ID(): raft.Voter, seed.node.ID(): raft.Voter}
	waitConfiguration(t, w, want)
	if got := strings.Count(seed.log.String(), "bootstrapped raft cluster"); got != 0 {
		t.Errorf("seed bootstrapped %d times; want it added by x", got)
	}
}

// localIDRecorder is a transport that records the server id New gives
// it.
type localIDRecorder struct {
	*raftpeer.Transport
	id raft.ServerID
}

func (r *localIDRecorder) SetLocalID(id raft.ServerID) {
	r.id = id
	r.Transport.SetLocalID(id)
}

// TestNode_transportKnowsItsServer: New tells its transport the server
// id of its data dir, so that a member whose data dir was replaced
// refuses the requests for the server it was (raftpeer.SetLocalID).
func TestNode_transportKnowsItsServer(t *testing.T) {
	w := &world{}
	m := newMember(t, w, "a")
	var rec *localIDRecorder
	m.start(t, w, true, func(c *Config) {
		rec = &localIDRecorder{Transport: c.Transport.(*raftpeer.Transport)}
		c.Transport = rec
	})
	if rec.id == "" || rec.id != m.node.ID() {
		t.Fatalf("the transport was told server %q; the node is %q", rec.id, m.node.ID())
	}
}

// TestNode_changesFollowEachOther: with no tick for an hour, membership
// and tag changes alone bring three members together, and a member back
// on a wiped data dir takes the old one's seat: its removal, its
// addition and its promotion follow each other, where each waited for
// the next tick (5 s by default) before.
func TestNode_changesFollowEachOther(t *testing.T) {
	w := &world{}
	noTick := func(c *Config) { c.ReconcileInterval = time.Hour }
	ms, want := startThree(t, w, noTick)
	waitLeader(t, w)
	b := ms[1]
	if b.node.IsLeader() {
		b = ms[2]
	}
	oldB := b.node.ID()
	b.kill(t, w)
	if err := os.RemoveAll(b.dir); err != nil {
		t.Fatal(err)
	}
	b.start(t, w, true, noTick)
	delete(want, oldB)
	want[b.node.ID()] = raft.Voter
	waitConfiguration(t, w, want)
}

// joinRace is a member source whose join ends while its first Members
// call reads the members: that call returns the members of before the
// join (this node alone), and Joined is closed by the time it returns.
type joinRace struct {
	*fakeSource
	self string // this node's address
	once sync.Once
}

func (j *joinRace) Members() []Member {
	all := j.fakeSource.Members()
	first := false
	j.once.Do(func() { first = true })
	if !first {
		return all
	}
	j.answer()
	return slices.DeleteFunc(all, func(m Member) bool { return string(m.Addr) != j.self })
}

// TestNode_joinEndingMidRoundDoesNotBootstrap: a node whose seeds answer
// while a round of its loop reads the members must not take the members
// of before the join for the cluster. It read the members first and then
// whether its seeds had answered, and with the default expect of 1
// bootstrapped a cluster of its own beside its seed's (seen in make test:
// the seed's leader then found it in another raft cluster).
func TestNode_joinEndingMidRoundDoesNotBootstrap(t *testing.T) {
	w := &world{}
	a, x := newMember(t, w, "a"), newMember(t, w, "x")
	a.start(t, w, true, nil)
	waitLeader(t, w)
	x.start(t, w, false, func(c *Config) {
		c.Members = &joinRace{fakeSource: c.Members.(*fakeSource), self: x.addr}
	})
	waitConfiguration(t, w, map[raft.ServerID]raft.ServerSuffrage{a.node.ID(): raft.Voter, x.node.ID(): raft.Voter})
	if strings.Contains(x.log.String(), "bootstrapped raft cluster") {
		t.Fatalf("x bootstrapped a cluster of its own:\n%s", x.log.String())
	}
}

// hangingRaft is a member's peer listener that takes raft's calls and
// never answers them, as a member on a dead path whose connection is
// still open: each call ends only when its caller gives up. called is
// signaled at each call.
type hangingRaft struct {
	peerpb.UnimplementedRaftServer
	called chan struct{}
}

func (h *hangingRaft) hang(ctx context.Context) error {
	select {
	case h.called <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingRaft) AppendEntries(ctx context.Context, _ *peerpb.RaftRequest) (*peerpb.RaftResponse, error) {
	return nil, h.hang(ctx)
}

func (h *hangingRaft) AppendEntriesPipeline(s grpc.BidiStreamingServer[peerpb.RaftRequest, peerpb.RaftResponse]) error {
	return h.hang(s.Context())
}

func (h *hangingRaft) RequestVote(ctx context.Context, _ *peerpb.RaftRequest) (*peerpb.RaftResponse, error) {
	return nil, h.hang(ctx)
}

func (h *hangingRaft) RequestPreVote(ctx context.Context, _ *peerpb.RaftRequest) (*peerpb.RaftResponse, error) {
	return nil, h.hang(ctx)
}

// TestNode_Shutdown_endsCallsInFlight stops the leader while a call of
// its to a follower hangs (the follower's listener takes it and never
// answers, with a minute's timeout): Shutdown must end it rather than
// wait for it. Raft waits for its goroutines before it closes the
// transport, so without closing it first the leader's Shutdown lasted
// until the call's timeout.
func TestNode_Shutdown_endsCallsInFlight(t *testing.T) {
	const callTimeout, within = time.Minute, 5 * time.Second
	w := &world{}
	ms := []*member{newMember(t, w, "a"), newMember(t, w, "b"), newMember(t, w, "c")}
	want := map[raft.ServerID]raft.ServerSuffrage{}
	for _, m := range ms {
		m.callTimeout = callTimeout
		m.start(t, w, true, nil)
		want[m.node.ID()] = raft.Voter
		waitConfiguration(t, w, want)
	}
	leader := waitLeader(t, w)
	var lm, frozen *member
	for _, m := range ms {
		switch {
		case m.node == leader:
			lm = m
		case frozen == nil:
			frozen = m
		}
	}

	// The follower stops, as far as raft can tell, without failing: its
	// listener comes back taking calls and answering none.
	if err := frozen.node.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	frozen.stopListener()
	h := &hangingRaft{called: make(chan struct{}, 1)}
	srv, err := peer.NewServer(peer.Config{ListenURLs: []string{"http://" + frozen.addr}, ClusterID: testCluster()})
	if err != nil {
		t.Fatal(err)
	}
	peerpb.RegisterRaftServer(srv, h)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	frozen.stopListener = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	select {
	case <-h.called:
	case <-time.After(10 * time.Second):
		t.Fatalf("the leader made no call to the hanging follower within 10s")
	}

	start := time.Now()
	if err := lm.node.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > within {
		t.Fatalf("the leader's Shutdown took %v with a call in flight to a follower that does not answer, want under %v (the call's timeout is %v)", took, within, callTimeout)
	}
}
