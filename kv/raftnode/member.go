package raftnode

import (
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
)

// Status is a member's state as the membership layer (serf) reports it.
type Status int

// The statuses of a member. The zero Status is unknown and counts as not
// alive.
const (
	StatusAlive   Status = iota + 1 // answering
	StatusLeaving                   // announced it leaves
	StatusLeft                      // left gracefully
	StatusFailed                    // stopped answering
)

// The serf tags a member publishes for raft (see Node.Tags).
const (
	// TagServerID is the member's raft server id. A member without it
	// does not take part in raft.
	TagServerID = "raft-id"
	// TagState is "1" once the member has raft state: a log, a snapshot
	// or a term, from its data dir, a bootstrap or a leader. Otherwise
	// "0" once it may bootstrap (its seeds answered and no member it sees
	// has raft state; see Node.Tags), and "?" until then.
	TagState = "raft"
	// TagExpect is the member's --bootstrap-expect, in decimal.
	TagExpect = "expect"
	// TagCluster is the member's raft cluster id (cluster.go), absent
	// while it has none.
	TagCluster = "raft-cluster"
)

// statePending is TagState while the member's raft stores are not open
// yet (PendingTags), or while it has none and waits for its seeds or a
// leader (Node.Tags): whether it has, or is about to get, raft state is
// not known.
const statePending = "?"

// PendingTags are the tags a member publishes from its first gossip until
// its Node is made and its own Tags replace them: TagState "not known
// yet". No member bootstraps while an alive member shows them, since
// that member may have raft state: a member whose data dir is gone,
// started together with the others, would otherwise see them alive
// before their tags say so and bootstrap a cluster of its own.
func PendingTags() map[string]string { return map[string]string{TagState: statePending} }

// Member is one member as the membership layer knows it. Tags is the
// caller's until handed over; the Node only reads it.
type Member struct {
	// Addr is the member's peer listener, host:port: its raft address.
	Addr   raft.ServerAddress
	Status Status
	// Tags are the member's serf tags; the raft ones are TagServerID,
	// TagState and TagExpect.
	Tags map[string]string
}

// ServerID returns the member's raft server id, "" when it has none.
func (m Member) ServerID() raft.ServerID { return raft.ServerID(m.Tags[TagServerID]) }

// hasState reports whether the member says it has raft state.
func (m Member) hasState() bool { return m.Tags[TagState] == "1" }

// raftCluster returns the member's raft cluster id, "" when it has none.
func (m Member) raftCluster() string { return m.Tags[TagCluster] }

// foreign reports whether a leader of raft cluster own must not add the
// member: it names another raft cluster, or, once own is known, it has
// raft state and names none (a data dir of a chute version before the
// id, of this cluster or of another: no telling). A member without state
// takes the leader's id with its first entries.
func (m Member) foreign(own string) bool {
	if got := m.raftCluster(); got != "" {
		return got != own
	}
	return own != "" && m.hasState()
}

// pending reports whether the member has not told yet whether it has
// raft state (PendingTags).
func (m Member) pending() bool { return m.Tags[TagState] == statePending }

// expect returns the member's bootstrap expect, 0 when it has none.
func (m Member) expect() int {
	n, err := strconv.Atoi(m.Tags[TagExpect])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// MemberSource is the membership layer as the Node sees it: cmd/chute
// adapts gossip.Membership to it; tests feed a fake. Its methods are
// called from the Node's one loop goroutine and must not block for long.
type MemberSource interface {
	// Members returns every member known, this node included, with
	// failed and left members until the membership layer forgets them.
	// The slice and maps are the caller's.
	Members() []Member
	// Joined is closed once a seed answered, and closed from the start
	// when there are no seeds. A node never bootstraps before it is
	// closed. Nil: closed.
	Joined() <-chan struct{}
	// Changed receives a value, sent without blocking, when Members may
	// have changed; the Node also polls every ReconcileInterval, so a
	// lost signal only delays. Nil: poll only.
	Changed() <-chan struct{}
}

// LargestTags are the largest tags a member with bootstrap expect
// publishes (Node.Tags), for the membership layer's size checks.
func LargestTags(expect int) map[string]string {
	tags := Tags(raft.ServerID(strings.Repeat("f", 16)+"-"+strings.Repeat("f", 8)), expect, true)
	tags[TagCluster] = strings.Repeat("f", clusterIDLen)
	return tags
}

// Tags returns the serf tags a member with server id id, bootstrap
// expect and (or not) raft state publishes. Node.Tags is this for the
// node, with TagState "?" while it may not bootstrap yet.
func Tags(id raft.ServerID, expect int, hasState bool) map[string]string {
	state := "0"
	if hasState {
		state = "1"
	}
	return map[string]string{
		TagServerID: string(id),
		TagState:    state,
		TagExpect:   strconv.Itoa(expect),
	}
}
