package raftnode

import (
	"errors"
	"maps"
	"time"

	"github.com/hashicorp/raft"
)

// run is the node's loop, its one goroutine: at each tick, Changed
// signal and the Joined close, it notes raft state, bootstraps when due
// and, while leader, makes the next configuration change. It owns the
// failure notes; nothing else touches them.
func (n *Node) run() {
	defer n.wg.Done()
	ticker := n.cfg.Clock.NewTicker(n.cfg.ReconcileInterval)
	defer ticker.Stop()
	joined := n.cfg.Members.Joined()
	if joined == nil {
		joined = closedChan()
	}
	changed := n.cfg.Members.Changed()
	failed := failures{}
	tags := n.Tags()
	leader := n.raft.LeaderCh()
	for {
		// A change made, the next one is planned at once rather than at
		// the next tick: a wiped member's replacement is a removal, an
		// addition and a promotion.
		for range maxChangesPerWake {
			if !n.step(joined, failed) {
				break
			}
		}
		if now := n.Tags(); !maps.Equal(now, tags) {
			tags = now
			if n.cfg.TagsChanged != nil {
				n.cfg.TagsChanged(maps.Clone(now))
			}
		}
		select {
		case <-n.stop:
			return
		case <-ticker.Chan():
		case <-changed:
		case <-n.cluster.changed:
		case <-leader: // elected: the configuration may wait for changes
		case <-joined:
			joined = nil // closed: do not spin on it
		}
	}
}

// maxChangesPerWake bounds the configuration changes the loop makes
// one after the other before it waits again.
const maxChangesPerWake = 8

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// anyHasState reports whether an alive member other than self says it
// has raft state.
func anyHasState(self raft.ServerID, members []Member) bool {
	for _, m := range members {
		if m.Status == StatusAlive && m.hasState() && m.ServerID() != self {
			return true
		}
	}
	return false
}

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// step is one round of the loop. It reports whether it made a
// configuration change.
func (n *Node) step(joined <-chan struct{}, failed failures) bool {
	if !n.hasState.Load() && n.raft.LastIndex() > 0 {
		n.hasState.Store(true)
	}
	if !n.hasState.Load() {
		// Whether the seeds answered is read before the members: read
		// after, a join that ended in between would pass for answered
		// with the members of before it (this node alone), and with an
		// expect of 1 this node would bootstrap a cluster of its own
		// beside the one its seeds hold.
		answered := joined == nil || isClosed(joined)
		members := n.cfg.Members.Members()
		n.candidate.Store(answered && !anyHasState(n.stores.id, members))
		if answered {
			n.maybeBootstrap(members)
		}
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false // shutting down
	}
	cfg := f.Configuration()
	members := byServerID(n.cfg.Members.Members())
	now := n.cfg.Clock.Now()
	failed.observe(cfg, members, now)
	if n.raft.State() != raft.Leader {
		clear(n.foreign) // noted as leader: a later term notes afresh
		if n.cluster.get() == "" {
			n.follow(cfg, members)
		}
		return false
	}
	if n.cluster.get() == "" {
		n.settle(cfg, members)
	}
	own := n.cluster.get()
	n.noteForeign(own, cfg, members, now)
	ch, ok := planChange(n.stores.id, own, cfg, members, failed, now, n.cfg.DeadServerGrace, n.cfg.Voters)
	if !ok {
		return false
	}
	return n.apply(ch, f.Index())
}

// maybeBootstrap bootstraps the cluster when this node, with no raft
// state and its seeds answered, sees the members to bootstrap with.
func (n *Node) maybeBootstrap(members []Member) {
	cfg, why := bootstrapConfiguration(n.stores.id, n.cfg.BootstrapExpect, n.cfg.Voters, members)
	if why != "" {
		n.log.Debug("not bootstrapping", "reason", why)
		return
	}
	// The id is kept before the bootstrap, so that a crash between the
	// two leaves no state without one, and from then on another
	// cluster's leader, adding this member concurrently, is refused.
	id := bootstrapClusterID(cfg)
	got, err := n.cluster.adopt(id)
	if err != nil {
		n.log.Warn("bootstrap failed", "err", err)
		return
	}
	if got != id {
		// A leader's first request came first: this member is its
		// cluster's, and waits for its entries.
		return
	}
	err = n.raft.BootstrapCluster(cfg).Error()
	switch {
	case err == nil:
		n.log.Info("bootstrapped raft cluster", "servers", len(cfg.Servers), "raft_cluster", id)
		n.hasState.Store(true)
	case errors.Is(err, raft.ErrCantBootstrap):
		// A leader's entries, or a candidate's term, came first: of this
		// bootstrap (the same id) or of a cluster without an id, since
		// the transport refuses others'. The id stays: the first is this
		// cluster's, and the second takes it from this member's tag
		// (settle).
		n.hasState.Store(true)
	default:
		n.log.Warn("bootstrap failed", "err", err)
	}
}

// settle gives a leader without a raft cluster id one. Its state may
// predate the id (cluster.go), or it may have lost the id its followers
// keep (a member that was down while the id came, its entry since in a
// snapshot, elected first at a restart): the id any server of cfg
// publishes is the cluster's, and the leader takes it. Only when every
// other server of cfg is known to the members, has told its state and
// publishes none does it mint one; while one is unknown it waits, since
// that one may hold the id.
func (n *Node) settle(cfg raft.Configuration, members map[raft.ServerID]Member) {
	published, all, ok := n.configurationID(cfg, members)
	switch {
	case !ok || !all:
	case published == "":
		n.mint()
	default:
		n.take(published, "raft cluster id taken from the configuration's servers")
	}
}

// follow gives a member that is not the leader, with raft state and no
// raft cluster id, the id a server of its configuration publishes. Its
// state predates the id, and the leader minted one after this member
// left the configuration (stopped with SIGTERM during an upgrade, or
// every member stopped and the last one started first): no leader's
// entry brings it the id then, and a leader does not add a member with
// raft state and none, which may be another cluster's. A server of its
// own configuration is of its own cluster: server ids are unique to a
// data dir.
func (n *Node) follow(cfg raft.Configuration, members map[raft.ServerID]Member) {
	if published, _, ok := n.configurationID(cfg, members); ok && published != "" {
		n.take(published, "raft cluster id taken from the servers of this member's configuration")
	}
}

// configurationID returns the raft cluster id the servers of cfg other
// than this node publish, "" when none does. all reports whether every
// one of them is known to the members and has told its state; ok is
// false when two publish different ids (logged).
func (n *Node) configurationID(cfg raft.Configuration, members map[raft.ServerID]Member) (published string, all, ok bool) {
	all = true
	for _, s := range cfg.Servers {
		if s.ID == n.stores.id {
			continue
		}
		m, known := members[s.ID]
		if !known || m.pending() {
			all = false
			continue
		}
		switch got := m.raftCluster(); {
		case got == "":
		case published == "":
			published = got
		case got != published:
			n.log.Warn("servers of the configuration publish different raft cluster ids; this member takes none", "one", published, "other", got)
			return "", false, false
		}
	}
	return published, all, true
}

// take makes id this member's raft cluster id, logging msg.
func (n *Node) take(id, msg string) {
	got, err := n.cluster.adopt(id)
	if err != nil {
		n.log.Warn("raft cluster id not taken", "err", err)
		return
	}
	if got == id {
		n.log.Info(msg, "raft_cluster", got)
	}
}

// mint proposes a raft cluster id, once per term, for a leader whose
// cluster has none (settle). The entry sets it on every member as it is
// applied, this one included; a later entry of another leader changes
// nothing.
func (n *Node) mint() {
	term := n.raft.CurrentTerm()
	if n.minting == term {
		return
	}
	n.minting = term
	id, err := newClusterID()
	if err != nil {
		n.log.Warn("raft cluster id not proposed", "err", err)
		return
	}
	f := n.raft.ApplyLog(mintEntry(id), n.cfg.ChangeTimeout)
	if err := f.Error(); err != nil {
		n.log.Warn("raft cluster id not proposed", "err", err)
		n.minting = 0 // try again at the next round
	}
}

// noteForeign logs, once per member and id, the members the leader does
// not add because they belong to another raft cluster or may. A member
// with raft state and no id is logged only once it has been so for
// noIDWait: one of this cluster from before the id takes it from the
// servers of its configuration within a round (Node.follow).
func (n *Node) noteForeign(own string, cfg raft.Configuration, members map[raft.ServerID]Member, now time.Time) {
	found := foreignMembers(own, cfg, members)
	for id, m := range found {
		got := m.raftCluster()
		seen, ok := n.foreign[id]
		if !ok || seen.id != got {
			seen = foreignNote{id: got, since: now}
		}
		if seen.logged || (got == "" && now.Sub(seen.since) < noIDWait) {
			n.foreign[id] = seen
			continue
		}
		seen.logged = true
		n.foreign[id] = seen
		if got == "" {
			n.log.Warn("member not added: it has raft state and no raft cluster id, and took none from the servers it knew, so it may belong to another raft cluster; wipe its data dir to add it",
				"peer", id, "addr", m.Addr, "raft_cluster", own, "waited", now.Sub(seen.since).Round(time.Second))
			continue
		}
		n.log.Error("member not added: it belongs to another raft cluster under the same cluster name; stop it, wipe its data dir and start it again to add it",
			"peer", id, "addr", m.Addr, "its_raft_cluster", got, "raft_cluster", own)
	}
	for id := range n.foreign {
		if _, ok := found[id]; !ok {
			delete(n.foreign, id)
		}
	}
}

// noIDWait is how long a member with raft state and no raft cluster id
// goes unadded before the leader logs it (noteForeign).
const noIDWait = 30 * time.Second

// foreignNote is what the leader noted of a member it does not add.
type foreignNote struct {
	id     string    // the member's raft cluster id, "" for none
	since  time.Time // first seen so
	logged bool
}

// apply makes one configuration change to the configuration at index
// prev (raft refuses it when another came in between) and waits for it,
// at most ChangeTimeout. It reports whether the change was made.
func (n *Node) apply(ch change, prev uint64) bool {
	timeout := n.cfg.ChangeTimeout
	start := n.cfg.Clock.Now()
	var f raft.IndexFuture
	switch ch.kind {
	case addVoter:
		f = n.raft.AddVoter(ch.id, ch.addr, prev, timeout)
	case addNonvoter:
		f = n.raft.AddNonvoter(ch.id, ch.addr, prev, timeout)
	case removeServer:
		f = n.raft.RemoveServer(ch.id, prev, timeout)
	}
	if err := f.Error(); err != nil {
		n.log.Warn("configuration change failed", "change", ch.kind, "peer", ch.id, "addr", ch.addr, "reason", ch.reason, "err", err)
		return false
	}
	n.log.Info("configuration changed", "change", ch.kind, "peer", ch.id, "addr", ch.addr, "reason", ch.reason,
		"index", f.Index(), "took", n.cfg.Clock.Since(start))
	return true
}
