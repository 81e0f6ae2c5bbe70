package raftnode

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// changeKind is one kind of configuration change.
type changeKind int

const (
	addVoter    changeKind = iota + 1 // add, promote or re-address a voter
	addNonvoter                       // add or re-address a non-voter
	removeServer
)

func (k changeKind) String() string {
	switch k {
	case addVoter:
		return "add voter"
	case addNonvoter:
		return "add non-voter"
	case removeServer:
		return "remove"
	default:
		return "unknown"
	}
}

// change is one configuration change the leader makes.
type change struct {
	kind   changeKind
	id     raft.ServerID
	addr   raft.ServerAddress
	reason string
}

// failures tracks, for each server of the configuration, since when the
// members have not shown it alive. The node's loop owns it.
type failures map[raft.ServerID]time.Time

// observe records what Members says of the servers of cfg at now:
// an alive server is forgotten, a server seen failed or missing for the
// first time is noted, and servers no longer in cfg are dropped.
func (f failures) observe(cfg raft.Configuration, members map[raft.ServerID]Member, now time.Time) {
	in := make(map[raft.ServerID]bool, len(cfg.Servers))
	for _, s := range cfg.Servers {
		in[s.ID] = true
		if m, ok := members[s.ID]; ok && m.Status == StatusAlive {
			delete(f, s.ID)
		} else if _, noted := f[s.ID]; !noted {
			f[s.ID] = now
		}
	}
	for id := range f {
		if !in[id] {
			delete(f, id)
		}
	}
}

// byServerID indexes members by their server id; members without one
// are left out.
func byServerID(members []Member) map[raft.ServerID]Member {
	idx := make(map[raft.ServerID]Member, len(members))
	for _, m := range members {
		if id := m.ServerID(); id != "" {
			idx[id] = m
		}
	}
	return idx
}

// planChange returns the one configuration change the leader self makes
// next to bring cfg in line with members, or false when there is none.
// In order:
//
//  1. Remove a server that left, that another alive server replaced at
//     its address (its data dir was wiped), that has been failed or
//     missing for grace (failed says since when), or that says it is in
//     another raft cluster than own (it took the id of another leader
//     that added it too).
//  2. Promote the alive non-voter with the lowest id while there are
//     fewer than voters voters, once it says it is in raft cluster own.
//  3. Add an alive member that is not in cfg, or whose address changed:
//     a voter while there are fewer than voters and it says it is in
//     raft cluster own, else a non-voter; never a member foreign to own
//     (Member.foreign). A new member thus becomes a voter only once it
//     took this cluster's id: a member that two raft clusters' leaders
//     both added, and that took the other's id, never holds a seat in
//     this cluster's majority, where it would refuse every request.
//
// With own "" (a leader whose state predates the id), members without
// one are added and promoted as before the id.
//
// The leader never removes itself, and never demotes: voters beyond
// voters (a larger bootstrap) stay until they fail.
func planChange(self raft.ServerID, own string, cfg raft.Configuration, members map[raft.ServerID]Member, failed failures, now time.Time, grace time.Duration, voters int) (change, bool) {
	servers := slices.Clone(cfg.Servers)
	slices.SortFunc(servers, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	aliveAt := make(map[raft.ServerAddress]raft.ServerID)
	for id, m := range members {
		if m.Status == StatusAlive {
			aliveAt[m.Addr] = id
		}
	}

	for _, s := range servers {
		if s.ID == self {
			continue
		}
		m, known := members[s.ID]
		switch {
		case known && m.Status == StatusAlive && own != "" && m.raftCluster() != "" && m.raftCluster() != own:
			return change{removeServer, s.ID, s.Address, fmt.Sprintf("in raft cluster %.16s", m.raftCluster())}, true
		case known && m.Status == StatusAlive:
		case known && m.Status == StatusLeft:
			return change{removeServer, s.ID, s.Address, "left"}, true
		case !known && aliveAt[s.Address] != "":
			return change{removeServer, s.ID, s.Address, fmt.Sprintf("replaced by %s", aliveAt[s.Address])}, true
		default:
			if since, ok := failed[s.ID]; ok && now.Sub(since) >= grace {
				return change{removeServer, s.ID, s.Address, fmt.Sprintf("failed or gone for %v", now.Sub(since).Round(time.Millisecond))}, true
			}
		}
	}

	count := 0
	inCfg := make(map[raft.ServerID]raft.Server, len(servers))
	for _, s := range servers {
		inCfg[s.ID] = s
		if s.Suffrage == raft.Voter {
			count++
		}
	}
	if count < voters {
		for _, s := range servers {
			if m := members[s.ID]; s.Suffrage != raft.Voter && m.Status == StatusAlive && m.raftCluster() == own {
				return change{addVoter, s.ID, members[s.ID].Addr, "promote"}, true
			}
		}
	}

	ids := make([]raft.ServerID, 0, len(members))
	for id, m := range members {
		if m.Status == StatusAlive && !m.foreign(own) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if id == self {
			continue
		}
		m := members[id]
		s, ok := inCfg[id]
		switch {
		case !ok && count < voters && m.raftCluster() == own:
			return change{addVoter, id, m.Addr, "new member"}, true
		case !ok:
			return change{addNonvoter, id, m.Addr, "new member"}, true
		case s.Address != m.Addr && s.Suffrage == raft.Voter:
			return change{addVoter, id, m.Addr, fmt.Sprintf("moved from %s", s.Address)}, true
		case s.Address != m.Addr:
			return change{addNonvoter, id, m.Addr, fmt.Sprintf("moved from %s", s.Address)}, true
		}
	}
	return change{}, false
}

// foreignMembers returns the alive members not in cfg that a leader of
// raft cluster own does not add (Member.foreign), by server id.
func foreignMembers(own string, cfg raft.Configuration, members map[raft.ServerID]Member) map[raft.ServerID]Member {
	var out map[raft.ServerID]Member
	for id, m := range members {
		if m.Status != StatusAlive || !m.foreign(own) || slices.ContainsFunc(cfg.Servers, func(s raft.Server) bool { return s.ID == id }) {
			continue
		}
		if out == nil {
			out = make(map[raft.ServerID]Member)
		}
		out[id] = m
	}
	return out
}
