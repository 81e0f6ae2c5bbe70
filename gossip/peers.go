package gossip

import (
	"errors"
	"fmt"
	"net/url"
)

// Peer is another member as the peer link dials it.
type Peer struct {
	ID   uint64
	Addr string // host:port of its peer listener
	Boot string // this run of its process (the serf tag "boot")
	// Leaving: it began to stop and hands its work over (Member.Leaving).
	Leaving bool
}

// PeerSource tells who the other alive members are. Peers must be safe
// for concurrent use and cheap: it is asked on every forwarded put.
type PeerSource interface {
	Peers() []Peer
}

var _ PeerSource = (*Membership)(nil)

// Peers returns the alive members other than this one with the address of
// their peer listener (their first peer URL), for the dispatcher, which
// asks on every forwarded put. The list is built once per
// change of the membership (each serf member event moves peersGen on) and
// shared: callers must not modify it.
func (m *Membership) Peers() []Peer {
	gen := m.peersGen.Load()
	if c := m.peers.Load(); c != nil && c.gen == gen {
		return c.list
	}
	list := m.buildPeers()
	// Built from serf's state at or after gen: if an event moved gen on
	// meanwhile, the next call builds the list again.
	m.peers.Store(&peerList{gen: gen, list: list})
	return list
}

// peerList is the cached answer of Peers, valid while peersGen is gen.
type peerList struct {
	gen  uint64
	list []Peer
}

// buildPeers reads the alive peers from serf.
func (m *Membership) buildPeers() []Peer {
	self := MemberID(m.name)
	var out []Peer
	for _, mem := range m.Alive() {
		if mem.ID == self {
			continue
		}
		if p, ok := asPeer(mem); ok {
			out = append(out, p)
		}
	}
	return out
}

// Lookup returns the member of that id as the peer link dials it,
// whatever its status: a failed member stays known until serf reaps it.
func (m *Membership) Lookup(id uint64) (Peer, bool) {
	mem, ok := m.Member(id)
	if !ok {
		return Peer{}, false
	}
	return asPeer(mem)
}

// asPeer returns mem with the address of its peer listener (its first
// peer URL); false when it has none.
func asPeer(mem Member) (Peer, bool) {
	if len(mem.PeerURLs) == 0 {
		return Peer{}, false
	}
	u, err := url.Parse(mem.PeerURLs[0])
	if err != nil || u.Host == "" {
		return Peer{}, false
	}
	return Peer{ID: mem.ID, Addr: u.Host, Boot: mem.Boot, Leaving: mem.Leaving}, true
}

// Errors of RemoveFailed.
var (
	ErrUnknownMember = errors.New("gossip: no such member")
	ErrMemberAlive   = errors.New("gossip: member is alive; only a failed member can be removed (a member that stops leaves by itself)")
)

// RemoveFailed forces a failed member out of the membership at once,
// instead of waiting for serf to reap it (etcd's member remove). It refuses
// an alive member and this member.
func (m *Membership) RemoveFailed(id uint64) error {
	mem, ok := m.Member(id)
	if !ok {
		return ErrUnknownMember
	}
	if mem.Status == StatusAlive || id == m.Local().ID {
		return ErrMemberAlive
	}
	if err := m.serf.RemoveFailedNodePrune(mem.Name); err != nil {
		return fmt.Errorf("gossip: remove %s: %w", mem.Name, err)
	}
	return nil
}
