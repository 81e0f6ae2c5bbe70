package raftkv

import (
	"errors"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/internal/setting"
)

// Defaults of the Config fields whose zero value means "the default".
const (
	// DefaultApplyTimeout is raft's default commit timeout with room
	// for a leader election: long enough to ride out a failover, short
	// enough that a client sees an error before its own deadline.
	DefaultApplyTimeout = 5 * time.Second
	// DefaultMaxCommandBytes holds kv's largest request (etcd's 1.5 MiB
	// --max-request-bytes plus its 512 KiB of gRPC overhead) and the
	// command's own encoding around it.
	DefaultMaxCommandBytes = 2<<20 + 256<<10
	// MaxAppendEntries is what raft's Config.MaxAppendEntries should be:
	// the entries one AppendEntries carries to a follower catching up.
	// Four of DefaultMaxCommandBytes make 9 MiB: within the peer link's
	// 64 MiB message bound (raft resends a refused request unchanged for
	// ever, so 32 of them stopped a follower for good), and short enough
	// on the wire that a leader catching a member up still hears from its
	// quorum within a leader lease (16 lost leadership in a test on this
	// machine with the fast profile's 250 ms lease, and 8 under the race
	// detector). The leader has at most maxEntriesInFlight (4) packed
	// entries to take together otherwise, so it costs nothing there.
	MaxAppendEntries = 4
	// DefaultTryTimeout is raft's default heartbeat timeout: a leader
	// that has not answered a read or a renewal by then is as likely
	// gone as a follower's raft thinks it is.
	DefaultTryTimeout = time.Second
	// DefaultNudgeInterval is raft's default commit tick, the most a
	// follower waited for a commit before the leader nudged (nudge.go).
	DefaultNudgeInterval = 50 * time.Millisecond
)

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Config configures a Consensus. Zero values are documented per field;
// New never reads flags, files or the environment.
type Config struct {
	// Raft is this member's raft (raftnode.Node.Raft), its FSM built by
	// NewFSM(SM). Required. Its shutdown is the caller's, after Close.
	Raft *raft.Raft
	// Answers is Raft's transport, which tells the leadership check of
	// a read which peers accepted requests sent after it began
	// (raftpeer.Transport; see read.go). Required.
	Answers Answers
	// SM is the state machine raft applies to. Required.
	SM StateMachine
	// ClusterID and MemberID go with every call to the leader, as on
	// every call of the peer link. MemberID is also how TransferLeader
	// knows this member: required, non-zero.
	ClusterID uint64
	MemberID  uint64
	// DialOptions are added to peer.Dial's own for every connection to
	// a leader: the peer link's transport credentials. Nil: plain text.
	DialOptions []grpc.DialOption
	// ApplyTimeout bounds each call (Propose, ReadIndex, RenewLease,
	// TransferLeader) on top of its context: the wait for a leader, the
	// forwarding and raft's commit together. Zero: DefaultApplyTimeout.
	ApplyTimeout time.Duration
	// TryTimeout bounds one try of a read index or a lease renewal
	// forwarded to the leader, which may be tried again: a leader that
	// has not answered by then (frozen, or cut off while its connection
	// stays open) is asked again, or whoever leads by then, within
	// ApplyTimeout. Commands are never tried again this way: they may
	// still commit. Zero: DefaultTryTimeout.
	TryTimeout time.Duration
	// MaxCommandBytes bounds a proposed command, proposed here or
	// forwarded by a peer: peer input is bounded as client input is.
	// Zero: DefaultMaxCommandBytes.
	MaxCommandBytes int
	// NudgeInterval is the least time between two nudges of the leader
	// (nudge.go): a nudge goes at once after a quiet write, and after a
	// write within NudgeInterval of the last nudge once that much passed.
	// Zero: DefaultNudgeInterval.
	NudgeInterval time.Duration
	// Logger receives the package's logs. Nil: discarded.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in; the
// required fields are left for the caller.
func DefaultConfig() Config {
	return Config{
		ApplyTimeout:    DefaultApplyTimeout,
		TryTimeout:      DefaultTryTimeout,
		MaxCommandBytes: DefaultMaxCommandBytes,
		NudgeInterval:   DefaultNudgeInterval,
	}
}

// Validate reports every setting that cannot work, each a *FieldError,
// joined. It does no I/O.
func (c Config) Validate() error {
	var errs []error
	required := func(name string, missing bool) {
		if missing {
			errs = append(errs, &FieldError{Pkg: "raftkv", Field: name, Err: errors.New("required")})
		}
	}
	required("Raft", c.Raft == nil)
	required("Answers", c.Answers == nil)
	required("SM", c.SM == nil)
	required("MemberID", c.MemberID == 0)
	errs = append(errs, setting.Negative("raftkv", setting.Num("ApplyTimeout", c.ApplyTimeout))...)
	errs = append(errs, setting.Negative("raftkv", setting.Num("TryTimeout", c.TryTimeout))...)
	errs = append(errs, setting.Negative("raftkv", setting.Num("MaxCommandBytes", c.MaxCommandBytes))...)
	errs = append(errs, setting.Negative("raftkv", setting.Num("NudgeInterval", c.NudgeInterval))...)
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = d.ApplyTimeout
	}
	if c.TryTimeout == 0 {
		c.TryTimeout = d.TryTimeout
	}
	if c.MaxCommandBytes == 0 {
		c.MaxCommandBytes = d.MaxCommandBytes
	}
	if c.NudgeInterval == 0 {
		c.NudgeInterval = d.NudgeInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
