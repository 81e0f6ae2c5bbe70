package raftkv

import (
	"io"

	"github.com/hashicorp/raft"
)

// StateMachine is the key space as raft sees it: kv provides it, raft
// drives it through NewFSM. ApplyEntry, Skip, Snapshot and Restore are
// called from raft's one FSM goroutine, never concurrently with each other; Applied
// and RenewLease may be called from any goroutine at any time.
type StateMachine interface {
	// Skip records an entry that carries no command (a configuration)
	// as applied at its index and term, so that Applied reaches every
	// index a read may wait for.
	Skip(index, term uint64)
	// ApplyEntry applies the commands of one committed entry, in order,
	// at the entry's log index and term, and only then makes Applied
	// reach index: a read that waited for index sees every command of
	// the entry, not the first ones of a packed entry (pack.go). It
	// never fails: a command that cannot apply becomes an error result
	// inside the state machine, for the proposer to find by the
	// command's id. cmds belong to raft; keep no reference to them.
	ApplyEntry(index, term uint64, cmds [][]byte)
	// Applied returns the index of the last entry (command or
	// configuration) applied whole, or the one a Restore brought back (kept inside the
	// snapshot: Restore learns no index from raft). It is always the
	// index of an entry every member's StateMachine sees, or zero, so
	// that every member's Applied reaches it: ReadIndex hands it to
	// followers to wait for.
	Applied() uint64
	// Snapshot captures the state now and returns the function that
	// writes it later, off raft's FSM goroutine, while Apply goes on.
	Snapshot() (func(io.Writer) error, error)
	// Restore replaces the whole state with the one read from r.
	Restore(r io.Reader) error
	// RenewLease restarts a lease's TTL and returns the TTL, in seconds;
	// kv.ErrLeaseNotFound when the lease is gone. Consensus calls it on
	// the leader only.
	RenewLease(id int64) (int64, error)
}

// NewFSM adapts sm to raft.FSM: raft hands it the committed log, and
// asks it for snapshots and to restore them.
func NewFSM(sm StateMachine) raft.FSM { return &fsm{sm: sm} }

// fsm is NewFSM's raft.FSM.
type fsm struct{ sm StateMachine }

// Apply applies the commands of an entry, packed or not (pack.go),
// together at the entry's index, and records a configuration as
// applied; raft hands an FSM no other kind. The leader packs entries:
// one it damaged applies the commands before the damage and then counts
// as applied, the same on every member; the callers of the rest time
// out.
func (f *fsm) Apply(l *raft.Log) any {
	switch l.Type {
	case raft.LogCommand:
		var cmds [][]byte
		_ = eachCommand(l.Data, func(cmd []byte) { // the damage is seen as callers timing out
			cmds = append(cmds, cmd)
		})
		if len(cmds) == 0 { // a damaged or empty packed entry
			f.sm.Skip(l.Index, l.Term)
			return nil
		}
		f.sm.ApplyEntry(l.Index, l.Term, cmds)
	case raft.LogConfiguration:
		f.sm.Skip(l.Index, l.Term)
	}
	return nil
}

// ApplyBatch is Apply for each entry. fsm is a raft.BatchingFSM so that
// raft hands it configurations too (see Skip).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	for _, l := range logs {
		f.Apply(l)
	}
	return make([]any, len(logs))
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	write, err := f.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	return fsmSnapshot(write), nil
}

// Restore replaces the state with the snapshot read from rc, and closes
// rc whatever happens, as raft expects.
func (f *fsm) Restore(rc io.ReadCloser) error {
	err := f.sm.Restore(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return err
}

// fsmSnapshot writes a captured state into a snapshot sink.
type fsmSnapshot func(io.Writer) error

// Persist writes the state and closes the sink, or cancels the sink when
// the write fails so raft discards the partial snapshot.
func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s(sink); err != nil {
		_ = sink.Cancel() // the write's error is the one to report
		return err
	}
	return sink.Close()
}

// Release does nothing: the captured state is the write function's.
func (fsmSnapshot) Release() {}
