package dispatch

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
	"chute/sink"
)

// A member is trusted to be a member, not to be correct: what it sends on
// the Queues service is held to the limits a client's put is held to, and
// to bounds on what one call may carry (see the package doc).

// Per-call bounds of the Queues service. A member sends one queue per
// batch or hold, at most chunkMessages per handover chunk and a txn's puts
// (MaxTxnOps, 128 by default) per produce batch.
const (
	// peerCallMessages bounds the messages of one ForwardBatch or Hold.
	peerCallMessages = peerpb.MaxBatchMessages
	// peerCallSeqs bounds the numbers one RELEASE names, and those of
	// one frame (the peer codec refuses a frame past it before it makes
	// them): far above the acknowledgements of a flush interval; a
	// member names more in several frames (takeReleases).
	peerCallSeqs = peerpb.MaxFrameSeqs
	// maxBatchRows is the largest batch_rows (Settings): no batch a
	// member tried (QueueMessage.Batch) is larger.
	maxBatchRows = 1_000_000
)

// Epochs and message numbers. Epoch e numbers its messages from
// (e-1)<<32 + 1 to e<<32, so epochs above maxEpoch have no numbers, and no
// number is above maxSeq: seq+1 never wraps. A number whose epoch is more
// than epochLead above the epoch of this member's record of the queue is
// refused: records are written by compare-and-swap in one log and reach
// every member in milliseconds, so a member's record is at most a few
// epochs behind, never 2^16.
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

// validQueueName reports whether name is one {name} segment of the key
// grammar (ParseKey): non-empty, without "/".
func validQueueName(name string) bool {
	return name != "" && !strings.Contains(name, "/")
}

// peerLimits are the client limits messages from members are held to.
type peerLimits struct {
	maxKeyBytes     int // a producer key /q/{name}/p/{tail}
	maxRequestBytes int // a value
}

// checkPeerMessages refuses a call's messages that no member could have
// accepted from a client: too many, of several queues (a member sends one
// per call), a queue name or tail outside the key grammar, a producer key
// or value over the client limits, a number of no epoch or of an epoch
// far ahead of the record (epoch: the epoch of this member's record of
// the queue), a ClickHouse row that is not a JSON object, a tried batch
// (QueueMessage.Batch) larger than batch_rows may be or of a queue with
// no drainer.
func (l peerLimits) checkPeerMessages(msgs []*peerpb.QueueMessage, epoch uint64) error {
	if len(msgs) > peerCallMessages {
		return status.Errorf(codes.InvalidArgument, "dispatch: %d messages in one call, at most %d", len(msgs), peerCallMessages)
	}
	if len(msgs) == 0 {
		return nil
	}
	name := msgs[0].Queue
	if !validQueueName(name) {
		return status.Errorf(codes.InvalidArgument, "dispatch: queue name %.64q is not one key segment", name)
	}
	_, ch := sink.TableOf(name)
	for _, q := range msgs {
		if q.Queue != name {
			return status.Error(codes.InvalidArgument, "dispatch: messages of several queues in one call")
		}
		if q.Tail == "" || strings.Contains(q.Tail, "/") {
			return status.Errorf(codes.InvalidArgument, "dispatch: queue %s: key %.64q is not one key segment", name, q.Tail)
		}
		if n := len("/q/") + len(name) + len("/p/") + len(q.Tail); n > l.maxKeyBytes {
			return status.Errorf(codes.InvalidArgument, "etcdserver: key is too large: a producer key of %d bytes, at most %d", n, l.maxKeyBytes)
		}
		if len(q.Value) > l.maxRequestBytes {
			return status.Errorf(codes.InvalidArgument, "etcdserver: request is too large: a value of %d bytes, at most %d", len(q.Value), l.maxRequestBytes)
		}
		if len(q.Consumer) > l.maxKeyBytes {
			return status.Errorf(codes.InvalidArgument, "dispatch: consumer id of %d bytes, at most %d", len(q.Consumer), l.maxKeyBytes)
		}
		if err := checkPeerSeq(name, q.Seq, epoch); err != nil {
			return err
		}
		if q.Batch > maxBatchRows || q.Batch > 0 && !ch {
			return status.Errorf(codes.InvalidArgument, "dispatch: queue %s: a tried batch of %d rows, at most %d, of a ClickHouse queue", name, q.Batch, maxBatchRows)
		}
		if ch {
			if err := sink.ValidateRow(q.Value); err != nil {
				return status.Errorf(codes.InvalidArgument, "etcdserver: queue %s: %v", name, err)
			}
		}
	}
	return nil
}

// checkPeerSeq refuses a message number from a member that no epoch gives,
// or that an epoch more than epochLead ahead of epoch gives.
func checkPeerSeq(name string, seq, epoch uint64) error {
	if seq > maxSeq {
		return status.Errorf(codes.OutOfRange, "dispatch: queue %s: message number %d is above the last, %d", name, seq, uint64(maxSeq))
	}
	if e := epochOfSeq(seq); e > epoch && e-epoch > epochLead {
		return status.Errorf(codes.OutOfRange, "dispatch: queue %s: message number %d is of epoch %d, this member's record is at epoch %d", name, seq, e, epoch)
	}
	return nil
}

// nextEpoch returns the epoch a claim of rec takes, ok false when rec is
// at the last epoch.
func nextEpoch(rec Record) (uint64, bool) {
	if rec.Epoch >= maxEpoch {
		return 0, false
	}
	return rec.Epoch + 1, true
}
