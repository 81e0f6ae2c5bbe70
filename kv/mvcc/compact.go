package mvcc

import (
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// compact discards history below rev: reads and watches that start before
// it get ErrCompacted afterwards. It returns ErrFutureRev for a revision
// not yet written and ErrCompacted for one at or below the last compaction.
func (s *Store) compact(rev int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compactLocked(rev)
}

func (s *Store) compactLocked(rev int64) error {
	if rev > s.rev {
		return ErrFutureRev
	}
	if rev <= s.compactRev {
		return ErrCompacted
	}
	s.compactRev = rev

	var empty []*keyIndex
	s.tree.Ascend(func(ki *keyIndex) bool {
		dropped, gone := ki.compact(rev)
		s.bytes -= dropped
		if gone {
			empty = append(empty, ki)
		}
		return true
	})
	for _, ki := range empty {
		s.tree.Delete(ki)
	}
	// Keep the log records at rev and after: a watch may start at rev.
	// The deletes at rev go, as their tombstones did (keyIndex.compact):
	// etcd's compaction removes them from its backend, and a member
	// restored from a snapshot rebuilds its log from the revisions kept,
	// so a watch from rev sees no DELETE at rev on any member.
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev >= rev })
	n := 0
	for _, r := range s.log[i:] {
		if r.rev == rev && r.typ == mvccpb.DELETE {
			continue
		}
		s.log[n] = r
		n++
	}
	clear(s.log[n:])
	s.log = s.log[:n]
	if cap(s.log) > 4*len(s.log)+1024 {
		s.log = append([]changeRecord(nil), s.log...)
	}
	// The previous values of the changes at rev were compacted away, as
	// in etcd, whose watch finds no prev_kv below the compaction: a
	// member restored from a snapshot has none either. (Events on their
	// way to watchers are made of a record, not shared with it.)
	for i := 0; i < len(s.log) && s.log[i].rev == rev; i++ {
		s.log[i].prev = nil
	}
	// Watchers behind the compaction learn it at their next sync.
	for w := range s.unsynced {
		if w.minRev < rev {
			s.kickSync()
			break
		}
	}
	return nil
}

// maybeAutoCompact compacts when the history holds twice the configured
// number of revisions, down to that number. The caller holds mu.
func (s *Store) maybeAutoCompact() {
	if rev, due := s.compactionDueLocked(); due {
		_ = s.compactLocked(rev)
	}
}

// CompactionDue reports whether the history holds twice
// Config.HistoryRevisions revisions, and the revision to compact to,
// keeping that many: the rule writes follow by themselves, for the leader
// to propose when a consensus orders the compactions.
func (s *Store) CompactionDue() (rev int64, due bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.compactionDueLocked()
}

func (s *Store) compactionDueLocked() (int64, bool) {
	keep := s.cfg.HistoryRevisions
	if keep <= 0 || s.rev-s.compactRev < 2*keep {
		return 0, false
	}
	return s.rev - keep, true
}
