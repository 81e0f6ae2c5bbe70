package mvcc

import "go.etcd.io/etcd/api/v3/mvccpb"

// writeTxn collects the changes of one write. All its changes share the main
// revision s.rev+1; they are visible to reads inside the same write at once,
// and become the store's revision, the log's records and watch events on
// commit. The caller holds s.mu for the whole life of a writeTxn.
type writeTxn struct {
	s       *Store
	rev     int64
	sub     int64
	changes []changeRecord
}

// beginWrite starts a write.
func (s *Store) beginWrite() *writeTxn {
	return &writeTxn{s: s, rev: s.rev + 1}
}

// readRev is the revision reads inside this write see: its own changes
// included.
func (w *writeTxn) readRev() int64 {
	if len(w.changes) > 0 {
		return w.rev
	}
	return w.s.rev
}

// put stores value under key with the given lease (0 = none) and returns the
// previous value, or nil.
func (w *writeTxn) put(key, value []byte, leaseID int64) (prev *mvccpb.KeyValue) {
	s := w.s
	probe := &keyIndex{key: string(key)}
	ki, ok := s.tree.Get(probe)
	if !ok {
		ki = probe
		s.tree.ReplaceOrInsert(ki)
	}
	prev = ki.latest()
	kv := &mvccpb.KeyValue{
		Key:            ki.keyBytes(key),
		Value:          value,
		CreateRevision: w.rev,
		ModRevision:    w.rev,
		Version:        1,
		Lease:          leaseID,
	}
	if prev != nil {
		kv.CreateRevision = prev.CreateRevision
		kv.Version = prev.Version + 1
		if prev.Lease != 0 && prev.Lease != leaseID {
			s.detachLease(prev.Lease, ki.key)
		}
	}
	if leaseID != 0 {
		s.attachLease(leaseID, ki.key)
	}
	ki.revisions = append(ki.revisions, keyRevision{rev: revision{main: w.rev, sub: w.sub}, kv: kv})
	w.sub++
	s.bytes += int64(len(kv.Key) + len(kv.Value) + revisionOverhead)
	w.changes = append(w.changes, changeRecord{rev: w.rev, typ: mvccpb.PUT, kv: kv, prev: prev})
	return prev
}

// revisionOverhead approximates the bytes a stored revision costs beyond its
// key and value, for Status.db_size.
const revisionOverhead = 64

// deleteRange deletes every live key in r and returns their last values.
func (w *writeTxn) deleteRange(r KeyRange) []*mvccpb.KeyValue {
	s := w.s
	var victims []*keyIndex
	s.ascend(r, func(ki *keyIndex) bool {
		if ki.latest() != nil {
			victims = append(victims, ki)
		}
		return true
	})
	deleted := make([]*mvccpb.KeyValue, 0, len(victims))
	for _, ki := range victims {
		prev := ki.latest()
		if prev.Lease != 0 {
			s.detachLease(prev.Lease, ki.key)
		}
		ki.revisions = append(ki.revisions, keyRevision{rev: revision{main: w.rev, sub: w.sub}})
		w.sub++
		s.bytes += int64(len(prev.Key) + revisionOverhead)
		w.changes = append(w.changes, changeRecord{
			rev:  w.rev,
			typ:  mvccpb.DELETE,
			kv:   &mvccpb.KeyValue{Key: prev.Key, ModRevision: w.rev},
			prev: prev,
		})
		deleted = append(deleted, prev)
	}
	return deleted
}

// commit makes the write's changes the store's newest revision and notifies
// watchers. A write without changes leaves the revision as it is.
func (w *writeTxn) commit() {
	if len(w.changes) == 0 {
		return
	}
	s := w.s
	s.rev = w.rev
	s.changes.Add(1)
	s.log = append(s.log, w.changes...)
	s.notify(w.rev, w.changes)
	if !s.applyOnly {
		s.maybeAutoCompact()
	}
}

// keyBytes returns the key as bytes, sharing the bytes of an earlier revision
// when there is one so that repeated puts do not copy the key.
func (ki *keyIndex) keyBytes(fallback []byte) []byte {
	for i := len(ki.revisions) - 1; i >= 0; i-- {
		if kv := ki.revisions[i].kv; kv != nil {
			return kv.Key
		}
	}
	return fallback
}
