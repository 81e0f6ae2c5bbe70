package gossip

import "net/url"

var _ PeerSource = (*Membership)(nil)

// Peers returns the alive members other than this one with the address of
// their peer listener (their first peer URL), for the Replicator.
func (m *Membership) Peers() []Peer {
	self := m.Local().ID
	var out []Peer
	for _, mem := range m.Alive() {
		if mem.ID == self || len(mem.PeerURLs) == 0 {
			continue
		}
		u, err := url.Parse(mem.PeerURLs[0])
		if err != nil || u.Host == "" {
			continue
		}
		out = append(out, Peer{ID: mem.ID, Addr: u.Host})
	}
	return out
}
