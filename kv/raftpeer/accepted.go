package raftpeer

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// A leader's read index holds only if, after the read began, a majority
// still took it for the leader: accepted an AppendEntries request in its
// term. raft.VerifyLeader counts every accepted answer that comes while
// it waits, answers to requests sent before it was called among them: a
// leader frozen (SIGSTOP, a long pause of its machine) with a heartbeat
// on the way reads that heartbeat's answer once it runs again, an answer
// from before the others elected a leader of their own, and VerifyLeader
// confirms a leadership that ended seconds ago (the e2e test
// TestLinearizable_leaderFrozen caught such reads, stale by a few
// writes). The transport numbers the AppendEntries requests it sends and
// remembers the last each peer accepted: Mark and Accepted tell which
// peers accepted one sent after a point.

// answers is the transport's record of accepted AppendEntries requests.
type answers struct {
	sent atomic.Uint64 // requests numbered so far

	mu      sync.Mutex
	last    map[raft.ServerAddress]acceptedRequest // by peer
	changed chan struct{}                          // closed when last moves; nil until asked for
}

// acceptedRequest is the term and number of an accepted request.
type acceptedRequest struct{ term, seq uint64 }

// number returns the next request's number, taken before it is sent.
func (a *answers) number() uint64 { return a.sent.Add(1) }

// record notes resp, the answer of addr to request seq of term: accepted
// when the peer answered in that term (whether or not its log matched),
// not when it answered with a later one.
func (a *answers) record(addr raft.ServerAddress, term, seq uint64, resp *raft.AppendEntriesResponse) {
	if resp.Term != term {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.last[addr]
	if term < cur.term || term == cur.term && seq <= cur.seq {
		return
	}
	if a.last == nil {
		a.last = make(map[raft.ServerAddress]acceptedRequest)
	}
	a.last[addr] = acceptedRequest{term: term, seq: seq}
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// Mark returns a point in the AppendEntries requests this transport
// sends: every request sent after Mark returns is numbered after it.
func (t *Transport) Mark() uint64 { return t.answers.sent.Load() }

// Accepted returns the peers that accepted, in term, an AppendEntries
// request sent after mark (Mark), and a channel closed when a peer
// accepts another request, so that a caller waiting for more can wait
// on it and ask again.
func (t *Transport) Accepted(term, mark uint64) ([]raft.ServerAddress, <-chan struct{}) {
	a := &t.answers
	a.mu.Lock()
	defer a.mu.Unlock()
	var peers []raft.ServerAddress
	for addr, r := range a.last {
		if r.term == term && r.seq > mark {
			peers = append(peers, addr)
		}
	}
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return peers, a.changed
}
