package raftpeer

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/internal/setting"
)

// Config configures a Transport. Zero values are documented per field; New
// never reads flags, files or the environment.
type Config struct {
	// LocalAddr is this member's peer listener, host:port, as the other
	// members dial it; raft knows this member by it. Required.
	LocalAddr raft.ServerAddress
	// ClusterID and MemberID go with every call, as on every call of the
	// peer link: the receiver refuses another cluster's calls.
	ClusterID uint64
	MemberID  uint64
	// DialOptions are added to peer.Dial's own for every connection:
	// the peer link's transport credentials. Nil: plain text.
	DialOptions []grpc.DialOption
	// Timeout bounds one call (InstallSnapshot: scaled by the snapshot's
	// size, as raft's NetworkTransport does), the wait for each answer on
	// a pipeline, and, when serving, the wait for raft to take a request
	// and for each snapshot chunk. Zero: 10s.
	Timeout time.Duration
	// MaxInFlight bounds the AppendEntries requests sent on a pipeline and
	// not yet answered. 1 turns pipelining off. Zero: 2, raft's default.
	MaxInFlight int
	// MaxMessageBytes bounds one encoded request, sent or received. It
	// must hold raft's largest AppendEntries (MaxAppendEntries entries of
	// the largest command) and stay within the peer listener's message
	// limit. Zero: DefaultMaxMessageBytes, the peer listener's.
	MaxMessageBytes int
	// MaxEntries bounds the entries of one received AppendEntries. Zero:
	// 1024, the most raft's MaxAppendEntries allows.
	MaxEntries int
	// SnapshotChunkBytes is the size of the snapshot chunks sent and the
	// most a received one may hold. Zero: 1 MiB.
	SnapshotChunkBytes int
	// MaxSnapshotBytes bounds the announced size of a received snapshot.
	// Zero: 16 GiB.
	MaxSnapshotBytes int64
	// Logger receives the transport's logs. Nil: discarded.
	Logger *slog.Logger
}

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Validate reports every setting that cannot work, each a *FieldError,
// joined. It does no I/O.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(string(c.LocalAddr)); err != nil {
		errs = append(errs, &FieldError{Pkg: "raftpeer", Field: "LocalAddr",
			Err: fmt.Errorf("%q: want host:port", c.LocalAddr)})
	}
	errs = append(errs, setting.Negative("raftpeer",
		setting.Num("MaxInFlight", c.MaxInFlight),
		setting.Num("MaxMessageBytes", c.MaxMessageBytes),
		setting.Num("MaxEntries", c.MaxEntries),
		setting.Num("SnapshotChunkBytes", c.SnapshotChunkBytes),
	)...)
	errs = append(errs, setting.Negative("raftpeer",
		setting.Num("Timeout", int64(c.Timeout)),
		setting.Num("MaxSnapshotBytes", c.MaxSnapshotBytes),
	)...)
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 2
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = 1024
	}
	if c.SnapshotChunkBytes == 0 {
		c.SnapshotChunkBytes = 1 << 20
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = 16 << 30
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// DefaultMaxMessageBytes is Config.MaxMessageBytes when zero: the peer
// listener's message limit.
const DefaultMaxMessageBytes = 64 << 20

// EntriesPerRequest returns how many log entries, each of entryBytes of
// data, one AppendEntries may carry within maxMessageBytes once encoded.
// raft's MaxAppendEntries must be at most that for the largest entry:
// raft sends a follower behind it that many entries in one request, the
// transport refuses a request over the bound (ErrMessageTooLarge), and
// raft sends the same request again for ever, so the follower never gets
// past those entries (and a cluster needing it for a quorum commits
// nothing).
func EntriesPerRequest(maxMessageBytes, entryBytes int) int {
	// Room for msgpack's field names and numbers, generously: about
	// 80 bytes an entry and 200 a request, measured.
	const perEntry, perRequest = 1 << 10, 64 << 10
	return (maxMessageBytes - perRequest) / (entryBytes + perEntry)
}
