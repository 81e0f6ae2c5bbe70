package raftkv

import (
	"github.com/hashicorp/raft"

	"chute/kv"
)

// A follower learns that an entry committed from the leader's next
// AppendEntries request, which carries the commit index. While entries
// keep coming, each one's request tells of those before it. After the
// last, only raft's commit tick would: an empty request to each follower
// every CommitTimeout, since raft's heartbeats carry no commit index.
// That tick is most of what an idle cluster does (on the development
// machine it was two thirds of three idle members' CPU at raft's 50 ms),
// so cmd/chute sets it long, and the leader tells the followers itself:
// once its apply queue is empty and everything in its log committed, it
// appends a barrier, a nudge, whose request carries the commit of
// everything before it. A follower then applies the last command within
// a round trip of its commit, not a tick later.
//
// A nudge changes nothing, so no follower needs to learn that it
// committed, and none is appended for one: the leader nudges again only
// when its log's last entry is not a nudge that told of every entry
// before it. But the leader's commit index may then be a nudge, which no
// StateMachine reaches (raft hands it no barrier), so a read index is
// never one: a commit index up to the last nudge is answered with that
// nudge's read, the StateMachine's applied index once the nudge answered,
// which holds every command before the nudge (verifiedIndex).

// nudge is one barrier appended to tell the followers of the commit.
type nudge struct {
	done chan struct{} // closed once the fields are set
	// index is the barrier's index, 0 when none was appended or it
	// failed; told is the commit index before it was appended, which its
	// request carries at least; read is the StateMachine's Applied once
	// it answered.
	index, told, read uint64
}

// nudgeIfQuiet has a nudge appended, after this one answered if one is
// on its way (one at a time), when this member leads and its log is
// quiet (see nudgeOnce). It does not wait.
func (c *Consensus) nudgeIfQuiet() {
	c.nudgeMu.Lock()
	if c.nudging != nil {
		c.nudgeAgain = true
		c.nudgeMu.Unlock()
		return
	}
	n := &nudge{done: make(chan struct{})}
	c.nudging = n
	c.nudgeMu.Unlock()
	if !c.goAttach(func() { c.runNudges(n) }) {
		c.nudgeMu.Lock()
		c.nudging = nil
		c.nudgeMu.Unlock()
		close(n.done)
	}
}

// runNudges runs n, and another after it while nudgeIfQuiet was called
// meanwhile.
func (c *Consensus) runNudges(n *nudge) {
	for n != nil {
		c.nudgeOnce(n)
		c.nudgeMu.Lock()
		if n.index != 0 {
			c.nudged = n
		}
		done := n
		n = nil
		if c.nudgeAgain && !c.stopped() {
			c.nudgeAgain = false
			n = &nudge{done: make(chan struct{})}
		}
		c.nudging = n
		c.nudgeMu.Unlock()
		close(done.done)
	}
}

// nudgeOnce appends n's barrier and waits for it, when this member leads
// in a term whose barrier committed, every entry of its log committed,
// and the last is not a nudge that told of every entry before it. An
// entry still on its way is left to whoever appended it: the apply
// queue calls nudgeIfQuiet when its last entry answers.
func (c *Consensus) nudgeOnce(n *nudge) {
	if c.raft.State() != raft.Leader || c.readyTerm.Load() != c.raft.CurrentTerm() {
		return
	}
	last, commit := c.raft.LastIndex(), c.raft.CommitIndex()
	if commit < last {
		return
	}
	c.nudgeMu.Lock()
	prev := c.nudged
	c.nudgeMu.Unlock()
	if prev != nil && prev.index == last && prev.told+1 >= last {
		return
	}
	c.nudges.Add(1)
	f := c.raft.Barrier(c.cfg.ApplyTimeout)
	if f.Error() != nil {
		return // a leader that lost its term answers reads with a barrier of the next
	}
	ix, ok := f.(interface{ Index() uint64 })
	if !ok {
		return
	}
	n.index, n.told, n.read = ix.Index(), commit, c.sm.Applied()
}

// lastNudge waits for the nudge on its way, if any, and returns the last
// that answered, nil when none did. A nudge appended after it was called
// is not waited for: its index is above any commit index read before.
func (c *Consensus) lastNudge() (*nudge, error) {
	c.nudgeMu.Lock()
	n := c.nudging
	c.nudgeMu.Unlock()
	if n != nil {
		select {
		case <-n.done:
		case <-c.stop:
			return nil, kv.ErrStopped
		}
	}
	c.nudgeMu.Lock()
	defer c.nudgeMu.Unlock()
	return c.nudged, nil
}
