package qlog

import (
	"errors"
	"io"
	"os"
)

// compaction is the rewriting of the oldest segment's live records at the
// head, a chunk per batch, so that the segment can be deleted.
type compaction struct {
	seg   *segment
	f     segFile
	sc    *scanner
	idx   uint64 // data records read so far: the next one's seq is seg.base+idx
	eof   bool   // every record read: the compaction ends after this batch
	arena []byte // the records of the chunk read
	cands []move
}

// move is a record copied to the head by compaction: live, its transfer
// to the head waits for the copy to be durable.
type move struct {
	seq        uint64
	start, end int // its bytes in compaction.arena
	size       int // its frame at the head
}

// moveChunk is the most a batch copies for compaction: small enough not
// to hold appends up long.
func (l *Log) moveChunk() int { return int(min(1<<20, l.cfg.SegmentBytes/4)) }

// liveIn reports whether record seq is live in seg. l.mu is held.
func (l *Log) liveIn(seq uint64, seg *segment) bool {
	if s, ok := l.moved[seq]; ok {
		return s == seg
	}
	return seg.owns(seq) && seg.isLive(seq)
}

// pickMoves reads the compacted segment on until about limit bytes of
// records are read, and appends moved frames for the live ones to buf.
func (l *Log) pickMoves(buf []byte, limit int) ([]byte, []move) {
	c := l.w.compact
	c.arena, c.cands = c.arena[:0], c.cands[:0]
	for read := 0; read < limit; {
		f, err := c.sc.next()
		if errors.Is(err, io.EOF) {
			c.eof = true
			break
		}
		if err != nil {
			// The segment was intact when written or scanned at Open: it
			// rotted since. Its records past here cannot be moved, so it
			// stays until they are all released.
			l.log.Warn("qlog: compaction stopped at a damaged record", "file", c.seg.path, "offset", c.sc.off, "err", err)
			c.seg.stuck = true
			c.eof = true
			break
		}
		var seq uint64
		switch f.typ {
		case typeData:
			seq = c.seg.base + c.idx
			c.idx++
		case typeMoved:
			seq = f.seq
		default:
			continue
		}
		start := len(c.arena)
		c.arena = append(c.arena, f.body...)
		m := move{seq: seq, start: start, end: len(c.arena), size: frameSize + 9 + len(f.body)}
		c.cands = append(c.cands, m)
		read += m.size
	}
	var moves []move
	l.mu.Lock()
	for _, m := range c.cands {
		if l.liveIn(m.seq, c.seg) {
			buf = appendMoved(buf, l.w.head.salt, m.seq, c.arena[m.start:m.end])
			moves = append(moves, m)
		}
	}
	l.mu.Unlock()
	return buf, moves
}

// transfer makes the durable copy at h of moved record m the live one,
// unless m was released meanwhile. l.mu is held.
func (l *Log) transfer(m move, h *segment) {
	src := l.w.compact.seg
	if l.liveIn(m.seq, src) {
		if s, ok := l.moved[m.seq]; ok {
			s.live--
		} else {
			src.clear(m.seq)
		}
		l.moved[m.seq] = h
		h.live++
	}
	h.recs++
	h.recBytes += int64(m.size)
}

// endCompaction ends a compaction that has read its segment to the end.
func (w *writer) endCompaction() {
	c := w.compact
	if c == nil || !c.eof {
		return
	}
	_ = c.f.Close() // read only
	w.compact = nil
}

// abortCompaction ends the compaction at the end of this batch, and
// starts no other until the writer is woken.
func (w *writer) abortCompaction() {
	if w.compact != nil {
		w.compact.eof = true
		w.paused = true
	}
}

// startCompaction starts a compaction of the oldest segment when the log
// holds much more than its live records, or when it nears its quota with
// a segment's worth of released records to reclaim: the ratio alone
// never came due once the live records passed about half the quota, and
// appends were refused for good with half of it reclaimable.
func (l *Log) startCompaction() {
	w := &l.w
	if w.compact != nil || w.paused {
		return
	}
	l.mu.Lock()
	seg := l.segs[0]
	var live int64
	for _, s := range l.segs {
		live += s.liveBytes()
	}
	segBytes, quota := l.cfg.SegmentBytes, l.cfg.QuotaBytes
	byRatio := float64(l.size) > l.cfg.CompactRatio*float64(live)+float64(segBytes)
	byQuota := quota > 0 && l.size+segBytes > quota && l.size-live >= segBytes
	due := len(l.segs) > 1 && !seg.stuck && (byRatio || byQuota)
	l.mu.Unlock()
	if !due {
		return
	}
	f, err := l.hooks.openFile(seg.path, os.O_RDONLY)
	if err != nil {
		l.log.Warn("qlog: cannot open a segment to compact", "file", seg.path, "err", err)
		seg.stuck = true
		return
	}
	w.compact = &compaction{seg: seg, f: f, sc: newScanner(f, seg.salt, seg.hdr, seg.size)}
}
