package qlog

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync/atomic"
)

// A spare is the file of a deleted segment, kept to write a later
// segment over (doc.go, "Reused files"). The writer alone touches them.
type spare struct {
	path string
	size int64
	// ended is the segment's Region.ended: the file may be written over
	// once the mapping ended, when no view of it is left. Nil: it had
	// no mapping.
	ended *atomic.Bool
}

// ready reports whether nothing reads sp any more.
func (sp spare) ready() bool { return sp.ended == nil || sp.ended.Load() }

// maxSpares bounds the spare files: one waits for its mapping to end
// while another is ready.
const maxSpares = 2

// spareExt ends the name of a spare file: the number of the segment it
// held, 16 hex digits. Open deletes the spare files it finds.
const spareExt = ".spare"

// retire takes the file of s, the oldest segment, none of whose records
// is live, out of the log: renamed a spare while there is room for one
// and the log made it, else removed. It reports whether s is a spare.
func (l *Log) retire(s *segment) (bool, error) {
	w := &l.w
	if len(w.spares) >= maxSpares || !s.made {
		return false, os.Remove(s.path)
	}
	path := strings.TrimSuffix(s.path, segExt) + spareExt
	if err := os.Rename(s.path, path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		return false, os.Remove(s.path)
	}
	w.spares = append(w.spares, spare{path: path, size: s.size, ended: s.region.endedFlag()})
	return true, nil
}

// reuse makes a ready spare the file of seg, a new head: it writes seg's
// header over the spare's, with flagReused, and renames it, both
// durable unless NoSync. It returns the file and the bytes it holds, or
// false when no spare is ready or this one failed (with a warning; the
// spare is gone).
func (l *Log) reuse(seg *segment) (segFile, int64, bool) {
	w := &l.w
	i := slices.IndexFunc(w.spares, spare.ready)
	if i < 0 {
		return nil, 0, false
	}
	sp := w.spares[i]
	w.spares = slices.Delete(w.spares, i, i+1)
	l.mu.Lock()
	l.spareBytes -= sp.size
	l.mu.Unlock()
	seg.reused = true
	f, size, err := l.rewrite(sp.path, seg)
	if err != nil {
		seg.reused = false
		l.log.Warn("qlog: cannot write a new segment over a spare file; deleted it", "file", sp.path, "err", err)
		return nil, 0, false
	}
	l.mu.Lock()
	l.stats.Reused++
	l.mu.Unlock()
	return f, size, true
}

// rewrite is reuse's I/O. On error the file is removed, under whichever
// name it has.
func (l *Log) rewrite(path string, seg *segment) (f segFile, size int64, err error) {
	at := path
	defer func() {
		if err != nil {
			if f != nil {
				_ = f.Close()
			}
			_ = os.Remove(at)
		}
	}()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if f, err = l.hooks.openFile(path, os.O_RDWR); err != nil {
		return nil, 0, err
	}
	if err = l.writeHeader(f, seg); err != nil { // seg.reused: flagReused
		return f, 0, err
	}
	if err = os.Rename(path, seg.path); err != nil {
		return f, 0, err
	}
	at = seg.path
	if !l.cfg.NoSync {
		if err = syncDir(l.cfg.Dir); err != nil {
			return f, 0, err
		}
	}
	return f, max(fi.Size(), seg.size), nil
}

// dropSpares removes the spare files, to make room: the disk is full, or
// an append would pass the quota.
func (l *Log) dropSpares() {
	w := &l.w
	for _, sp := range w.spares {
		if err := os.Remove(sp.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("qlog: cannot delete a spare file", "file", sp.path, "err", err)
		}
	}
	w.spares = nil
	l.mu.Lock()
	l.spareBytes = 0
	l.mu.Unlock()
}

// isSpareName reports whether name is a spare file's.
func isSpareName(name string) bool {
	hex, ok := strings.CutSuffix(name, spareExt)
	if !ok || len(hex) != 16 {
		return false
	}
	_, ok = parseSegName(hex + segExt)
	return ok
}

// held returns the bytes of the log's files: its segments and its spare
// files.
func (l *Log) held() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size + l.spareBytes
}
