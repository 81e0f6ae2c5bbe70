package raftkv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/internal/testutil"
	"chute/kv/raftpeer"
)

// The members of these tests run real raft over kv/raftpeer on real
// peer listeners, with the Consensus's KV service beside raft's, as
// cmd/chute will. Their state machine is testSM, a recorder: the real
// one is kv's and is tested there.

// testCluster is the cluster id of the tests' peer listeners.
func testCluster() uint64 { return gossip.ClusterID("raftkv-test") }

// member is one chute member of a test: a peer listener serving raft's
// transport and the Consensus's KV service, raft on in-memory stores,
// and the Consensus.
type member struct {
	name   string
	member uint64
	id     raft.ServerID
	addr   string
	log    testutil.Buffer

	sm   *testSM
	raft *raft.Raft
	c    *Consensus
	srv  *peer.Server
}

// testApplyTimeout bounds the tests' calls; an election on loopback
// takes well under it.
const testApplyTimeout = 3 * time.Second

// testRaftConfig is raft tuned for loopback: quick elections, entries
// per AppendEntries within what raftpeer carries. A leader steps down
// when it hears from no quorum for LeaderLeaseTimeout: at 100 ms a
// stall of the test process under make test's load (the e2e package's
// clusters beside it) ended leaderships that tests of batching and
// packing rely on, and at 250 ms one of 280 ms did in CI (stop 53), so
// the timeouts leave half a second.
func testRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 450 * time.Millisecond
	c.CommitTimeout = 10 * time.Millisecond
	c.MaxAppendEntries = MaxAppendEntries
	return c
}

// startMember runs a member named name; mutate adjusts its Config.
func startMember(t *testing.T, name string, mutate func(*Config)) *member {
	t.Helper()
	return startOn(t, name, testutil.FreeAddr(t), 0xabc, newDisk(), mutate)
}

// disk is what survives a member's restart: its raft stores.
type disk struct {
	store *raft.InmemStore
	snaps *raft.InmemSnapshotStore
}

func newDisk() *disk { return &disk{store: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()} }

// startOn runs member name at addr on d, with server id suffix sfx: a
// restart keeps d and sfx; a member whose data dir was wiped has a new
// disk and, as raftnode mints one, a new suffix.
func startOn(t *testing.T, name, addr string, sfx uint32, d *disk, mutate func(*Config)) *member {
	t.Helper()
	return startRaft(t, name, addr, sfx, d, mutate, nil)
}

// startRaft is startOn with raft's configuration adjusted by tune.
func startRaft(t *testing.T, name, addr string, sfx uint32, d *disk, mutate func(*Config), tune func(*raft.Config)) *member {
	t.Helper()
	m := &member{name: name, member: gossip.MemberID(name), addr: addr, sm: newTestSM()}
	m.id = raft.ServerID(fmt.Sprintf("%016x-%08x", m.member, sfx))
	t.Cleanup(func() {
		m.stop(t)
		if t.Failed() {
			t.Logf("log of %s:\n%s", m.name, m.log.String())
		}
	})
	logger := slog.New(slog.NewTextHandler(&m.log, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", name)
	tr, err := raftpeer.New(raftpeer.Config{
		LocalAddr: raft.ServerAddress(m.addr),
		ClusterID: testCluster(),
		MemberID:  m.member,
		Timeout:   5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	tr.SetLocalID(m.id) // as raftnode.New does
	rc := testRaftConfig()
	if tune != nil {
		tune(rc)
	}
	rc.LocalID = m.id
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: name, Output: &m.log, Level: hclog.Info})
	m.raft, err = raft.NewRaft(rc, NewFSM(m.sm), d.store, d.store, d.snaps, tr)
	if err != nil {
		_ = tr.Close()
		t.Fatal(err)
	}
	cfg := Config{
		Raft:            m.raft,
		Answers:         tr,
		SM:              m.sm,
		ClusterID:       testCluster(),
		MemberID:        m.member,
		ApplyTimeout:    testApplyTimeout,
		MaxCommandBytes: 64 << 10,
		Logger:          logger,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if m.c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if m.srv, err = peer.NewServer(peer.Config{ListenURLs: []string{"http://" + m.addr}, ClusterID: testCluster()}); err != nil {
		t.Fatal(err)
	}
	tr.Register(m.srv)
	m.c.Register(m.srv)
	if err := m.srv.Start(); err != nil {
		t.Fatal(err)
	}
	return m
}

// stop closes the Consensus, shuts raft down (closing its transport)
// and the listener, as a crash would look to the others. Idempotent.
func (m *member) stop(t *testing.T) {
	t.Helper()
	if m.raft == nil {
		return
	}
	if err := m.c.Close(); err != nil {
		t.Errorf("%s: close: %v", m.name, err)
	}
	if err := m.raft.Shutdown().Error(); err != nil {
		t.Errorf("%s: raft shutdown: %v", m.name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		t.Errorf("%s: listener shutdown: %v", m.name, err)
	}
	m.raft = nil
}

// startCluster runs three members, bootstraps them and waits for a
// ready leader.
func startCluster(t *testing.T, mutate func(*Config)) []*member {
	t.Helper()
	return startTunedCluster(t, mutate, nil)
}

// startTunedCluster is startCluster with raft's configuration adjusted
// by tune.
func startTunedCluster(t *testing.T, mutate func(*Config), tune func(*raft.Config)) []*member {
	t.Helper()
	var ms []*member
	for _, name := range []string{"m1", "m2", "m3"} {
		ms = append(ms, startRaft(t, name, testutil.FreeAddr(t), 0xabc, newDisk(), mutate, tune))
	}
	var servers []raft.Server
	for _, m := range ms {
		servers = append(servers, raft.Server{ID: m.id, Address: raft.ServerAddress(m.addr)})
	}
	if err := ms[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, ms...)
	return ms
}

// waitLeader waits until exactly one of ms reports IsLeader and every
// one of them names it in Status.Leader, and returns it.
func waitLeader(t *testing.T, ms ...*member) *member {
	t.Helper()
	var leader *member
	testutil.Eventually(t, 20*time.Second, "one ready leader, known to all", func() error {
		leader = nil
		for _, m := range ms {
			if m.c.Status().IsLeader {
				if leader != nil {
					return fmt.Errorf("%s and %s both lead", leader.name, m.name)
				}
				leader = m
			}
		}
		if leader == nil {
			return errors.New("no ready leader")
		}
		for _, m := range ms {
			if got := m.c.Status().Leader; got != leader.member {
				return fmt.Errorf("%s names %016x, not %s's %016x", m.name, got, leader.name, leader.member)
			}
		}
		return nil
	})
	return leader
}

// followers returns the members of ms other than leader.
func followers(ms []*member, leader *member) []*member {
	var out []*member
	for _, m := range ms {
		if m != leader {
			out = append(out, m)
		}
	}
	return out
}

// waitCmds waits until every member of ms applied want, in order.
func waitCmds(t *testing.T, want []string, ms ...*member) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, "every member applied every command in order", func() error {
		for _, m := range ms {
			if got := m.sm.cmds(); !slices.Equal(got, want) {
				return fmt.Errorf("%s applied %d commands %q, want %d", m.name, len(got), got, len(want))
			}
		}
		return nil
	})
}

// testCtx is a context for one call of a test.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
