package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/jonboulle/clockwork"

	"chute/internal/setting"
)

// Defaults of the Config fields whose zero value means "the default".
const (
	DefaultBootstrapExpect   = 1
	DefaultVoters            = 3
	DefaultDeadServerGrace   = time.Minute
	DefaultReconcileInterval = 5 * time.Second
	DefaultChangeTimeout     = 10 * time.Second
	DefaultSnapshotRetain    = 2
)

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Config configures a Node. Zero values are documented per field; New
// never reads flags, files or the environment.
type Config struct {
	// Dir is the member's data dir (--data-dir); the raft stores live in
	// its "raft" folder, created when missing. Required.
	Dir string
	// MemberID is the member's id on the membership layer
	// (gossip.MemberID of its name); the raft server id starts with it.
	// Required, non-zero.
	MemberID uint64
	// LocalAddr is this member's peer listener, host:port, as the others
	// dial it: its raft address. Required.
	LocalAddr raft.ServerAddress
	// Transport carries raft's RPCs (kv/raftpeer on the peer link).
	// Required. Node.Shutdown closes it (raft does).
	Transport raft.Transport
	// FSM is the state raft's log is applied to. Required.
	FSM raft.FSM
	// Members is the membership layer. Required.
	Members MemberSource

	// BootstrapExpect is how many alive members, with no raft state and
	// the same BootstrapExpect, a member with no raft state waits for
	// before it bootstraps a cluster of them. Zero: 1.
	BootstrapExpect int
	// Voters is how many voters the leader keeps; other members are
	// non-voters. Odd. Zero: 3.
	Voters int
	// DeadServerGrace is how long a member may be failed (or gone from
	// Members) before the leader removes it from the configuration. A
	// member that left is removed at once. Zero: one minute.
	DeadServerGrace time.Duration
	// ReconcileInterval is how often the node looks at Members without a
	// Changed signal. Zero: 5s.
	ReconcileInterval time.Duration
	// ChangeTimeout bounds one configuration change (and one bootstrap).
	// Zero: 10s.
	ChangeTimeout time.Duration
	// SnapshotRetain is how many snapshots are kept on disk. Zero: 2.
	SnapshotRetain int
	// Raft is the template of raft's configuration (timeouts, snapshot
	// thresholds); New sets LocalID and Logger on a copy. Nil:
	// raft.DefaultConfig().
	Raft *raft.Config
	// ForceNewCluster rewrites the stored configuration, before raft
	// starts, to this node alone as a voter (raft.RecoverCluster; etcd's
	// --force-new-cluster): the recovery of a cluster that lost its
	// majority for good. It keeps the log and the state; the leader then
	// adds the other members as they come. Without raft state it does
	// nothing: the node bootstraps as usual.
	ForceNewCluster bool
	// TagsChanged, when set, is called with the node's new tags (see
	// Node.Tags) whenever they change, from the node's loop: it must not
	// block for long. Nil: nobody is told; read Node.Tags.
	TagsChanged func(map[string]string)

	// Logger receives the node's and raft's logs. Nil: discarded.
	Logger *slog.Logger
	// Clock drives the reconcile ticker and the dead-server grace. Nil:
	// the real clock.
	Clock clockwork.Clock
}

// DefaultConfig returns a Config with every default filled in; the
// required fields are left for the caller.
func DefaultConfig() Config {
	return Config{
		BootstrapExpect:   DefaultBootstrapExpect,
		Voters:            DefaultVoters,
		DeadServerGrace:   DefaultDeadServerGrace,
		ReconcileInterval: DefaultReconcileInterval,
		ChangeTimeout:     DefaultChangeTimeout,
		SnapshotRetain:    DefaultSnapshotRetain,
	}
}

// Validate reports every setting that cannot work, each a *FieldError,
// joined. It does no I/O.
func (c Config) Validate() error {
	var errs []error
	field := func(name string, err error) {
		errs = append(errs, &FieldError{Pkg: "raftnode", Field: name, Err: err})
	}
	if c.Dir == "" {
		field("Dir", errors.New("required"))
	}
	if c.MemberID == 0 {
		field("MemberID", errors.New("required"))
	}
	if _, _, err := net.SplitHostPort(string(c.LocalAddr)); err != nil {
		field("LocalAddr", fmt.Errorf("%q: want host:port", c.LocalAddr))
	}
	if c.Transport == nil {
		field("Transport", errors.New("required"))
	}
	if c.FSM == nil {
		field("FSM", errors.New("required"))
	}
	if c.Members == nil {
		field("Members", errors.New("required"))
	}
	if c.Voters > 0 && c.Voters%2 == 0 {
		field("Voters", fmt.Errorf("%d: want an odd number", c.Voters))
	}
	errs = append(errs, setting.Negative("raftnode",
		setting.Num("BootstrapExpect", c.BootstrapExpect),
		setting.Num("Voters", c.Voters),
		setting.Num("SnapshotRetain", c.SnapshotRetain),
	)...)
	errs = append(errs, setting.Negative("raftnode",
		setting.Num("DeadServerGrace", c.DeadServerGrace),
		setting.Num("ReconcileInterval", c.ReconcileInterval),
		setting.Num("ChangeTimeout", c.ChangeTimeout),
	)...)
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.BootstrapExpect == 0 {
		c.BootstrapExpect = d.BootstrapExpect
	}
	if c.Voters == 0 {
		c.Voters = d.Voters
	}
	if c.DeadServerGrace == 0 {
		c.DeadServerGrace = d.DeadServerGrace
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = d.ReconcileInterval
	}
	if c.ChangeTimeout == 0 {
		c.ChangeTimeout = d.ChangeTimeout
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = d.SnapshotRetain
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	return c
}
