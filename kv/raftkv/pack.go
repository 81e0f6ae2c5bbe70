package raftkv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"chute/kv"
)

// Log entries of several commands. The leader applies the commands it is
// given (its own members' and the followers' forwarded calls) through
// one queue: while maxEntriesInFlight entries are on their way through
// raft, the commands that arrive wait, and the next entry carries all of
// them, up to maxEntryCommands and MaxCommandBytes. Raft's costs per
// entry (its future, the log store's frame, the AppendEntries field, the
// FSM call) are then paid once for many commands, and one log write and
// sync covers as many commands as came while the last one ran, beyond
// raft's MaxAppendEntries entries.
//
// An entry of one command is the command itself, as before packing. An
// entry of several starts with packMarker, then each command as its
// length (a uvarint) and its bytes. A command is an etcd
// InternalRaftRequest in protobuf, whose first byte is a field tag,
// never zero, so no command is read as a packed entry.
const (
	packMarker         = byte(0x00)
	maxEntriesInFlight = 4
	maxEntryCommands   = 1024
)

// errBadPack: a packed entry whose framing is damaged.
var errBadPack = errors.New("raftkv: packed log entry damaged")

// packEntry is one log entry holding cmds, in order.
func packEntry(cmds [][]byte) []byte {
	if len(cmds) == 1 {
		return cmds[0]
	}
	b := make([]byte, 1, packedSize(cmds))
	b[0] = packMarker
	for _, cmd := range cmds {
		b = binary.AppendUvarint(b, uint64(len(cmd)))
		b = append(b, cmd...)
	}
	return b
}

// packedSize is the length of packEntry(cmds) for two or more commands.
func packedSize(cmds [][]byte) int {
	n := 1
	for _, cmd := range cmds {
		n += uvarintLen(len(cmd)) + len(cmd)
	}
	return n
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// eachCommand calls fn with each command of the entry data, in order:
// data itself when it is not packed. fn's argument is part of data. It
// returns errBadPack, after the commands before the damage, when the
// framing is damaged.
func eachCommand(data []byte, fn func(cmd []byte)) error {
	if len(data) == 0 || data[0] != packMarker {
		fn(data)
		return nil
	}
	rest := data[1:]
	for len(rest) > 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return errBadPack
		}
		fn(rest[k : k+int(n)])
		rest = rest[k+int(n):]
	}
	return nil
}

// applying is a command waiting for the entry that carries it.
type applying struct {
	ctx  context.Context // the caller's: once it ended, the command is dropped unless already in an entry
	cmd  []byte
	term uint64            // the only term the command may be appended in; 0: any
	done chan applyOutcome // buffered: the applier never waits for the caller
}

// applyOutcome is what raft answered for the entry of a command.
type applyOutcome struct {
	index uint64
	err   error
}

// applyQueue is the commands waiting to be packed into this member's
// raft log, and the appliers packing them.
type applyQueue struct {
	c       *Consensus
	order   sync.Mutex // held from taking commands to raft.Apply: entries follow queue order
	mu      sync.Mutex // guards pending and running
	pending []*applying
	running int
}

// apply queues cmds, in order, for the next entries of this member's
// raft, and returns their outcomes' channels. A term other than 0 binds
// them to it: they go into an entry only while this member leads in
// that term, and otherwise fail with kv.ErrNotLeader.
func (q *applyQueue) apply(ctx context.Context, term uint64, cmds [][]byte) ([]chan applyOutcome, error) {
	out := make([]chan applyOutcome, len(cmds))
	q.mu.Lock()
	for i, cmd := range cmds {
		out[i] = make(chan applyOutcome, 1)
		q.pending = append(q.pending, &applying{ctx: ctx, cmd: cmd, term: term, done: out[i]})
	}
	start := q.running < maxEntriesInFlight
	if start {
		q.running++
	}
	q.mu.Unlock()
	if start && !q.c.goAttach(q.run) {
		q.mu.Lock()
		q.running--
		q.mu.Unlock()
		return nil, kv.ErrStopped
	}
	return out, nil
}

// run is an applier: it applies an entry of what is pending, and waits
// for raft's answer, until nothing is pending.
func (q *applyQueue) run() {
	for {
		q.order.Lock()
		batch := q.take()
		if batch == nil {
			q.order.Unlock()
			q.c.nudgeIfQuiet() // the followers learn of the last entry's commit
			return
		}
		if batch = q.inTerm(batch); len(batch) == 0 {
			q.order.Unlock()
			continue
		}
		cmds := make([][]byte, len(batch))
		for i, a := range batch {
			cmds[i] = a.cmd
		}
		f := q.c.raft.Apply(packEntry(cmds), q.c.cfg.ApplyTimeout)
		q.order.Unlock()
		o := applyOutcome{err: fromRaft(f.Error())}
		if o.err == nil {
			o.index = f.Index()
		}
		for _, a := range batch {
			a.done <- o
		}
	}
}

// inTerm fails the commands of batch bound to a term this member does
// not lead in, and returns the others. It runs under order, just before
// raft.Apply: raft appends an Apply in the term of its leader loop of the
// moment, and a member that stopped leading answers those still queued
// with raft.ErrNotLeader (its follower and candidate loops do), so a
// command that passes is appended in its term or not at all.
func (q *applyQueue) inTerm(batch []*applying) []*applying {
	kept := batch[:0] // batch is no longer in pending: filtered in place
	for _, a := range batch {
		if a.term != 0 && !q.c.leadsIn(a.term) {
			a.done <- applyOutcome{err: fmt.Errorf("%w: not leading in term %d", kv.ErrNotLeader, a.term)}
			continue
		}
		kept = append(kept, a)
	}
	return kept
}

// take removes the next entry's commands from pending, dropping those
// whose callers left (they never reach the log) and failing them all
// once the Consensus is closed; when none are left it ends the applier
// that asks and returns nil.
func (q *applyQueue) take() []*applying {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.pending) > 0 && (q.c.stopped() || q.pending[0].ctx.Err() != nil) {
		a := q.pending[0]
		q.pending = q.pending[1:]
		a.done <- applyOutcome{err: kv.ErrStopped} // read only when closed; a caller that left reads nothing
	}
	if len(q.pending) == 0 {
		q.running--
		q.pending = nil // lets a burst's backing array go
		return nil
	}
	n, size := 1, 1+uvarintLen(len(q.pending[0].cmd))+len(q.pending[0].cmd)
	for n < len(q.pending) && n < maxEntryCommands {
		a := q.pending[n]
		if a.ctx.Err() != nil {
			break // dropped by the next take
		}
		size += uvarintLen(len(a.cmd)) + len(a.cmd)
		if size > q.c.cfg.MaxCommandBytes {
			break
		}
		n++
	}
	batch := q.pending[:n:n]
	q.pending = q.pending[n:]
	return batch
}
