package mvcc

import (
	"slices"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// keyIndex is the history of one key: its versions in revision order. A
// tombstone ends a generation (the key was deleted); the next put starts a
// new one with version 1 and a new create revision. revisions is only
// appended to or replaced, never changed in place: a snapshot being
// written reads a slice of it taken under the store's lock.
type keyIndex struct {
	key       string
	revisions []keyRevision
}

// keyRevision is one change to a key. kv is nil for a tombstone; otherwise it
// is the stored value, never mutated after it is created, so it may be handed
// to responses without copying.
type keyRevision struct {
	rev revision
	kv  *mvccpb.KeyValue
}

// at returns the key's value as of revision rev (main), or nil when the key
// did not exist then.
func (ki *keyIndex) at(rev int64) *mvccpb.KeyValue {
	// The first revision with main > rev; the one before it is the answer.
	i := sort.Search(len(ki.revisions), func(i int) bool { return ki.revisions[i].rev.main > rev })
	if i == 0 {
		return nil
	}
	return ki.revisions[i-1].kv
}

// latest returns the key's current value, or nil when it is deleted.
func (ki *keyIndex) latest() *mvccpb.KeyValue {
	if len(ki.revisions) == 0 {
		return nil
	}
	return ki.revisions[len(ki.revisions)-1].kv
}

// compact drops the revisions no read at or after rev can see: every one
// before the newest revision at or below rev, and that one too when it is a
// tombstone. It returns the approximate bytes dropped and whether the key has
// nothing left.
func (ki *keyIndex) compact(rev int64) (dropped int64, empty bool) {
	i := sort.Search(len(ki.revisions), func(i int) bool { return ki.revisions[i].rev.main > rev })
	if i == 0 {
		return 0, false
	}
	keep := i - 1
	if ki.revisions[keep].kv == nil {
		keep++
	}
	for _, r := range ki.revisions[:keep] {
		dropped += int64(len(ki.key) + revisionOverhead)
		if r.kv != nil {
			dropped += int64(len(r.kv.Value))
		}
	}
	if keep > 0 {
		// A new slice, never the old one shifted: a snapshot being
		// written may still read the old (StateMachine.Snapshot).
		ki.revisions = slices.Clone(ki.revisions[keep:])
	}
	return dropped, len(ki.revisions) == 0
}
