package dispatch

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Epochs and message numbers. Epoch e numbers its messages from
// (e-1)<<32 + 1 to e<<32, so epochs above maxEpoch have no numbers, and no
// number is above maxSeq: seq+1 never wraps. A number whose epoch is more
// than epochLead above the epoch of this member's record of the queue is
// refused: records travel in milliseconds, and even claims settled out of
// order (last writer wins) leave a record a few epochs behind, never 2^16.
const (
	maxEpoch  = 1<<32 - 1
	maxSeq    = maxEpoch << 32
	epochLead = 1 << 16
)

// epochOfSeq returns the epoch that gives seq, 0 for 0.
func epochOfSeq(seq uint64) uint64 {
	if seq == 0 {
		return 0
	}
	return (seq-1)>>32 + 1
}

// errEpochExhausted refuses a claim of a queue whose record is at maxEpoch.
func errEpochExhausted(name string) error {
	return status.Errorf(codes.FailedPrecondition,
		"etcdserver: queue %s: dispatcher epoch %d is the last; delete %s to start the queue over", name, uint64(maxEpoch), RecordKey(name))
}

// errNumbersExhausted refuses a put to a queue that has given its last
// message number.
func errNumbersExhausted(name string) error {
	return status.Errorf(codes.ResourceExhausted, "etcdserver: queue %s: message numbers exhausted", name)
}

// nextEpoch returns the epoch a claim of rec takes, ok false when rec is
// at the last epoch.
func nextEpoch(rec Record) (uint64, bool) {
	if rec.Epoch >= maxEpoch {
		return 0, false
	}
	return rec.Epoch + 1, true
}
