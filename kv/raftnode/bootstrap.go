package raftnode

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
)

// bootstrapConfiguration returns the configuration a member with server
// id self and no raft state bootstraps, given Members, or a reason why
// it must not bootstrap (yet).
//
// The candidates are the alive members with a server id and expect as
// their bootstrap expect. None of the alive members may have raft state
// (a cluster exists: its leader adds us), be still opening its raft
// stores or waiting for its seeds (PendingTags, Node.Tags: it may have
// state, or its seeds may hold a cluster) or have a different expect (an
// operator's mistake to fix). Once there are at least expect candidates,
// the configuration is the expect lowest server ids, the first voters of
// them voters and the rest non-voters, and only members in it bootstrap.
// Every candidate computes the same set from the same members, so
// whichever bootstraps first, they agree.
func bootstrapConfiguration(self raft.ServerID, expect, voters int, members []Member) (raft.Configuration, string) {
	var candidates []raft.Server
	for _, m := range members {
		id := m.ServerID()
		if m.Status != StatusAlive {
			continue
		}
		if m.pending() && id != self { // this node's own state is known
			return raft.Configuration{}, fmt.Sprintf("member at %s has not told whether it has raft state", m.Addr)
		}
		if id == "" {
			continue
		}
		if m.hasState() && id != self {
			return raft.Configuration{}, fmt.Sprintf("member %s has raft state", id)
		}
		if got := m.expect(); got != expect {
			return raft.Configuration{}, fmt.Sprintf("member %s expects %d members, not %d", id, got, expect)
		}
		candidates = append(candidates, raft.Server{ID: id, Address: m.Addr})
	}
	if len(candidates) < expect {
		return raft.Configuration{}, fmt.Sprintf("%d of %d members alive", len(candidates), expect)
	}
	slices.SortFunc(candidates, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	candidates = candidates[:expect]
	if !slices.ContainsFunc(candidates, func(s raft.Server) bool { return s.ID == self }) {
		return raft.Configuration{}, "not among the members that bootstrap"
	}
	for i := range candidates {
		candidates[i].Suffrage = raft.Voter
		if i >= voters {
			candidates[i].Suffrage = raft.Nonvoter
		}
	}
	return raft.Configuration{Servers: candidates}, ""
}
