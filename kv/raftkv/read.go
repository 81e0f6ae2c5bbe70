package raftkv

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"chute/kv"
)

// A read index on the leader is etcd's: the commit index, confirmed by a
// round of heartbeats to a majority (raft's VerifyLeader) that this
// member still leads, so no other could have committed anything later;
// the reader then waits until its StateMachine applied it. Nothing is
// written to the log for a read. Only in a term whose barrier has not
// committed yet (a new leader may not know its predecessor's last
// commits) does a read take a barrier, as it did before that.
//
// The index handed out must be one every member's StateMachine reaches:
// a command or a configuration (NewFSM passes both), never the no-op a
// new leader appends or a barrier. Indexes up to readyIndex are answered
// with the StateMachine's applied index, which is such an entry; later
// ones are entries this leader appended in readyTerm after its barrier:
// commands, configurations and nudges (nudge.go), an index up to the
// last nudge answered with the nudge's read.

// raft.VerifyLeader is not the whole check: it counts answers to
// heartbeats sent before it was called, which a leader frozen or cut off
// with one on the way reads once it runs again, from before the others
// elected a leader of their own (raftpeer's accepted.go has the story).
// After it, verifiedIndex also waits until a majority of the voters,
// this member counted, accepted an AppendEntries request the transport
// sent after the check began (Answers): VerifyLeader has just sent each
// peer a heartbeat, so a leader that still leads has them within a
// round trip, and one that does not never does and steps down.

// Answers is what the leadership check needs of raft's transport:
// raftpeer.Transport's Mark and Accepted.
type Answers interface {
	// Mark returns a point in the AppendEntries requests sent: every
	// request sent after Mark returns comes after it.
	Mark() uint64
	// Accepted returns the peers that accepted, in term, a request sent
	// after mark, and a channel closed when that may have changed.
	Accepted(term, mark uint64) ([]raft.ServerAddress, <-chan struct{})
}

// readBatch is the callers of one leadership check (or barrier): every
// leaderRead that began before the loop issued it.
type readBatch struct {
	done  chan struct{} // closed once index and err are set
	index uint64
	err   error
}

// leaderRead joins the next barrier and returns the StateMachine's
// applied index once it committed, or its error.
func (c *Consensus) leaderRead(ctx context.Context) (uint64, error) {
	c.readMu.Lock()
	b := c.pending
	if b == nil {
		b = &readBatch{done: make(chan struct{})}
		c.pending = b
	}
	c.readMu.Unlock()
	select {
	case c.readReq <- struct{}{}:
	default: // the loop is already woken
	}
	select {
	case <-b.done:
		return b.index, b.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-c.stop:
		return 0, kv.ErrStopped
	}
}

// loop issues the barriers, one at a time: for the callers waiting
// (pending), and once per term after this member became leader, which
// Status.IsLeader waits for. It wakes on a read, on raft's state
// changes, and every readyRetry.
func (c *Consensus) loop() {
	defer c.wg.Done()
	tick := time.NewTicker(readyRetry)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.readReq:
		case <-c.obsCh:
		case <-tick.C:
		}
		c.readMu.Lock()
		b := c.pending
		c.pending = nil
		c.readMu.Unlock()
		if b == nil && !c.needsBarrier() {
			continue
		}
		var index uint64
		var err error
		if c.needsBarrier() || c.readyIndex.Load() == 0 {
			index, err = c.barrier()
		} else {
			index, err = c.verifiedIndex()
		}
		if b != nil {
			b.index, b.err = index, err
			close(b.done)
		}
	}
}

// verifiedIndex returns the read index of a leader whose term's barrier
// committed: the commit index once a majority confirmed the leadership
// in readyTerm; a barrier's index when the term moved meanwhile.
func (c *Consensus) verifiedIndex() (uint64, error) {
	term := c.readyTerm.Load()
	mark := c.cfg.Answers.Mark()
	idx := c.raft.CommitIndex()
	c.verifies.Add(1)
	if err := c.raft.VerifyLeader().Error(); err != nil {
		return 0, fromRaft(err)
	}
	if err := c.acceptedSince(term, mark); err != nil {
		return 0, err
	}
	if c.raft.CurrentTerm() != term {
		return c.barrier() // led again in a later term: its no-op may be the commit index
	}
	if idx <= c.readyIndex.Load() {
		return c.sm.Applied(), nil
	}
	n, err := c.lastNudge()
	if err != nil {
		return 0, err
	}
	if n != nil && idx <= n.index {
		return n.read, nil
	}
	return idx, nil
}

// acceptedPoll bounds the wait between two looks at raft's state while
// acceptedSince waits for answers.
const acceptedPoll = 50 * time.Millisecond

// acceptedSince waits until a majority of the latest configuration's
// voters, this member counted as one, accepted in term an AppendEntries
// request sent after mark. It fails with raft's not-leader once this
// member no longer leads, and with kv.ErrTimeout after ApplyTimeout. A
// member that leads again in a later term stops waiting: no answer in
// term comes any more, and verifiedIndex's barrier confirms the later
// one.
func (c *Consensus) acceptedSince(term, mark uint64) error {
	deadline := time.Now().Add(c.cfg.ApplyTimeout)
	poll := time.NewTimer(acceptedPoll)
	defer poll.Stop()
	for {
		if c.raft.State() != raft.Leader {
			return fromRaft(raft.ErrNotLeader)
		}
		if c.raft.CurrentTerm() != term {
			return nil
		}
		peers, changed := c.cfg.Answers.Accepted(term, mark)
		voters, have := 0, 1
		for _, s := range c.raft.GetConfiguration().Configuration().Servers {
			if s.Suffrage != raft.Voter {
				continue
			}
			voters++
			if slices.Contains(peers, s.Address) {
				have++
			}
		}
		if have > voters/2 {
			return nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return fmt.Errorf("%w: %d of %d voters accepted the leadership check", kv.ErrTimeout, have, voters)
		}
		poll.Reset(min(wait, acceptedPoll))
		select {
		case <-changed:
		case <-poll.C:
		case <-c.stop:
			return kv.ErrStopped
		}
	}
}

// needsBarrier reports whether this member leads and has not committed
// a barrier in the current term.
func (c *Consensus) needsBarrier() bool {
	return c.raft.State() == raft.Leader && c.readyTerm.Load() != c.raft.CurrentTerm()
}

// barrier commits a barrier and returns the StateMachine's applied index
// after it. A barrier commits through a quorum in the leader's term and
// returns once the FSM applied every entry before it, so its success
// both confirms the leadership and makes the StateMachine hold every
// write committed before it was issued. It waits for raft, not for Close
// (see the package doc).
func (c *Consensus) barrier() (uint64, error) {
	// A success commits in this term or a later one; readyTerm may thus
	// be behind, never ahead.
	term := c.raft.CurrentTerm()
	c.barriers.Add(1)
	f := c.raft.Barrier(c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return 0, fromRaft(err)
	}
	// The barrier's own index, not raft's applied index: that one is
	// moved by raft's main loop after it hands entries to the FSM, and
	// may still be below the barrier when the barrier answers. Without
	// the index, readyIndex stays 0 and reads keep taking barriers.
	if ix, ok := f.(interface{ Index() uint64 }); ok {
		c.readyIndex.Store(ix.Index())
	}
	c.readyTerm.Store(term)
	c.nudgeIfQuiet() // the followers learn of the commits before it
	return c.sm.Applied(), nil
}
