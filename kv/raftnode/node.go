package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// ErrStarted is returned by a second Start.
var ErrStarted = errors.New("raftnode: already started")

// Node is the raft node of a chute member: raft over its stores, the
// bootstrap and the leader's reconcile loop. New opens the stores and
// starts raft; Start starts the loop; Shutdown stops both.
type Node struct {
	cfg    Config
	log    *slog.Logger
	stores *stores
	raft   *raft.Raft
	// cluster is the raft cluster id (cluster.go).
	cluster *clusterID
	// forced: New replaced the configuration by this node alone
	// (Config.ForceNewCluster on raft state).
	forced bool
	// minting is the term in which this node, as leader, last proposed a
	// raft cluster id; the loop's own.
	minting uint64
	// foreign are the members the leader does not add, by server id
	// (noteForeign); the loop's own.
	foreign map[raft.ServerID]foreignNote

	// hasState is sticky: the stores had raft state, or raft got some
	// since (a bootstrap or a leader's entries).
	hasState atomic.Bool
	// candidate: without raft state, this node's seeds answered and no
	// alive member had raft state at the loop's last round. Until then
	// Tags says its state is not known (see Node.Tags).
	candidate atomic.Bool

	stop     chan struct{} // closed by Shutdown
	wg       sync.WaitGroup
	started  atomic.Bool
	shutOnce sync.Once
	shutErr  error
}

// New opens the stores under cfg.Dir and starts raft on them with
// cfg.Transport and cfg.FSM. A node with raft state in its stores takes
// up its log and configuration again; one without waits for Start to
// bootstrap it or for a leader to add it.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	hc := newHCLog(cfg.Logger, "raft")
	st, err := openStores(cfg.Dir, cfg.MemberID, cfg.SnapshotRetain, hc)
	if err != nil {
		return nil, err
	}
	rc := raft.DefaultConfig()
	if cfg.Raft != nil {
		c := *cfg.Raft
		rc = &c
	}
	rc.LocalID = st.id
	rc.Logger = hc
	cid, err := loadClusterID(st.bolt)
	if err == nil && !st.hadState {
		err = cid.clear() // no raft state: no cluster yet (clear)
	}
	if err != nil {
		_ = st.close()
		return nil, err
	}
	if tr, ok := cfg.Transport.(interface{ SetLocalID(raft.ServerID) }); ok {
		// Requests for the server this data dir held before, if it was
		// replaced, are refused from now on (raftpeer.SetLocalID).
		tr.SetLocalID(st.id)
	}
	if tr, ok := cfg.Transport.(interface {
		SetRaftCluster(get func() string, adopt func(string) (string, error))
	}); ok {
		// Requests of another raft cluster's servers are refused, and a
		// member without an id takes its leader's (raftpeer.SetRaftCluster).
		tr.SetRaftCluster(cid.get, cid.adopt)
	}
	logger := cfg.Logger.With("server", st.id)
	fsm := wrapFSM(cfg.FSM, cid, logger.Info)
	forced := false
	if cfg.ForceNewCluster && st.hadState {
		alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: st.id, Address: cfg.LocalAddr}}}
		if err := raft.RecoverCluster(rc, fsm, st.logs, st.bolt, st.snaps, cfg.Transport, alone); err != nil {
			_ = st.close()
			return nil, fmt.Errorf("raftnode: force new cluster: %w", err)
		}
		cfg.Logger.Warn("raft configuration replaced by this node alone (force new cluster)", "server", st.id)
		forced = true
	}
	r, err := raft.NewRaft(rc, fsm, st.logs, st.bolt, st.snaps, cfg.Transport)
	if err != nil {
		_ = st.close()
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	n := &Node{
		cfg:     cfg,
		log:     logger,
		stores:  st,
		raft:    r,
		cluster: cid,
		forced:  forced,
		foreign: make(map[raft.ServerID]foreignNote),
		stop:    make(chan struct{}),
	}
	n.hasState.Store(st.hadState)
	n.log.Info("raft node opened", "dir", cfg.Dir, "has_state", st.hadState, "addr", cfg.LocalAddr, "raft_cluster", cid.get())
	return n, nil
}

// Start starts the node's loop: bootstrap when due, then, while leader,
// reconcile the configuration with Members.
func (n *Node) Start() error {
	if n.started.Swap(true) {
		return ErrStarted
	}
	n.wg.Add(1)
	go n.run()
	return nil
}

// ID returns the node's raft server id.
func (n *Node) ID() raft.ServerID { return n.stores.id }

// Raft returns the node's raft, for applying, reading and watching it.
// It must not be shut down but by Shutdown.
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether the node leads now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Forced reports whether New made this node a cluster of one
// (Config.ForceNewCluster, on raft state): it is the whole cluster, and
// needs no other member to be joined.
func (n *Node) Forced() bool { return n.forced }

// RaftCluster returns the node's raft cluster id, "" while it has none.
func (n *Node) RaftCluster() string { return n.cluster.get() }

// HasState reports whether the node has raft state: from its data dir,
// a bootstrap or a leader.
func (n *Node) HasState() bool { return n.hasState.Load() }

// Tags returns the serf tags the member publishes for raft (see Tags);
// the map is the caller's. A node without raft state says its state is
// not known yet (TagState as in PendingTags) until it is a bootstrap
// candidate: its seeds answered and it sees no member with raft state.
// A member that joined a node still waiting for its own seeds thus does
// not bootstrap with it, though the cluster those seeds hold exists.
func (n *Node) Tags() map[string]string {
	has := n.hasState.Load()
	tags := Tags(n.stores.id, n.cfg.BootstrapExpect, has)
	if !has && !n.candidate.Load() {
		tags[TagState] = statePending
	}
	if id := n.cluster.get(); id != "" {
		tags[TagCluster] = id
	}
	return tags
}

// Configuration returns raft's latest configuration.
func (n *Node) Configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

// Shutdown stops the loop, raft and its transport, then closes the
// stores. It does not leave the configuration: to the others the node
// has failed. Every step is bounded without ctx: raft's shutdown is, once
// the transport has ended its calls in flight, and the loop ends once
// raft is down, a configuration change it waits for failing at once; ctx
// will bound the leadership transfer a graceful leave adds. Idempotent:
// later calls return the first one's error.
//
// Raft waits for its goroutines before it closes the transport itself,
// and a call in flight to a member on a dead path (a heartbeat, a vote
// request) returns only at the transport's timeout: a node stopped
// during a partial partition took 10 s to, past its shutdown deadline.
// The transport is closed as soon as raft is told to stop, which ends
// those calls at once.
func (n *Node) Shutdown(ctx context.Context) error {
	_ = ctx
	n.shutOnce.Do(func() {
		close(n.stop)
		stopped := n.raft.Shutdown()
		if tr, ok := n.cfg.Transport.(raft.WithClose); ok {
			_ = tr.Close()
		}
		err := stopped.Error()
		n.wg.Wait()
		n.shutErr = errors.Join(err, n.stores.close())
		n.log.Info("raft node stopped")
	})
	return n.shutErr
}
