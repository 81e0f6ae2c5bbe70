package raftkv

import (
	"time"

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
// so cmd/chute sets it long, and the leader tells the followers itself
// (as etcd's leader sends an append as soon as its commit index moves):
// once its apply queue is empty and everything in its log committed, it
// appends a barrier, a nudge, whose request carries the commit of
// everything before it, and a follower applies the last command within
// a round trip of its commit. A nudge is an entry every member writes,
// so nudges are at least Config.NudgeInterval apart: under a steady
// trickle of writes a follower waits for a commit at most that long, as
// it waited for raft's tick before. A cluster of one has no follower to
// tell.
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
	// index is the barrier's index, 0 when it failed; told is the
	// commit index before it was appended, which its request carries at
	// least; read is the StateMachine's Applied once it answered.
	index, told, read uint64
}

// nudgeIfQuiet has the log looked at, and a nudge appended if it is
// quiet (nudgeOnce): at once, or NudgeInterval after the last nudge; once
// more after that when called while a look is on its way. It does not
// wait.
func (c *Consensus) nudgeIfQuiet() {
	c.nudgeMu.Lock()
	if c.nudgeRunning {
		c.nudgeAgain = true
		c.nudgeMu.Unlock()
		return
	}
	c.nudgeRunning = true
	c.nudgeMu.Unlock()
	if !c.goAttach(c.runNudges) {
		c.nudgeMu.Lock()
		c.nudgeRunning = false
		c.nudgeMu.Unlock()
	}
}

// runNudges looks at the log, again while nudgeIfQuiet was called
// meanwhile, each look at least NudgeInterval after the last nudge,
// until closed.
func (c *Consensus) runNudges() {
	timer := time.NewTimer(time.Until(c.nudgeNext))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-c.stop:
			c.nudgeMu.Lock()
			c.nudgeRunning = false
			c.nudgeMu.Unlock()
			return
		}
		c.nudgeMu.Lock()
		c.nudgeAgain = false // a call from here on asks for another look
		c.nudgeMu.Unlock()
		if c.nudgeOnce() {
			c.nudgeNext = time.Now().Add(c.cfg.NudgeInterval)
		}
		c.nudgeMu.Lock()
		if !c.nudgeAgain {
			c.nudgeRunning = false
			c.nudgeMu.Unlock()
			return
		}
		c.nudgeMu.Unlock()
		timer.Reset(time.Until(c.nudgeNext))
	}
}

// nudgeOnce appends a nudge and waits for it when this member leads in a
// term whose barrier committed, has followers, every entry of its log
// committed, and the last is not a nudge that told of every entry before
// it; it reports whether it appended one. An entry still on its way is
// left to whoever appended it: the apply queue calls nudgeIfQuiet when
// its last entry answers, and so does the barrier of a term.
func (c *Consensus) nudgeOnce() bool {
	if c.raft.State() != raft.Leader || c.readyTerm.Load() != c.raft.CurrentTerm() {
		return false
	}
	last, commit := c.raft.LastIndex(), c.raft.CommitIndex()
	if commit < last {
		return false // the common case under write load: checked before the configuration's copy
	}
	if len(c.raft.GetConfiguration().Configuration().Servers) < 2 {
		return false
	}
	n := &nudge{done: make(chan struct{})}
	c.nudgeMu.Lock()
	prev := c.nudged
	if prev != nil && prev.index == last && prev.told+1 >= last {
		c.nudgeMu.Unlock()
		return false
	}
	c.nudging = n // before the barrier is appended: lastNudge waits for it
	c.nudgeMu.Unlock()
	c.nudges.Add(1)
	f := c.raft.Barrier(c.cfg.ApplyTimeout)
	if f.Error() == nil { // else a leader that lost its term answers reads with a barrier of the next
		if ix, ok := f.(interface{ Index() uint64 }); ok {
			n.index, n.told, n.read = ix.Index(), commit, c.sm.Applied()
		}
	}
	c.nudgeMu.Lock()
	if n.index != 0 {
		c.nudged = n
	}
	c.nudging = nil
	c.nudgeMu.Unlock()
	close(n.done)
	return true
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
