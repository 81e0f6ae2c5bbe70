package kv

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
)

// Stamps are hybrid logical clocks: a local write takes the larger of the
// clock plus one and the wall clock in microseconds, and a change received
// from a peer raises the clock to its stamp. Stamps so stay close to the
// wall clock on every member, whatever the number of writes the cluster
// made, and a member that just started (clock 0) can still tell a stamp
// no member could have made: one more than MaxStampLead ahead of both its
// clock and its wall clock. Such a change is refused, never adopted:
// adopting it would move every member's clock to where the next write
// has no next value.
//
// The clock never wraps: a local write when it is at the top of its range
// fails with ErrClockExhausted. Refusing stamps far ahead makes that state
// unreachable short of 2^32 batches each MaxStampLead ahead of the last.

// MaxStampLead is how far, in stamp units (microseconds), a peer's stamp
// may be ahead of this member's clock or wall clock, whichever is later:
// 2^32 µs, about 71 minutes, far above any clock skew NTP leaves between
// members, and 2^32 times smaller than the stamps' range.
const MaxStampLead = 1 << 32

// Size bounds of a change received from a peer, beyond the client limits:
// a member writes some keys itself. A dead letter's key spells the queue's
// name with "/dlq/" and a 20-digit number, at most deadLetterKeyExtra bytes
// more than its producer key, and its value holds the refused row
// JSON-escaped, at most six times as long, with a few fields around it.
const (
	deadLetterKeyExtra = 32
	remoteValueFactor  = 8
)

// Errors of changes received from a peer.
var (
	// ErrClockExhausted: the Lamport clock is at its largest value, so a
	// local write has no stamp to take.
	ErrClockExhausted = errors.New("kv: lamport clock exhausted")
	// ErrStampAhead: a peer's change carries a stamp no member could have
	// made (MaxStampLead).
	ErrStampAhead = errors.New("kv: replicated stamp implausibly far ahead")
)

// errGRPCClockExhausted has no etcd equivalent; it uses etcd's wording.
var errGRPCClockExhausted = status.Error(codes.OutOfRange, "etcdserver: lamport clock exhausted")

// wallStamp is t as a stamp: microseconds since the Unix epoch, 0 before it.
func wallStamp(t time.Time) uint64 {
	if us := t.UnixMicro(); us > 0 {
		return uint64(us)
	}
	return 0
}

// nextStamp is the stamp of a local write after clock at wall time now.
// The caller checked that clock < math.MaxUint64.
func nextStamp(clock uint64, now time.Time) uint64 {
	return max(clock+1, wallStamp(now))
}

// RemoteError is a change from a peer that was refused; it carries the
// gRPC status the peer service answers with, and unwraps to the cause.
type RemoteError struct {
	Code codes.Code
	Err  error
}

func (e *RemoteError) Error() string { return e.Err.Error() }

func (e *RemoteError) Unwrap() error { return e.Err }

// GRPCStatus lets status.FromError read the code.
func (e *RemoteError) GRPCStatus() *status.Status { return status.New(e.Code, e.Err.Error()) }

// checkRemote refuses a change from a peer that a member could not have
// made: a stamp more than MaxStampLead ahead, a key or value longer than
// a member writes. The caller holds mu.
func (s *store) checkRemote(in *peerpb.Write, now time.Time) error {
	ref := max(s.clock, wallStamp(now))
	if in.Lamport > ref && in.Lamport-ref > MaxStampLead {
		return &RemoteError{Code: codes.OutOfRange, Err: fmt.Errorf("%w: %d, this member's clock is at %d", ErrStampAhead, in.Lamport, ref)}
	}
	if len(in.Key) > s.cfg.maxKeyBytes+deadLetterKeyExtra {
		return &RemoteError{Code: codes.InvalidArgument, Err: fmt.Errorf("%w: %d bytes", ErrKeyTooLarge, len(in.Key))}
	}
	if len(in.Value) > s.cfg.maxRequestBytes*remoteValueFactor {
		return &RemoteError{Code: codes.InvalidArgument, Err: fmt.Errorf("%w: a value of %d bytes", ErrRequestTooLarge, len(in.Value))}
	}
	return nil
}
