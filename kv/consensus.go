package kv

import (
	"context"
	"errors"
)

// Consensus orders the writes of the key space across the members, so
// that every member applies the same commands in the same order to its
// StateMachine (an mvcc.StateMachine); kv/raftkv implements it over raft.
// kv never imports raft: it encodes each write as a command, proposes it,
// and learns its result from its own StateMachine applying it, by the
// command's id.
//
// Methods may be called concurrently. Errors are ErrNoLeader,
// ErrTimeout, ErrNotLeader, a context's error, or a gRPC status error
// (answered by the leader), passed to the client as it is.
type Consensus interface {
	// Propose replicates cmd, an encoded command, and returns once the
	// cluster committed it; this member applies it soon after, if it has
	// not already. On a member that is not the leader it forwards cmd
	// to the leader. An error means the command may or may not be
	// committed later; ErrLeaderChanged says so for a command a leader
	// took and lost with its leadership.
	Propose(ctx context.Context, cmd []byte) error
	// ProposeAsLeader is Propose for the leader's own duties (expiring
	// leases, recording renewals, compacting), decided while Status
	// showed this member leading in term: cmd goes into this member's
	// log only while it leads in that term, and is never forwarded. A
	// leader resumed after a freeze still believes it leads until it
	// hears of the next term, and the lease deadlines it holds are long
	// past: its decisions must die with its term, not reach the next
	// leader. ErrNotLeader when it no longer leads in term.
	ProposeAsLeader(ctx context.Context, term uint64, cmd []byte) error
	// ReadIndex returns an index of the StateMachine (StateMachine.Applied)
	// at or after every write committed before the call: once this
	// member's StateMachine applied it, a read sees every write
	// acknowledged before the read began (etcd's read index).
	ReadIndex(ctx context.Context) (uint64, error)
	// RenewLease restarts a lease's TTL at the leader (its
	// StateMachine.RenewLease) and returns the TTL; ErrLeaseNotFound when
	// the lease is gone.
	RenewLease(ctx context.Context, id int64) (int64, error)
	// TransferLeader moves the leadership to member; ErrBadTransferee
	// when member is not a voter of the cluster.
	TransferLeader(ctx context.Context, member uint64) error
	// Status reports the consensus state as Maintenance.Status shows it.
	// It is cheap: kv reads it on every lease check.
	Status() ConsensusStatus
}

// ConsensusStatus is the state of the consensus as seen from this member.
type ConsensusStatus struct {
	// Leader is the member id of the leader; 0 when none is known.
	Leader uint64
	// IsLeader: this member is the leader and has applied every entry
	// of earlier terms, so its lease deadlines and key space are the
	// cluster's; only then does it expire leases.
	IsLeader bool
	// Term is the current raft term.
	Term uint64
	// CommitIndex and LastIndex are raft's commit index and the index of
	// the last entry in this member's log.
	CommitIndex, LastIndex uint64
}

// Errors of the consensus, mapped to etcd's by toGRPC.
var (
	// ErrNoLeader: no leader is known, as in a minority partition or
	// during an election.
	ErrNoLeader = errors.New("kv: no leader")
	// ErrTimeout: the request was not committed in time.
	ErrTimeout = errors.New("kv: request timed out")
	// ErrNotLeader: a request only the leader serves reached a member
	// that is not (any more) the leader.
	ErrNotLeader = errors.New("kv: not leader")
	// ErrBadTransferee: MoveLeader named a member that cannot lead.
	ErrBadTransferee = errors.New("kv: bad leader transferee")
	// ErrLeaderChanged: the command reached a leader that lost its
	// leadership before it committed: it may still commit under the next
	// leader, or never. Propose does not try it again (a second copy
	// could apply after writes acknowledged meanwhile); the proposer
	// waits for its own apply of it instead, for a while.
	ErrLeaderChanged = errors.New("kv: leader changed")
)
