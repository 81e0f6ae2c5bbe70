package qlog

import (
	"errors"
	"io/fs"
)

// maintain deletes the oldest segments while none of their records is
// live (keeping their files as spares, up to maxSpares), then starts a
// compaction when one is due.
//
// Only the oldest segment is ever deleted. A release record releases a
// record written before it, so the release records of the oldest segment
// concern only records of that segment, and deleting it never brings a
// released record back. The directory is fsynced after each deletion, so
// that a crash cannot keep a later segment's deletion and lose an earlier
// one's.
func (l *Log) maintain() {
	w := &l.w
	for {
		l.mu.Lock()
		if len(l.segs) < 2 || l.segs[0].live > 0 {
			l.mu.Unlock()
			break
		}
		s := l.segs[0]
		l.mu.Unlock()
		if c := w.compact; c != nil && c.seg == s {
			c.eof = true
			w.endCompaction()
		}
		spared, err := l.retire(s)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("qlog: cannot delete a released segment", "file", s.path, "err", err)
			break
		}
		if !l.cfg.NoSync {
			if err := syncDir(l.cfg.Dir); err != nil {
				l.log.Warn("qlog: cannot fsync the log's directory", "dir", l.cfg.Dir, "err", err)
			}
		}
		if s.region != nil {
			s.region.deleted.Store(true)
		}
		l.mu.Lock()
		// Cleared first: the slice's array, which keeps the place,
		// would keep the segment and its Region reachable, and with it
		// the deleted file's mapping and disk space, until an append
		// moves the array.
		l.segs[0] = nil
		l.segs = l.segs[1:]
		l.size -= s.size
		if spared {
			l.spareBytes += s.size
		}
		l.stats.Deleted++
		l.mu.Unlock()
	}
	l.startCompaction()
}
