package mvcc

import "errors"

// Errors of the store and its state machine. kv maps them to etcd's gRPC
// errors, so clients decode them by etcd's text, not by these.
var (
	// ErrCompacted: the revision asked for is below the compaction.
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRev: the revision asked for is not written yet.
	ErrFutureRev = errors.New("mvcc: required revision is a future revision")
	// ErrKeyNotFound: a put that keeps the value or lease of a key
	// (ignore_value, ignore_lease) names a key that does not exist.
	ErrKeyNotFound = errors.New("mvcc: key not found")
	// ErrLeaseNotFound: the lease named does not exist (any more).
	ErrLeaseNotFound = errors.New("mvcc: requested lease not found")
	// ErrLeaseExists: a grant names the id of a lease that exists.
	ErrLeaseExists = errors.New("mvcc: lease already exists")
	// ErrLeaseTTLTooBig: a grant asks for more than MaxLeaseTTL.
	ErrLeaseTTLTooBig = errors.New("mvcc: too large lease TTL")
	// ErrNoSpace: a NOSPACE alarm is raised, and the command would grow
	// the data (alarm.go).
	ErrNoSpace = errors.New("mvcc: database space exceeded")
	// ErrSnapshotCorrupt: Restore was handed something that is not a
	// whole, intact snapshot of a StateMachine.
	ErrSnapshotCorrupt = errors.New("mvcc: snapshot corrupt")
	// ErrResultUnknown: a restored snapshot replaced the state a waiting
	// command would have been applied to, so its result is unknown (it
	// may or may not be in the snapshot).
	ErrResultUnknown = errors.New("mvcc: result unknown: state restored from a snapshot")
)
