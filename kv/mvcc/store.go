package mvcc

import (
	"bytes"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Config holds the store's identity and its history limit.
type Config struct {
	// ClusterID and MemberID fill every response header. MemberID also
	// gives lease ids chosen here their high bits.
	ClusterID uint64
	MemberID  uint64
	// RaftTerm is the term headers carry until a command is applied.
	RaftTerm uint64
	// HistoryRevisions is how many revisions of history are kept at
	// least: once twice as many have accumulated the store compacts
	// down to this many (CompactionDue). Zero: never automatically.
	HistoryRevisions int64
	// Now is the store's clock, for lease deadlines. Nil: time.Now.
	Now func() time.Time
}

// Store is the in-memory MVCC key space of one node: every write gets the
// next revision, every key keeps its revisions until compaction, and the log
// of changes since the compaction revision feeds watches that start in the
// past or fell behind.
//
// One lock, mu, guards the whole state: the key tree, the revision counters,
// the change log, the leases, the alarms and the watcher registry
// (including each watcher's minRev and synced flag). Watchers are notified while the write
// still holds mu, so every watcher sees changes in revision order; a
// notification never blocks (see watch.go).
type Store struct {
	cfg Config

	mu         sync.RWMutex
	tree       *btree.BTreeG[*keyIndex]
	rev        int64          // revision of the newest write; 0 before the first
	compactRev int64          // revisions below it are gone; 0 before any compaction
	log        []changeRecord // changes with main revision >= compactRev, in order
	bytes      int64          // approximate bytes held by all revisions
	leases     map[int64]*lease
	synced     watcherGroup          // watchers up to date: fed by writes
	notifyPass uint64                // numbers notify's calls (watcherGroup.forChanges)
	unsynced   map[*Watcher]struct{} // watchers behind: fed by syncWatchers
	nextLease  int64                 // last lease id chosen by ChooseLeaseID
	alarms     map[alarmKey]struct{} // raised alarms (alarm.go)
	noSpace    atomic.Bool           // a NOSPACE alarm is in alarms; written with mu held

	memberSalt int64 // high bits of generated lease ids; set at creation

	syncKick chan struct{} // asks the watch sync loop for a pass

	// applyOnly: writes are commands a consensus ordered
	// (DisableAutoCompaction): compaction only when the leader proposes it.
	applyOnly bool
	term      atomic.Uint64 // raft term of the last command applied; headers carry it

	// changes counts the writes that changed something and the
	// restores, each added with mu held once its change is made:
	// values read after Changes returned n are at least that new, and
	// stay current while it returns n.
	changes atomic.Uint64
}

// changeRecord is one change in the log: what its event holds, the
// previous value always filled in until compaction drops it (it is
// stripped for watchers that did not ask for it). The event itself is
// made only for watchers (event): the log holds every change since the
// compaction, and an Event of its own cost each 64 bytes more.
type changeRecord struct {
	rev  int64
	typ  mvccpb.Event_EventType
	kv   *mvccpb.KeyValue // a tombstone's: its key and revision only
	prev *mvccpb.KeyValue
}

// event returns the change as a watch event, with its previous value if
// withPrev.
func (r *changeRecord) event(withPrev bool) *mvccpb.Event {
	ev := &mvccpb.Event{Type: r.typ, Kv: r.kv}
	if withPrev {
		ev.PrevKv = r.prev
	}
	return ev
}

// NewStore returns an empty store at revision 1.
func NewStore(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	st := &Store{
		cfg: cfg,
		tree: btree.NewG(32, func(a, b *keyIndex) bool {
			return a.key < b.key
		}),
		leases:     make(map[int64]*lease),
		alarms:     make(map[alarmKey]struct{}),
		synced:     newWatcherGroup(),
		unsynced:   make(map[*Watcher]struct{}),
		memberSalt: int64(cfg.MemberID & (1<<23 - 1)),
		syncKick:   make(chan struct{}, 1),
		rev:        1,
		nextLease:  cfg.Now().UnixMilli() & (1<<40 - 1),
	}
	st.term.Store(cfg.RaftTerm)
	return st
}

// DisableAutoCompaction stops writes from compacting the store: with a
// consensus the leader proposes compactions (CompactionDue), so that every
// member compacts at the same revision. Call it before the first write.
func (s *Store) DisableAutoCompaction() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyOnly = true
}

// Header returns a response header at revision rev.
func (s *Store) Header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{
		ClusterId: s.cfg.ClusterID,
		MemberId:  s.cfg.MemberID,
		Revision:  rev,
		RaftTerm:  s.term.Load(),
	}
}

// Rev returns the revision of the newest write.
func (s *Store) Rev() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// KeyRange is a key selection as etcd requests spell it: End empty means
// the single key Key; End "\x00" means every key >= Key; otherwise
// [Key, End).
type KeyRange struct {
	Key, End []byte
}

// Single reports whether r selects the one key Key.
func (r KeyRange) Single() bool { return len(r.End) == 0 }

// FromKey reports whether r selects every key from Key on.
func (r KeyRange) FromKey() bool { return len(r.End) == 1 && r.End[0] == 0 }

// Contains reports whether k is selected.
func (r KeyRange) Contains(k []byte) bool {
	switch {
	case r.Single():
		return bytes.Equal(k, r.Key)
	case r.FromKey():
		return bytes.Compare(k, r.Key) >= 0
	default:
		return bytes.Compare(k, r.Key) >= 0 && bytes.Compare(k, r.End) < 0
	}
}

// ascend calls fn for every key index in r in key order until fn returns false.
// The caller holds mu.
func (s *Store) ascend(r KeyRange, fn func(*keyIndex) bool) {
	if r.Single() {
		if ki, ok := s.tree.Get(&keyIndex{key: string(r.Key)}); ok {
			fn(ki)
		}
		return
	}
	s.tree.AscendGreaterOrEqual(&keyIndex{key: string(r.Key)}, func(ki *keyIndex) bool {
		if !r.FromKey() && ki.key >= string(r.End) {
			return false
		}
		return fn(ki)
	})
}

// checkRev validates a read revision (0 = current) and returns the revision to
// read at. The caller holds mu.
func (s *Store) checkRev(rev int64) (int64, error) {
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
func (s *Store) rangeLocked(r KeyRange, at, limit int64, countOnly bool) rangeResult {
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
func (s *Store) get(key []byte) *mvccpb.KeyValue { return s.getString(string(key)) }

// getString is get for a key held as a string (dispatch reads records and
// settings at every put), without converting it twice.
func (s *Store) getString(key string) *mvccpb.KeyValue {
	ki, ok := s.tree.Get(&keyIndex{key: key})
	if !ok {
		return nil
	}
	return ki.latest()
}

// Changes returns a count that grows with every write that changes a
// key and every Restore: a reader may keep what it read after it
// returned n while it still returns n. It takes no lock.
func (s *Store) Changes() uint64 { return s.changes.Load() }

// Value returns the current value of key, or nil when it does not exist.
// The slice is the store's: never modify it.
func (s *Store) Value(key string) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if kv := s.getString(key); kv != nil {
		return kv.Value
	}
	return nil
}

// PrefixEnd is the range end of the keys starting with prefix, as
// clientv3's WithPrefix makes it: prefix with its last byte below 0xff
// incremented and what follows it cut; "\x00" (every key from prefix
// on) when every byte is 0xff.
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0xff {
			return append(bytes.Clone(prefix[:i]), prefix[i]+1)
		}
	}
	return []byte{0}
}

// Prefix returns the current values of every key starting with prefix.
// The values are the store's: never modify them.
func (s *Store) Prefix(prefix string) map[string][]byte {
	end := PrefixEnd([]byte(prefix))
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string][]byte)
	s.ascend(KeyRange{Key: []byte(prefix), End: end}, func(ki *keyIndex) bool {
		if kv := ki.latest(); kv != nil && strings.HasPrefix(ki.key, prefix) {
			out[ki.key] = kv.Value
		}
		return true
	})
	return out
}

// Page calls fn with the current value of each key from from (included)
// to end (excluded; not empty), in key order, at most limit of them, under the
// store's read lock: fn must not call the store, nor keep value, which is
// the store's. A caller reading a long range pages through it, so that
// writes are not held up for the whole of it.
func (s *Store) Page(from, end []byte, limit int, fn func(key string, value []byte)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	s.ascend(KeyRange{Key: from, End: end}, func(ki *keyIndex) bool {
		if n >= limit {
			return false
		}
		if kv := ki.latest(); kv != nil {
			fn(ki.key, kv.Value)
			n++
		}
		return true
	})
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
