package qlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Open opens the log in cfg.Dir, creating it if need be, recovers it and
// calls replay with every live record, in seq order, before it returns.
// rec is valid only during the call. A replay error ends Open with it.
// replay may be nil.
//
// A damaged segment (a crash in the middle of a write, bytes overwritten)
// is cut at its last intact record: one warning per damaged file names
// it and the bytes dropped, and nothing after the damage in that file is
// read. A segment whose header is damaged is deleted whole.
func Open(cfg Config, replay func(seq uint64, rec []byte) error) (*Log, error) {
	var fn func(uint64, []byte, *Region) error
	if replay != nil {
		fn = func(seq uint64, rec []byte, _ *Region) error { return replay(seq, rec) }
	}
	return open(cfg, fn, false, hooks{})
}

// OpenMapped is Open that replays the records as they lie in the log, as
// AppendMapped returns them: rec is a view into r, the mapping of its
// segment file, valid while r is reachable. Where r is nil (the segment
// could not be mapped, or the record lies past the mapping), rec is
// valid only during the call, as with Open.
func OpenMapped(cfg Config, replay func(seq uint64, rec []byte, r *Region) error) (*Log, error) {
	return open(cfg, replay, true, hooks{})
}

func open(cfg Config, replay func(seq uint64, rec []byte, r *Region) error, mapped bool, h hooks) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if h.openFile == nil {
		h.openFile = openOSFile
	}
	l := &Log{
		cfg:    cfg,
		log:    cfg.Logger,
		hooks:  h,
		wake:   make(chan struct{}, 1),
		enough: make(chan struct{}, 1),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		moved:  make(map[uint64]*segment),
		next:   1,
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("qlog: %w", err)
	}
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("qlog: %w", err)
	}
	var ids []uint64
	for _, e := range ents {
		if id, ok := parseSegName(e.Name()); ok && e.Type().IsRegular() {
			ids = append(ids, id)
		} else if isSpareName(e.Name()) && e.Type().IsRegular() {
			// An earlier log's: it may still map it (a log closed and
			// opened again in one process), so it is not written over.
			if err := os.Remove(filepath.Join(cfg.Dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("qlog: %w", err)
			}
		}
	}
	slices.Sort(ids)
	movedAt := make(map[uint64]int64) // offsets of the moved records, for replay
	changed, damaged := false, false
	for i, id := range ids {
		c, err := l.load(id, movedAt, damaged, i == len(ids)-1)
		if err != nil {
			return nil, err
		}
		changed, damaged = changed || c, c
	}
	if changed && !cfg.NoSync {
		if err := syncDir(cfg.Dir); err != nil {
			return nil, fmt.Errorf("qlog: %w", err)
		}
	}
	if replay != nil {
		if err := l.replay(movedAt, mapped, replay); err != nil {
			return nil, err
		}
	}
	if err := l.openHead(ids); err != nil {
		return nil, err
	}
	if !cfg.NoIOUring {
		r, err := newRing()
		if err != nil {
			l.log.Info("qlog: no io_uring; the writer makes its system calls itself", "err", err)
		}
		l.w.ring = r
	}
	go l.run()
	return l, nil
}

// load reads segment id and adds it to the log's state, cutting it at the
// first damaged record, or deleting it when its header is damaged. It
// reports whether it changed the file. afterDamage says that the segment
// before was cut or deleted, and warned of: records missing between it
// and this one are that damage's. newest says that no segment follows:
// the head, which may end before its file does.
func (l *Log) load(id uint64, movedAt map[uint64]int64, afterDamage, newest bool) (changed bool, err error) {
	seg := newSegment(l.cfg.Dir, id, 0)
	seg.made = false
	fi, err := os.Stat(seg.path)
	if err != nil {
		return false, fmt.Errorf("qlog: %w", err)
	}
	f, err := l.hooks.openFile(seg.path, os.O_RDWR)
	if err != nil {
		return false, fmt.Errorf("qlog: %w", err)
	}
	defer f.Close()
	end := fi.Size()

	var hdr [headerSize]byte
	n, err := f.ReadAt(hdr[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		// Not damage: deleting the segment for it would lose records
		// the disk still holds.
		return false, fmt.Errorf("qlog: reading %s: %w", seg.path, err)
	}
	h, herr := parseHeader(hdr[:n])
	if verr := (versionError{}); errors.As(herr, &verr) {
		// Not damage either: a later chute's log, which this one must
		// not cut or delete.
		return false, fmt.Errorf("qlog: %s: %w", seg.path, herr)
	}
	if herr == nil && h.size == headerSize && h.salt != uint32(id) {
		// Written for another segment over this one's file, a spare,
		// whose renaming a crash lost: the file was made a spare once
		// none of its records was live, and the other segment took
		// records only once both renamings were durable.
		l.log.Info("qlog: deleted a spare file left under a segment's name", "file", seg.path, "salt", h.salt)
		if err := os.Remove(seg.path); err != nil {
			return false, fmt.Errorf("qlog: %w", err)
		}
		return true, nil
	}
	base := h.base
	if herr == nil && base < l.next {
		herr = fmt.Errorf("first seq %d is below the %d the segment before ends at", base, l.next)
	}
	if herr != nil {
		l.log.Warn("qlog: deleted a damaged segment", "file", seg.path, "dropped_bytes", end, "reason", herr.Error())
		if err := os.Remove(seg.path); err != nil {
			return false, fmt.Errorf("qlog: %w", err)
		}
		return true, nil
	}
	if base > l.next && len(l.segs) > 0 && !afterDamage {
		// Only the oldest segment is deleted: a gap between two that
		// are here is a file gone (fsck's lost+found, an operator), and
		// its records with it.
		l.log.Warn("qlog: records missing before a segment (a segment file gone, or one cut at an earlier start)", "file", seg.path, "first_missing_seq", l.next, "missing", base-l.next)
	}
	seg.base, seg.hdr, seg.salt, seg.reused = base, h.size, h.salt, h.reused
	l.segs = append(l.segs, seg) // releases may name its own records
	sc := newScanner(f, seg.salt, seg.hdr, end)
	for {
		off := sc.off
		fr, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = l.apply(seg, fr, off, movedAt)
		}
		if rerr := (readError{}); errors.As(err, &rerr) {
			// Not damage either: fail the open and cut nothing.
			return false, fmt.Errorf("qlog: reading %s at offset %d: %w", seg.path, off, rerr.err)
		}
		if err != nil && zeros(f, off, end) {
			// Written ahead of the records (Config.PreallocBytes), by a
			// log that did not close.
			if err := f.Truncate(off); err != nil {
				return false, fmt.Errorf("qlog: cut the zeros of %s: %w", seg.path, err)
			}
			end = off
			break
		}
		if err != nil && seg.reused && newest {
			// The head, written over an older segment's file, ends at
			// its last frame: what follows is that segment's, or a
			// write a crash interrupted.
			l.log.Info("qlog: the head segment's records end before its file does; cut there", "file", seg.path, "offset", off, "dropped_bytes", end-off)
			if err := f.Truncate(off); err != nil {
				return false, fmt.Errorf("qlog: cut %s: %w", seg.path, err)
			}
			end = off
			break
		}
		if err != nil {
			l.log.Warn("qlog: cut a damaged segment", "file", seg.path, "offset", off, "dropped_bytes", end-off, "reason", err.Error())
			if err := f.Truncate(off); err != nil {
				return false, fmt.Errorf("qlog: cut %s: %w", seg.path, err)
			}
			if !l.cfg.NoSync {
				if err := f.Sync(); err != nil {
					return false, fmt.Errorf("qlog: cut %s: %w", seg.path, err)
				}
			}
			end, changed = off, true
			break
		}
	}
	if !l.cfg.NoSync {
		// What a process killed before its fsync wrote is read here from
		// the page cache, and counted on: a moved copy clears its
		// original, whose segment is then deleted. A machine crash
		// after that would lose both.
		if err := f.Sync(); err != nil {
			return false, fmt.Errorf("qlog: sync %s: %w", seg.path, err)
		}
	}
	seg.size = end
	l.size += end
	l.next = seg.base + seg.n
	return changed, nil
}

// zeros reports whether f holds only zero bytes from off to end.
func zeros(f io.ReaderAt, off, end int64) bool {
	buf := make([]byte, min(end-off, 64<<10))
	for off < end {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		for _, c := range buf[:n] {
			if c != 0 {
				return false
			}
		}
		if err != nil && n == 0 {
			return false
		}
		off += int64(n)
	}
	return true
}

// apply adds frame fr, at offset off of seg, to the log's state. It
// fails, touching nothing, on a frame that cannot have been written.
func (l *Log) apply(seg *segment, fr frame, off int64, movedAt map[uint64]int64) error {
	switch fr.typ {
	case typeData:
		seg.addData(fr.size)
	case typeMoved:
		// A moved record is older than the segment it was moved to.
		if fr.seq >= seg.base {
			return fmt.Errorf("moved record %d is not older than its segment", fr.seq)
		}
		if s, ok := l.moved[fr.seq]; ok {
			s.live-- // moved again: this copy supersedes that one
		} else if o := l.owner(fr.seq); o != nil && o.isLive(fr.seq) {
			o.clear(fr.seq) // its segment was not yet deleted
		}
		l.moved[fr.seq] = seg
		movedAt[fr.seq] = off
		seg.live++
		seg.recs++
		seg.recBytes += int64(fr.size)
	case typeRelease:
		var seqs []uint64
		limit := seg.base + seg.n
		if err := parseReleases(fr.body, limit, func(s uint64) { seqs = append(seqs, s) }); err != nil {
			return err
		}
		for _, s := range seqs {
			if l.forget(s) {
				delete(movedAt, s)
			}
		}
	}
	return nil
}

// replay calls fn with every live record in seq order: the data records
// of each segment in order, and the moved ones (older than the segment
// holding them) merged in by seq. When mapped, it maps the segments it
// reads and hands out views of them, as OpenMapped says.
func (l *Log) replay(movedAt map[uint64]int64, mapped bool, fn func(seq uint64, rec []byte, r *Region) error) error {
	type at struct {
		seq uint64
		seg *segment
		off int64
	}
	var moved []at
	for seq, seg := range l.moved {
		moved = append(moved, at{seq, seg, movedAt[seq]})
	}
	slices.SortFunc(moved, func(a, b at) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	files := make(map[*segment]segFile)
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	file := func(s *segment) (segFile, error) {
		if f, ok := files[s]; ok {
			return f, nil
		}
		f, err := l.hooks.openFile(s.path, os.O_RDONLY)
		if err != nil {
			return nil, fmt.Errorf("qlog: replay: %w", err)
		}
		files[s] = f
		if mapped && s.region == nil {
			if s == l.segs[len(l.segs)-1] {
				l.mapHead(s) // it becomes the head
			} else {
				l.mapSegment(s, s.size)
			}
		}
		return f, nil
	}
	// emit calls fn with the record whose body fr has, read at offset
	// body of s: a view when mapped.
	emit := func(seq uint64, s *segment, fr frame, body int64) error {
		if mapped {
			if v := s.region.view(body, len(fr.body)); v != nil {
				return fn(seq, v, s.region)
			}
		}
		return fn(seq, fr.body, nil)
	}
	var scratch []byte
	// emitMoved replays the moved records below seq.
	emitMoved := func(seq uint64) error {
		for len(moved) > 0 && moved[0].seq < seq {
			m := moved[0]
			moved = moved[1:]
			f, err := file(m.seg)
			if err != nil {
				return err
			}
			sc := newScanner(f, m.seg.salt, m.off, m.seg.size)
			fr, err := sc.next()
			if err != nil || fr.typ != typeMoved || fr.seq != m.seq {
				return fmt.Errorf("qlog: replay: %s changed since it was read at offset %d", m.seg.path, m.off)
			}
			if v := m.seg.region.view(m.off+frameSize+1+8, len(fr.body)); mapped && v != nil {
				if err := fn(m.seq, v, m.seg.region); err != nil {
					return err
				}
				continue
			}
			scratch = append(scratch[:0], fr.body...)
			if err := fn(m.seq, scratch, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for _, seg := range l.segs {
		if !slices.ContainsFunc(seg.bits, func(w uint64) bool { return w != 0 }) {
			continue
		}
		f, err := file(seg)
		if err != nil {
			return err
		}
		sc := newScanner(f, seg.salt, seg.hdr, seg.size)
		seq := seg.base
		for seq < seg.base+seg.n {
			off := sc.off
			fr, err := sc.next()
			if err != nil {
				return fmt.Errorf("qlog: replay: %s changed since it was read: %w", seg.path, err)
			}
			if fr.typ != typeData {
				continue
			}
			if seg.isLive(seq) {
				if err := emitMoved(seq); err != nil {
					return err
				}
				if err := emit(seq, seg, fr, off+frameSize+1); err != nil {
					return err
				}
			}
			seq++
		}
	}
	return emitMoved(^uint64(0))
}

// openHead makes the last segment the head, or creates the first.
func (l *Log) openHead(ids []uint64) error {
	w := &l.w
	if n := len(l.segs); n > 0 {
		seg := l.segs[n-1]
		f, err := l.hooks.openFile(seg.path, os.O_RDWR)
		if err != nil {
			return fmt.Errorf("qlog: %w", err)
		}
		l.mapHead(seg)
		w.head, w.f, w.synced, w.zeroed = seg, f, seg.size, seg.size
		return nil
	}
	id := uint64(1)
	if len(ids) > 0 {
		id = ids[len(ids)-1] + 1 // never reuse a damaged segment's name
	}
	seg := newSegment(l.cfg.Dir, id, l.next)
	f, fileSize, err := l.newHead(seg)
	if err != nil {
		return err
	}
	l.mapHead(seg)
	w.head, w.f, w.synced, w.zeroed = seg, f, seg.size, fileSize
	l.segs = append(l.segs, seg)
	l.size += seg.size
	return nil
}

// mapHead maps the head segment seg, with room for it to grow by twice
// the segment size, unless replay mapped it already. A segment that
// cannot be mapped hands out no mapped records, with one warning.
func (l *Log) mapHead(seg *segment) {
	if seg.region != nil && int64(len(seg.region.mem)) > seg.size {
		return
	}
	l.mapSegment(seg, seg.size+2*l.cfg.SegmentBytes)
}

// mapSegment maps size bytes of seg's file.
func (l *Log) mapSegment(seg *segment, size int64) {
	r, err := mapRegion(seg.path, size)
	if err != nil {
		l.log.Warn("qlog: cannot map a segment; its records are copied instead", "file", seg.path, "err", err)
	}
	seg.region = r
}
