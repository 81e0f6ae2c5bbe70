package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/kv"
	"chute/kv/raftkv"
	"chute/kv/raftnode"
	"chute/kv/raftpeer"
)

// leaveTimeout bounds, within shutdownTimeout, handing the leadership
// over and waiting for the leader to take this member out of raft.
const leaveTimeout = 4 * time.Second

// keySpace is the raft under the key space: the transport on the peer
// link, the node (stores under --data-dir, bootstrap, voters) and the
// consensus kv proposes through.
type keySpace struct {
	log       *slog.Logger
	kv        *kv.Server
	members   *raftMembers
	node      *raftnode.Node
	consensus *raftkv.Consensus
}

// newKeySpace opens the raft of the key space kvs serves: its stores
// under cfg.DataDir, its transport and its consensus service registered
// on the peer server ps, which must not have started. Membership comes
// from m, whose tags it sets.
func newKeySpace(cfg Config, kvs *kv.Server, m *gossip.Membership, ps *peer.Server, creds credentials.TransportCredentials, logger *slog.Logger) (*keySpace, error) {
	addr, err := raftAddr(cfg)
	if err != nil {
		return nil, configError{err}
	}
	// Validate checked the node's settings.
	var dial []grpc.DialOption
	if creds != nil {
		dial = append(dial, grpc.WithTransportCredentials(creds))
	}
	clusterID, memberID := gossip.ClusterID(cfg.Cluster), gossip.MemberID(cfg.Name)
	trans, err := raftpeer.New(raftpeer.Config{
		LocalAddr:   raft.ServerAddress(addr),
		ClusterID:   clusterID,
		MemberID:    memberID,
		DialOptions: dial,
		Logger:      logger.With("component", "raft-transport"),
	})
	if err != nil {
		return nil, err
	}
	trans.Register(ps)
	ks := &keySpace{log: logger, kv: kvs, members: newRaftMembers(m)}
	ncfg := cfg.raftNodeConfig()
	ncfg.Transport = trans
	ncfg.FSM = raftkv.NewFSM(kvs.StateMachine())
	ncfg.Members = ks.members
	ncfg.Raft = raftTimings(cfg.GossipProfile)
	ncfg.Logger = logger.With("component", "raft")
	ncfg.TagsChanged = func(tags map[string]string) {
		if err := m.SetTags(tags); err != nil {
			logger.Error("raft tags not published", "err", err)
		}
	}
	if cfg.GossipProfile == "fast" {
		ncfg.ReconcileInterval = 500 * time.Millisecond
	}
	if ks.node, err = raftnode.New(ncfg); err != nil {
		_ = trans.Close()
		ks.members.close()
		return nil, err
	}
	if err := m.SetTags(ks.node.Tags()); err != nil {
		_ = ks.node.Shutdown(context.Background())
		ks.members.close()
		return nil, err
	}
	ks.consensus, err = raftkv.New(raftkv.Config{
		Raft:        ks.node.Raft(),
		Answers:     trans,
		SM:          kvs.StateMachine(),
		ClusterID:   clusterID,
		MemberID:    memberID,
		DialOptions: dial,
		// A leader silent for a heartbeat timeout is one raft is about
		// to replace: forwarded reads and renewals ask again then.
		TryTimeout: ncfg.Raft.HeartbeatTimeout,
		Logger:     logger.With("component", "raft-kv"),
	})
	if err != nil {
		_ = ks.node.Shutdown(context.Background())
		ks.members.close()
		return nil, err
	}
	ks.consensus.Register(ps)
	kvs.SetConsensus(ks.consensus)
	return ks, nil
}

// raftTimings returns raft's configuration for a gossip profile: raft's
// defaults on a LAN but a commit tick of lanCommitTimeout, shorter
// timeouts for a test cluster on one machine.
func raftTimings(profile string) *raft.Config {
	rc := raft.DefaultConfig()
	rc.MaxAppendEntries = raftkv.MaxAppendEntries
	// Proposals waiting while the leader writes are taken together, up
	// to MaxAppendEntries, into one log write and one sync.
	rc.BatchApplyCh = true
	rc.CommitTimeout = lanCommitTimeout
	if profile == "fast" {
		rc.HeartbeatTimeout = 500 * time.Millisecond
		rc.ElectionTimeout = 500 * time.Millisecond
		rc.LeaderLeaseTimeout = 250 * time.Millisecond
		rc.CommitTimeout = 20 * time.Millisecond
	}
	return rc
}

// lanCommitTimeout is how often a leader sends each follower an
// AppendEntries request when it has nothing new to send (raft's
// default: 50 ms). Followers learn of commits from the leader's nudges
// (kv/raftkv's nudge.go), not from this tick, which is then left to
// what nudges do not cover: catching up a follower that fell behind (a
// restart, a cut link) and the commit of a configuration. Three idle
// members spent 8-16% of a core in all at 50 ms on the development
// machine, 3.5-4.6% at this value, with half the system calls.
const lanCommitTimeout = 500 * time.Millisecond

// raftAddr is this member's raft address: the host:port of its first
// advertised peer URL, which the others dial.
func raftAddr(cfg Config) (string, error) {
	urls := advertised(cfg.AdvertisePeerURLs, cfg.ListenPeerURLs)
	if len(urls) == 0 {
		return "", errors.New("--advertise-peer-urls: no peer URL to give raft")
	}
	u, err := url.Parse(urls[0])
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--advertise-peer-urls: %q has no host:port", urls[0])
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return "", fmt.Errorf("--advertise-peer-urls: %q has no host:port", urls[0])
	}
	return u.Host, nil
}

// start starts the node's loop (bootstrap, voters).
func (ks *keySpace) start() error { return ks.node.Start() }

// handOver gives the leadership away when this member has it, so that
// the cluster does not wait for an election when it stops.
func (ks *keySpace) handOver(ctx context.Context) {
	r := ks.node.Raft()
	if r.State() != raft.Leader || !hasOtherVoter(r) {
		return // a lone voter has nobody to hand over to
	}
	done := make(chan error, 1)
	go func() { done <- r.LeadershipTransfer().Error() }()
	select {
	case err := <-done:
		if err != nil {
			ks.log.Warn("leadership not handed over", "err", err)
			return
		}
		ks.log.Info("leadership handed over")
	case <-ctx.Done():
		ks.log.Warn("leadership not handed over in time")
	}
}

// awaitRemoval waits, once this member left gossip, until the raft
// configuration holds it no more (the leader removes a voter that left),
// or ctx ends; at once when it is no voter, the only one, or no leader is
// known. In a cluster of two voters the removal needs this member's vote:
// gone first, it left the other without a majority, and the key space
// stood still until it came back.
func (ks *keySpace) awaitRemoval(ctx context.Context) {
	r, self := ks.node.Raft(), ks.node.ID()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		f := r.GetConfiguration()
		if f.Error() != nil {
			return
		}
		voter, others := false, false
		for _, srv := range f.Configuration().Servers {
			switch {
			case srv.ID == self:
				voter = srv.Suffrage == raft.Voter
			case srv.Suffrage == raft.Voter:
				others = true
			}
		}
		if _, leader := r.LeaderWithID(); !voter || !others || leader == "" {
			return
		}
		select {
		case <-ctx.Done():
			ks.log.Warn("still a raft voter as the node stops: the others remove it once its absence passes the grace period")
			return
		case <-tick.C:
		}
	}
}

// hasOtherVoter reports whether r's configuration has a voter besides r.
func hasOtherVoter(r *raft.Raft) bool {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return true // unknown: try, and let the transfer say
	}
	_, self := r.LeaderWithID()
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter && srv.ID != self {
			return true
		}
	}
	return false
}

// shutdown stops the consensus, then raft (and its transport) and closes
// the stores.
func (ks *keySpace) shutdown(ctx context.Context) error {
	_ = ks.consensus.Close()
	err := ks.node.Shutdown(ctx)
	ks.members.close()
	return err
}

// raftMembers adapts gossip to raftnode.MemberSource: every member serf
// knows, its peer address as raft's, a Changed signal fed by gossip's
// events, and Joined closed once a seed answered or the seeds are this
// node alone (gossip's SelfSeeded: a one-pod StatefulSet, or a DNS name
// that resolves to itself), so that such a node bootstraps.
type raftMembers struct {
	m       *gossip.Membership
	changed chan struct{}
	joined  chan struct{} // closed by the follow goroutine
	stop    func()
	done    chan struct{}

	// left holds the members that left (gracefully, or removed with
	// etcdctl member remove while failed) in the last leftMemory, by
	// name, as they were: serf forgets a removed member a moment after
	// it marks it left, and a leader that saw it only as failed, then
	// gone, kept its raft seat for --raft-dead-server-grace, where etcd's
	// member remove takes it out at once. Members reports them as left
	// until they come back or leftMemory passes.
	leftMu sync.Mutex
	left   map[string]leftMember
	now    func() time.Time
}

// leftMember is a member that left, and when.
type leftMember struct {
	m  gossip.Member
	at time.Time
}

// leftMemory is how long a member that left is reported so after serf
// forgot it: many times the raft leader's reconcile round.
const leftMemory = time.Minute

// selfSeededPoll is how often the follow goroutine asks gossip whether
// this node is its own only seed, until it joined.
const selfSeededPoll = 100 * time.Millisecond

func newRaftMembers(m *gossip.Membership) *raftMembers {
	events, stop := m.Subscribe(64)
	rm := &raftMembers{m: m, changed: make(chan struct{}, 1), joined: make(chan struct{}), stop: stop, done: make(chan struct{}),
		left: make(map[string]leftMember), now: time.Now}
	go rm.follow(events)
	return rm
}

// follow signals Changed at every gossip event and closes joined once
// gossip joined or found itself its only seed, until events closes.
func (rm *raftMembers) follow(events <-chan gossip.Event) {
	defer close(rm.done)
	gossipJoined := rm.m.Joined()
	poll := time.NewTicker(selfSeededPoll)
	defer poll.Stop()
	for {
		if gossipJoined != nil && (isClosed(gossipJoined) || rm.m.SelfSeeded()) {
			close(rm.joined)
			gossipJoined = nil
			poll.Stop()
		}
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			rm.note(ev)
			select {
			case rm.changed <- struct{}{}:
			default:
			}
		case <-gossipJoined: // nil once joined: never ready
		case <-poll.C:
		}
	}
}

// note records a member that left, and forgets one that came back.
func (rm *raftMembers) note(ev gossip.Event) {
	rm.leftMu.Lock()
	defer rm.leftMu.Unlock()
	switch {
	case ev.Type == gossip.EventLeave:
		m := ev.Member
		m.Status = gossip.StatusLeft
		rm.left[ev.Member.Name] = leftMember{m: m, at: rm.now()}
	case ev.Type != gossip.EventReap && ev.Member.Status == gossip.StatusAlive:
		delete(rm.left, ev.Member.Name)
	}
}

// withLeft returns all, serf's members, with those that left in the last
// leftMemory and that serf forgot since, as left.
func (rm *raftMembers) withLeft(all []gossip.Member) []gossip.Member {
	rm.leftMu.Lock()
	defer rm.leftMu.Unlock()
	now := rm.now()
	for name, l := range rm.left {
		switch {
		case now.Sub(l.at) > leftMemory:
			delete(rm.left, name)
		case !slices.ContainsFunc(all, func(m gossip.Member) bool { return m.Name == name }):
			all = append(all, l.m)
		}
	}
	return all
}

func (rm *raftMembers) Members() []raftnode.Member {
	all := rm.withLeft(rm.m.Members())
	out := make([]raftnode.Member, 0, len(all))
	for _, mb := range all {
		addr := ""
		if len(mb.PeerURLs) > 0 {
			if u, err := url.Parse(mb.PeerURLs[0]); err == nil {
				addr = u.Host
			}
		}
		out = append(out, raftnode.Member{Addr: raft.ServerAddress(addr), Status: raftStatus(mb.Status), Tags: mb.Tags})
	}
	return out
}

func (rm *raftMembers) Joined() <-chan struct{} { return rm.joined }

func (rm *raftMembers) Changed() <-chan struct{} { return rm.changed }

// close ends the subscription and its goroutine.
func (rm *raftMembers) close() {
	rm.stop()
	<-rm.done
}

func raftStatus(s gossip.Status) raftnode.Status {
	switch s {
	case gossip.StatusAlive:
		return raftnode.StatusAlive
	case gossip.StatusLeaving:
		return raftnode.StatusLeaving
	case gossip.StatusLeft:
		return raftnode.StatusLeft
	case gossip.StatusFailed:
		return raftnode.StatusFailed
	}
	return 0
}

// caughtUp reports whether this member applied every write the leader
// had committed when it last asked, once since start (kv.Server.Synced):
// a joining or restarted member is ready only once it holds the
// cluster's key space, not a first batch or its state from before.
func (ks *keySpace) caughtUp() bool { return ks.kv.Synced() }

// learners returns the members raft's configuration holds as
// non-voters, by member id; nil when the configuration cannot be read.
func (ks *keySpace) learners() map[uint64]bool {
	cfg, err := ks.node.Configuration()
	if err != nil {
		return nil
	}
	out := make(map[uint64]bool)
	for _, srv := range cfg.Servers {
		if srv.Suffrage == raft.Voter {
			continue
		}
		if id, ok := raftnode.MemberOf(srv.ID); ok {
			out[id] = true
		}
	}
	return out
}
