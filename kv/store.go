package kv

import (
	"bytes"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// storeConfig holds the store's identity and limits; see Config for their
// meaning.
type storeConfig struct {
	clusterID        uint64
	memberID         uint64
	raftTerm         uint64
	maxTxnOps        int
	maxKeyBytes      int
	maxRequestBytes  int
	historyRevisions int64
	minLeaseTTL      int64
	now              func() time.Time
}

// store is the in-memory MVCC key space of one node: every write gets the
// next revision, every key keeps its revisions until compaction, and the log
// of changes since the compaction revision feeds watches that start in the
// past or fell behind.
//
// One lock, mu, guards the whole state: the key tree, the revision counters,
// the change log, the leases and the watcher registry (including each
// watcher's minRev and synced flag). Watchers are notified while the write
// still holds mu, so every watcher sees changes in revision order; a
// notification never blocks (see watch.go).
type store struct {
	cfg storeConfig

	mu         sync.RWMutex
	tree       *btree.BTreeG[*keyIndex]
	rev        int64          // revision of the newest write; 0 before the first
	compactRev int64          // revisions below it are gone; 0 before any compaction
	log        []changeRecord // changes with main revision >= compactRev, in order
	bytes      int64          // approximate bytes held by all revisions
	leases     map[int64]*lease
	synced     map[*watcher]struct{} // watchers up to date: fed by writes
	unsynced   map[*watcher]struct{} // watchers behind: fed by syncWatchers
	nextLease  int64                 // last lease id chosen by chooseLeaseID

	memberSalt int64 // high bits of generated lease ids; set at creation

	syncKick chan struct{} // asks the watch sync loop for a pass

	// applyOnly: writes are commands a consensus ordered (SetConsensus):
	// compaction only when the leader proposes it.
	applyOnly bool
	term      atomic.Uint64 // raft term of the last command applied; headers carry it
}

// changeRecord is one change in the log: the event with its previous value
// always filled in (it is stripped for watchers that did not ask for it).
type changeRecord struct {
	rev   int64
	event *mvccpb.Event
}

func newStore(cfg storeConfig) *store {
	if cfg.now == nil {
		cfg.now = time.Now
	}
	st := &store{
		cfg: cfg,
		tree: btree.NewG(32, func(a, b *keyIndex) bool {
			return a.key < b.key
		}),
		leases:     make(map[int64]*lease),
		synced:     make(map[*watcher]struct{}),
		unsynced:   make(map[*watcher]struct{}),
		memberSalt: int64(cfg.memberID & (1<<23 - 1)),
		syncKick:   make(chan struct{}, 1),
		rev:        1,
		nextLease:  cfg.now().UnixMilli() & (1<<40 - 1),
	}
	st.term.Store(cfg.raftTerm)
	return st
}

// header returns a response header at revision rev.
func (s *store) header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{
		ClusterId: s.cfg.clusterID,
		MemberId:  s.cfg.memberID,
		Revision:  rev,
		RaftTerm:  s.term.Load(),
	}
}

// currentRev returns the revision of the newest write.
func (s *store) currentRev() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// keyRange is a key selection as etcd requests spell it: end empty means the
// single key; end "\x00" means every key >= key; otherwise [key, end).
type keyRange struct {
	key, end []byte
}

func (r keyRange) single() bool { return len(r.end) == 0 }

func (r keyRange) fromKey() bool { return len(r.end) == 1 && r.end[0] == 0 }

// contains reports whether k is selected.
func (r keyRange) contains(k []byte) bool {
	switch {
	case r.single():
		return bytes.Equal(k, r.key)
	case r.fromKey():
		return bytes.Compare(k, r.key) >= 0
	default:
		return bytes.Compare(k, r.key) >= 0 && bytes.Compare(k, r.end) < 0
	}
}

// ascend calls fn for every key index in r in key order until fn returns false.
// The caller holds mu.
func (s *store) ascend(r keyRange, fn func(*keyIndex) bool) {
	if r.single() {
		if ki, ok := s.tree.Get(&keyIndex{key: string(r.key)}); ok {
			fn(ki)
		}
		return
	}
	s.tree.AscendGreaterOrEqual(&keyIndex{key: string(r.key)}, func(ki *keyIndex) bool {
		if !r.fromKey() && ki.key >= string(r.end) {
			return false
		}
		return fn(ki)
	})
}

// checkRev validates a read revision (0 = current) and returns the revision to
// read at. The caller holds mu.
func (s *store) checkRev(rev int64) (int64, error) {
	if rev <= 0 {
		return s.rev, nil
	}
	if rev > s.rev {
		return 0, ErrFutureRev
	}
	if rev < s.compactRev {
		return 0, ErrCompacted
	}
	return rev, nil
}

// rangeResult is what a range read found.
type rangeResult struct {
	kvs   []*mvccpb.KeyValue // the stored values; never mutate them
	count int64              // every key that matched, before limit
}

// rangeLocked reads the keys of r as of revision at, which the caller has
// validated. With limit > 0 at most limit values are returned; count still
// counts every match. countOnly returns no values. The caller holds mu.
func (s *store) rangeLocked(r keyRange, at, limit int64, countOnly bool) rangeResult {
	var res rangeResult
	s.ascend(r, func(ki *keyIndex) bool {
		kv := ki.at(at)
		if kv == nil {
			return true
		}
		res.count++
		if !countOnly && (limit <= 0 || int64(len(res.kvs)) < limit) {
			res.kvs = append(res.kvs, kv)
		}
		return true
	})
	return res
}

// get returns the current value of key, or nil. The caller holds mu.
func (s *store) get(key []byte) *mvccpb.KeyValue { return s.getString(string(key)) }

// getString is get for a key held as a string (dispatch reads records and
// settings at every put), without converting it twice.
func (s *store) getString(key string) *mvccpb.KeyValue {
	ki, ok := s.tree.Get(&keyIndex{key: key})
	if !ok {
		return nil
	}
	return ki.latest()
}

// sortKVs orders kvs as a RangeRequest asks.
func sortKVs(kvs []*mvccpb.KeyValue, target sortTarget, descend bool) {
	less := func(a, b *mvccpb.KeyValue) int {
		switch target {
		case sortByVersion:
			return cmpInt64(a.Version, b.Version)
		case sortByCreate:
			return cmpInt64(a.CreateRevision, b.CreateRevision)
		case sortByMod:
			return cmpInt64(a.ModRevision, b.ModRevision)
		case sortByValue:
			return bytes.Compare(a.Value, b.Value)
		default:
			return bytes.Compare(a.Key, b.Key)
		}
	}
	sort.SliceStable(kvs, func(i, j int) bool {
		c := less(kvs[i], kvs[j])
		if descend {
			return c > 0
		}
		return c < 0
	})
}

type sortTarget int

const (
	sortByKey sortTarget = iota
	sortByVersion
	sortByCreate
	sortByMod
	sortByValue
)

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
