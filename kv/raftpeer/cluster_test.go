package raftpeer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

// testFSM records the commands it applies, in order.
type testFSM struct {
	mu       sync.Mutex // guards applied and restores
	applied  []string
	restores int
}

func (f *testFSM) Apply(l *raft.Log) any {
	if l.Type == raft.LogCommand {
		f.mu.Lock()
		f.applied = append(f.applied, string(l.Data))
		f.mu.Unlock()
	}
	return nil
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fsmSnapshot(slices.Clone(f.applied)), nil
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	var applied []string
	if err := json.NewDecoder(rc).Decode(&applied); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = applied
	f.restores++
	return nil
}

func (f *testFSM) state() (applied []string, restores int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied), f.restores
}

// fsmSnapshot is testFSM's commands at a point in time.
type fsmSnapshot []string

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}

// raftNode is one member of a test cluster. Its stores outlive a restart,
// as a disk would; its FSM, transport and listener do not.
type raftNode struct {
	id    raft.ServerID
	addr  string
	logs  *raft.InmemStore
	snaps raft.SnapshotStore
	log   testutil.Buffer

	fsm          *testFSM
	raft         *raft.Raft
	stopListener func()
}

func newRaftNode(t *testing.T, name string) *raftNode {
	t.Helper()
	// Snapshots in files: raft's in-memory snapshot store lets a
	// snapshot being sent read the buffer of one being written (the race
	// detector caught it once in TestRaft_threeNodes).
	snaps, err := raft.NewFileSnapshotStore(t.TempDir(), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n := &raftNode{
		id:    raft.ServerID(name),
		addr:  testutil.FreeAddr(t),
		logs:  raft.NewInmemStore(),
		snaps: snaps,
	}
	t.Cleanup(func() {
		n.stop(t)
		if t.Failed() {
			t.Logf("raft log of %s:\n%s", n.id, n.log.String())
		}
	})
	return n
}

// start runs raft on a new transport served on the node's peer listener.
func (n *raftNode) start(t *testing.T) {
	t.Helper()
	tr := newTransport(t, n.addr, nil)
	n.stopListener = startListener(t, n.addr, tr.Register)
	cfg := raft.DefaultConfig()
	cfg.LocalID = n.id
	cfg.HeartbeatTimeout = 500 * time.Millisecond
	cfg.ElectionTimeout = 500 * time.Millisecond
	cfg.LeaderLeaseTimeout = 250 * time.Millisecond
	cfg.CommitTimeout = 10 * time.Millisecond
	cfg.SnapshotThreshold = 100
	cfg.SnapshotInterval = 100 * time.Millisecond
	cfg.TrailingLogs = 32
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: string(n.id), Output: &n.log, Level: hclog.Info})
	n.fsm = &testFSM{}
	r, err := raft.NewRaft(cfg, n.fsm, n.logs, n.logs, n.snaps, tr)
	if err != nil {
		t.Fatal(err)
	}
	n.raft = r
}

// stop shuts raft down, which closes its transport, then the listener.
func (n *raftNode) stop(t *testing.T) {
	t.Helper()
	if n.raft == nil {
		return
	}
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Errorf("%s: shutdown: %v", n.id, err)
	}
	n.raft = nil
	n.stopListener()
}

// waitLeader waits until one of nodes leads and the others follow it.
func waitLeader(t *testing.T, nodes ...*raftNode) *raftNode {
	t.Helper()
	var leader *raftNode
	testutil.Eventually(t, 30*time.Second, "one leader", func() error {
		leader = nil
		for _, n := range nodes {
			if n.raft.State() == raft.Leader {
				if leader != nil {
					return fmt.Errorf("%s and %s both lead", leader.id, n.id)
				}
				leader = n
			}
		}
		if leader == nil {
			return errors.New("no leader")
		}
		for _, n := range nodes {
			if _, id := n.raft.LeaderWithID(); id != leader.id {
				return fmt.Errorf("%s follows %q, not %s", n.id, id, leader.id)
			}
		}
		return nil
	})
	return leader
}

// apply applies commands entry-from..entry-to-1 on leader, all in flight
// at once, and returns them.
func apply(t *testing.T, leader *raftNode, from, to int) []string {
	t.Helper()
	cmds := make([]string, 0, to-from)
	futures := make([]raft.ApplyFuture, 0, to-from)
	for i := from; i < to; i++ {
		cmd := fmt.Sprintf("entry-%05d", i)
		cmds = append(cmds, cmd)
		futures = append(futures, leader.raft.Apply([]byte(cmd), 30*time.Second))
	}
	for i, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatalf("apply %s on %s: %v", cmds[i], leader.id, err)
		}
	}
	return cmds
}

// waitApplied waits until every node applied want, in that order.
func waitApplied(t *testing.T, want []string, nodes ...*raftNode) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "every node applied every entry in order", func() error {
		for _, n := range nodes {
			got, _ := n.fsm.state()
			if len(got) < len(want) {
				return fmt.Errorf("%s applied %d of %d", n.id, len(got), len(want))
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s applied %d entries, not the %d sent in their order", n.id, len(got), len(want))
			}
		}
		return nil
	})
}

// TestRaft_threeNodes runs a raft cluster of three over the transport:
// election, replication, a snapshot for a follower far behind, leadership
// transfer and a clean shutdown.
func TestRaft_threeNodes(t *testing.T) {
	nodes := []*raftNode{newRaftNode(t, "n1"), newRaftNode(t, "n2"), newRaftNode(t, "n3")}
	var servers []raft.Server
	for _, n := range nodes {
		n.start(t)
		servers = append(servers, raft.Server{ID: n.id, Address: raft.ServerAddress(n.addr)})
	}
	if err := nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, nodes...)

	want := apply(t, leader, 0, 1000)
	waitApplied(t, want, nodes...)

	// A follower stops; the others go on far enough that the leader's
	// log no longer holds what the follower lacks.
	var behind *raftNode
	var others []*raftNode
	for _, n := range nodes {
		if n != leader && behind == nil {
			behind = n
		} else {
			others = append(others, n)
		}
	}
	stoppedAt := behind.raft.LastIndex()
	behind.stop(t)
	leader = waitLeader(t, others...)
	want = append(want, apply(t, leader, 1000, 1300)...)
	if err := leader.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	first, err := leader.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= stoppedAt+1 {
		t.Fatalf("leader's log starts at %d, want past %d: the follower would not need a snapshot", first, stoppedAt+1)
	}

	behind.start(t)
	_, restoredAtStart := behind.fsm.state()
	waitApplied(t, want, nodes...)
	if _, restores := behind.fsm.state(); restores <= restoredAtStart {
		t.Fatalf("%s restored %d snapshots since it started, want one from the leader", behind.id, restores-restoredAtStart)
	}

	// Leadership moves to the follower that was behind (TimeoutNow).
	if err := leader.raft.LeadershipTransferToServer(behind.id, raft.ServerAddress(behind.addr)).Error(); err != nil {
		t.Fatal(err)
	}
	if got := waitLeader(t, nodes...); got != behind {
		t.Fatalf("leader is %s after the transfer, want %s", got.id, behind.id)
	}
	want = append(want, apply(t, behind, 1300, 1310)...)
	waitApplied(t, want, nodes...)

	for _, n := range nodes {
		n.stop(t)
	}
}
