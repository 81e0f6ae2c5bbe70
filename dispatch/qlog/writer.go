package qlog

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// maxGather bounds the appends one batch takes.
const maxGather = 1024

// preallocMaxCommit is the commit size, on average, past which the
// writer stops writing zeros ahead of the head (Config.PreallocBytes).
// The zeros save each fsync a fixed cost (the file system's metadata)
// but cost CPU per byte: they are written, then written back to the disk
// before the records overwrite them. On the development machine's
// virtual disk, fsynced 200-byte records from concurrent appenders
// (BenchmarkAppend) cost in CPU µs per record, zeros against none:
// 32 per fsync (6 KB) 5.1 against 8.1, 128 (25 KB) 1.4 against 1.55,
// 256 (51 KB) 1.07 against 0.80, 510 (100 KB) 0.97 against 0.55.
const preallocMaxCommit = 32 << 10

// writer is the state of the writer goroutine, which alone touches it.
type writer struct {
	head *segment
	f    segFile // the head's file
	// ring writes and fsyncs f's appends; nil: the writer's own system
	// calls (Config.NoIOUring, a kernel without it, a test's file).
	ring   *ring
	synced int64 // bytes of the head covered by an fsync
	// zeroed is the bytes of the head's file: its records, then zeros
	// written ahead of them (Config.PreallocBytes).
	zeroed int64
	zeros  []byte // PreallocBytes of zeros, made at the first use
	// zeroFailed: the last write of zeros failed, and was warned of.
	zeroFailed bool
	// commitAvg is the bytes a commit that fsyncs writes, a moving
	// average (each weighs 1/8): zeros are written ahead only while it is
	// at most preallocMaxCommit.
	commitAvg int64

	buf     []byte
	offs    []int64      // commit's, kept for the next
	rel     []uint64     // an empty array for pending releases, kept between commits
	carry   []*appendReq // taken, not yet written: the head was full
	compact *compaction
	// spares are deleted segments' files kept to write new segments
	// over, oldest first.
	spares []spare
	// paused stops compactions from starting after one failed, until an
	// append or a release wakes the writer: on a full disk it would
	// otherwise retry in a loop.
	paused bool
	// written counts the bytes written since the mapped segments' pages
	// were last dropped (dropMappedPages).
	written int64

	closeErr error

	// lastSync is when the write and fsync of the last appends started,
	// and lastShared whether appends of several callers met at it: it
	// covered several, or another came while it ran. pace waits out
	// SyncInterval after one that was shared.
	lastSync   time.Time
	lastShared bool
}

// run is the writer goroutine. Each round takes the appends waiting
// (blocking only when there is nothing else to do), writes them with the
// pending releases and a chunk of compaction in one write, fsyncs once,
// answers, then deletes the segments no longer needed.
func (l *Log) run() {
	defer close(l.done)
	l.maintain()
	for {
		select {
		case <-l.stop:
			l.shutdown()
			return
		default:
		}
		var reqs []*appendReq
		reqs, l.w.carry = l.w.carry, nil
		switch {
		case len(reqs) > 0:
		case l.w.compact == nil:
			select {
			case <-l.stop:
				l.shutdown()
				return
			case <-l.wake:
				// The appends queued now are taken before the wait, as
				// they would have been answered by a running fsync.
				if reqs = l.gather(reqs); len(reqs) > 0 {
					l.pace(records(reqs))
				}
			case <-l.kick:
			}
			l.w.paused = false
		default: // compacting: do not wait
		}
		l.commit(l.gather(reqs))
		l.maintain()
		l.dropMappedPages()
	}
}

// dropEvery is how many bytes the writer writes between two drops of the
// mapped segments' pages.
const dropEvery = 8 << 20

// dropMappedPages takes the pages of every segment's mapping out of the
// process's page tables once dropEvery bytes were written since the
// last time. A caller reading its views (a drainer reading the values it
// inserts) maps their pages again, into its resident memory, where they
// would otherwise stay until the segment's mapping ends: this bounds
// them to about what is read between two drops. The page cache keeps
// the pages, so a read after a drop costs a minor fault.
func (l *Log) dropMappedPages() {
	w := &l.w
	if w.written < dropEvery {
		return
	}
	w.written = 0
	l.mu.Lock()
	segs := slices.Clone(l.segs)
	l.mu.Unlock()
	for _, s := range segs {
		s.region.dropPages()
	}
}

// pace waits, while appends come from several callers at once (the last
// fsync was shared: see writer.lastShared), until SyncInterval has passed
// since the last fsync started (or the log closes), so that the appends
// that come meanwhile share the next. The wait ends early once the
// appends waiting hold SyncBatch records, counting taken, the records of
// those the writer took already. The first append of a round is taken already: it waits
// too, as the others would have waited for a running fsync. Two callers
// that each wait for their append before the next (two members
// forwarding puts, one frame at a time) meet this way at one fsync
// instead of taking turns at one each.
func (l *Log) pace(taken int) {
	w := &l.w
	if l.cfg.NoSync || l.cfg.SyncInterval <= 0 || !w.lastShared {
		return
	}
	wait := l.cfg.SyncInterval - l.cfg.Clock.Since(w.lastSync)
	if wait <= 0 {
		return
	}
	var enough <-chan struct{} // nil: the wait always runs out
	if b := l.cfg.SyncBatch; b > 0 {
		need := b - taken
		l.qmu.Lock()
		if l.queuedRecs >= need {
			l.qmu.Unlock()
			return
		}
		l.paceNeed = need
		l.qmu.Unlock()
		enough = l.enough
		defer func() {
			l.qmu.Lock()
			l.paceNeed = 0
			l.qmu.Unlock()
			select { // sent after the wait ended, or with it
			case <-l.enough:
			default:
			}
		}()
	}
	t := l.cfg.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.Chan():
	case <-enough:
	case <-l.stop:
	}
}

// records counts the records of reqs.
func records(reqs []*appendReq) int {
	n := 0
	for _, r := range reqs {
		n += len(r.recs)
	}
	return n
}

// gather adds the appends queued now to reqs, oldest first, up to
// maxGather and about a segment's bytes. Appends whose Append gave up
// are dropped: nobody waits for them.
func (l *Log) gather(reqs []*appendReq) []*appendReq {
	bytes := 0
	for _, r := range reqs {
		bytes += r.bytes
	}
	l.qmu.Lock()
	defer l.qmu.Unlock()
	i := 0
	for ; i < len(l.queued) && len(reqs) < maxGather && int64(bytes) < l.cfg.SegmentBytes; i++ {
		r := l.queued[i]
		if r.state.Load() == reqAbandoned {
			continue
		}
		reqs = append(reqs, r)
		bytes += r.bytes
	}
	for _, r := range l.queued[:i] {
		l.queuedRecs -= len(r.recs)
	}
	n := copy(l.queued, l.queued[i:])
	clear(l.queued[n:])
	l.queued = l.queued[:n]
	if n > 0 { // left for the next round: it must not wait for a new append
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return reqs
}

// commit writes reqs (those that fit in the head; the others wait in
// carry), a chunk of compaction and the pending releases at the end of
// the head, fsyncs when it wrote records, and answers reqs.
func (l *Log) commit(reqs []*appendReq) {
	w := &l.w
	defer w.endCompaction()
	l.mu.Lock()
	failed, size := l.failed, l.size+l.spareBytes
	l.mu.Unlock()
	if failed != nil {
		w.abortCompaction()
		for _, r := range reqs {
			l.answer(r, 0, failed)
		}
		return
	}

	first := 0
	switch {
	case len(reqs) > 0:
		first = reqs[0].bytes
	case w.compact != nil:
		first = l.moveChunk()
	}
	if first > 0 && w.head.size > w.head.hdr && w.head.size+int64(first) > l.cfg.SegmentBytes {
		if err := l.roll(); err != nil {
			w.abortCompaction()
			for _, r := range reqs {
				l.answer(r, 0, err)
			}
			return
		}
		size = l.held()
	}

	start := w.head.size
	room := l.cfg.SegmentBytes - start
	buf := w.buf[:0]
	var taken []*appendReq
	offs := w.offs[:0] // of the records of the mapped appends taken, in order
	nrec := 0
	maintained := false
	for i, r := range reqs {
		if len(taken) > 0 && int64(len(buf)+r.bytes) > room {
			w.carry = append(w.carry, reqs[i:]...)
			break
		}
		if q := l.cfg.QuotaBytes; q > 0 && size+int64(len(buf)+r.bytes) > q && !maintained {
			// Segments released since the last round (the one a roll
			// just sealed, say) still count: deleted first, they may
			// leave room; so do the spare files.
			l.maintain()
			l.dropSpares()
			size, maintained = l.held(), true
		}
		if q := l.cfg.QuotaBytes; q > 0 && size+int64(len(buf)+r.bytes) > q {
			l.answer(r, 0, fmt.Errorf("%w: the log would pass its quota of %d bytes", ErrNoSpace, q))
			continue
		}
		for _, rec := range r.recs {
			if r.mapped {
				offs = append(offs, start+int64(len(buf))+frameSize+1)
			}
			buf = appendFrame(buf, w.head.salt, typeData, nil, rec)
		}
		taken = append(taken, r)
		nrec += len(r.recs)
	}
	var moves []move
	if w.compact != nil && int64(len(buf)) < room {
		buf, moves = l.pickMoves(buf, int(min(int64(l.moveChunk()), room-int64(len(buf)))))
	}
	// Releases go after the moves: a record released while being moved
	// has its release after its moved copy.
	l.mu.Lock()
	rel := l.pending
	l.pending, w.rel = w.rel, nil // releases meanwhile go to the other array
	l.mu.Unlock()
	buf = appendReleases(buf, w.head.salt, rel)
	w.buf = buf[:0]
	if len(buf) == 0 {
		return
	}

	sync := !l.cfg.NoSync && (nrec > 0 || len(moves) > 0)
	if sync { // zeros pay per fsync: commits of releases alone do not count
		w.commitAvg += (int64(len(buf)) - w.commitAvg) / 8
	}
	if sync && len(taken) > 0 {
		w.lastSync = l.cfg.Clock.Now()
	}
	err := l.writeHead(buf, start, sync)
	if err == nil {
		// Zeros stay within the segment and, with a quota, the disk the
		// log holds within the quota.
		end, limit := start+int64(len(buf)), l.cfg.SegmentBytes
		if q := l.cfg.QuotaBytes; q > 0 {
			limit = min(limit, end+max(0, q-size-int64(len(buf))))
		}
		l.prealloc(end, limit, sync)
		if sync && len(taken) > 0 {
			// Read before the answers: an append queued by now is
			// another caller's, not the next of one answered here.
			w.lastShared = len(taken) > 1 || l.queueLen() > 0
		}
	}
	if err != nil {
		w.abortCompaction()
		err = l.undo(start, err, rel)
		if errors.Is(err, ErrNoSpace) {
			l.dropSpares() // room for the next try
		}
		for _, r := range taken {
			l.answer(r, 0, err)
		}
		return
	}

	l.mu.Lock()
	h := w.head
	seq := h.base + h.n
	for _, r := range taken {
		for _, rec := range r.recs {
			h.addData(dataFrameSize(len(rec)))
		}
	}
	for _, m := range moves {
		l.transfer(m, h)
	}
	h.size += int64(len(buf))
	l.size += int64(len(buf))
	w.written += int64(len(buf))
	l.next = h.base + h.n
	l.stats.Appended += uint64(nrec)
	l.stats.Moved += uint64(len(moves))
	l.stats.Commits++
	if sync {
		l.stats.Fsyncs++
		w.synced = h.size
	}
	l.mu.Unlock()
	w.rel = rel[:0] // written: its array takes the releases after the next commit's
	k := 0          // the next of offs
	for _, r := range taken {
		if r.mapped && h.region != nil {
			r.region = h.region
			for _, rec := range r.recs {
				r.views = append(r.views, h.region.view(offs[k], len(rec)))
				k++
			}
		} else if r.mapped {
			k += len(r.recs)
		}
		l.answer(r, seq, nil)
		seq += uint64(len(r.recs))
	}
	w.offs = offs[:0]
}

// writeHead writes buf at off in the head's file and, with sync, then
// fsyncs it: through the ring when the writer has one, which leaves it
// for good the first time it fails to take an operation.
func (l *Log) writeHead(buf []byte, off int64, sync bool) error {
	w := &l.w
	if f, ok := w.f.(osFile); ok && w.ring != nil {
		if done, err := w.ring.writeSync(f.File, buf, off, sync); done {
			return err
		}
		if w.ring.broken {
			l.log.Warn("qlog: io_uring failed; the writer makes its system calls itself from now on", "file", w.head.path)
			w.ring.close()
			w.ring = nil
		}
	}
	if _, err := w.f.WriteAt(buf, off); err != nil || !sync {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return syncFailed{err}
	}
	return nil
}

// prealloc follows a write that took the head to end bytes. After one
// that was fsynced (sync), once end is within half of
// Config.PreallocBytes of the zeros' end, it writes zeros from there to
// PreallocBytes past end, so that the next fsync covers them and the
// appends up to then only overwrite them; the zeros never pass the
// offset limit. While commits are large (preallocMaxCommit) it writes
// none: the appends pass the zeros written before, then extend the file.
// It is best effort: on error (a full disk) the file is cut back to end,
// and the next append tries again.
func (l *Log) prealloc(end, limit int64, sync bool) {
	w := &l.w
	n := l.cfg.PreallocBytes
	from, to := max(w.zeroed, end), min(end+n, limit)
	if !sync || n <= 0 || w.commitAvg > preallocMaxCommit || end <= w.zeroed-n/2 || to <= from {
		w.zeroed = from
		return
	}
	if w.zeros == nil {
		w.zeros = make([]byte, n)
	}
	if _, err := w.f.WriteAt(w.zeros[:to-from], from); err != nil {
		if !w.zeroFailed { // once until it works again: a full disk fails every try
			l.log.Warn("qlog: cannot write zeros ahead of the head", "file", w.head.path, "err", err)
		}
		w.zeroFailed = true
		if err := w.f.Truncate(end); err != nil {
			l.log.Warn("qlog: cannot cut the zeros ahead of the head", "file", w.head.path, "err", err)
		}
		w.zeroed = end
		return
	}
	w.zeroed, w.zeroFailed = to, false
}

// trim cuts what follows the head's records in its file (zeros written
// ahead, or a reused file's older bytes), when it is sealed or the log
// closes.
func (l *Log) trim() error {
	w := &l.w
	if w.zeroed <= w.head.size {
		return nil
	}
	if err := w.f.Truncate(w.head.size); err != nil {
		return fmt.Errorf("qlog: cut the zeros of %s: %w", w.head.path, err)
	}
	w.zeroed = w.head.size
	return nil
}

// answer ends r's wait with first or err. When r's Append gave up, its
// records, if written, are released: nobody knows their seqs.
func (l *Log) answer(r *appendReq, first uint64, err error) {
	if r.finish(first, err) || err != nil {
		return
	}
	seqs := make([]uint64, len(r.recs))
	for i := range seqs {
		seqs[i] = first + uint64(i)
	}
	l.mu.Lock()
	l.releaseLocked(seqs)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// undo cuts what a failed write or fsync may have left at the end of the
// head, puts rel back with the pending releases, and returns the error
// for the appends. A write that failed for lack of space leaves the log
// usable; any other error, a failed fsync (syncFailed) or a cut that
// fails, fails it.
func (l *Log) undo(start int64, err error, rel []uint64) error {
	w := &l.w
	terr := w.f.Truncate(start)
	w.zeroed = start
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(rel, l.pending...)
	if terr == nil && noSpace(err) && !errors.As(err, new(syncFailed)) {
		return fmt.Errorf("%w: %s: %w", ErrNoSpace, w.head.path, err)
	}
	if terr != nil {
		l.log.Error("qlog: cannot cut a failed write", "file", w.head.path, "offset", start, "err", terr)
	}
	l.failed = fmt.Errorf("%w: %s: %w", ErrFailed, w.head.path, errors.Join(err, terr))
	return l.failed
}

// roll seals the head, fsynced, and starts a new segment. A head written
// over a reused file is cut to its records and fsynced so before the
// next segment exists: recovery takes bytes past the last frame for
// damage in any segment but the newest.
func (l *Log) roll() error {
	w := &l.w
	old := w.head
	if err := l.trim(); err != nil {
		l.log.Warn("qlog: a sealed segment keeps the bytes past its records", "err", err)
	}
	if !l.cfg.NoSync && (w.synced < old.size || old.reused) {
		if err := w.f.Sync(); err != nil {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.failed = fmt.Errorf("%w: %s: %w", ErrFailed, old.path, err)
			return l.failed
		}
		l.countFsync()
	}
	seg := newSegment(l.cfg.Dir, old.id+1, old.base+old.n)
	f, fileSize, err := l.newHead(seg)
	if err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		l.log.Warn("qlog: cannot close a sealed segment", "file", old.path, "err", err)
	}
	// The sealed segment's pages leave the process's resident memory
	// (the page cache keeps them); a mapped record read again maps its
	// page again.
	old.region.dropPages()
	l.mapHead(seg)
	w.head, w.f, w.synced, w.zeroed = seg, f, seg.size, fileSize
	l.mu.Lock()
	l.segs = append(l.segs, seg)
	l.size += seg.size
	l.mu.Unlock()
	return nil
}

// newHead makes the file of seg, a new head, over a spare's when one is
// ready, and returns it with the bytes it holds.
func (l *Log) newHead(seg *segment) (segFile, int64, error) {
	if f, size, ok := l.reuse(seg); ok {
		return f, size, nil
	}
	f, err := l.create(seg)
	return f, seg.size, err
}

// create makes seg's file, writes its header and, unless NoSync, makes
// both durable. On error nothing is left behind.
func (l *Log) create(seg *segment) (segFile, error) {
	f, err := l.hooks.openFile(seg.path, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, ioError(err)
	}
	err = l.writeHeader(f, seg)
	if err == nil && !l.cfg.NoSync {
		err = syncDir(l.cfg.Dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(seg.path)
		return nil, fmt.Errorf("qlog: new segment %s: %w", seg.path, ioError(err))
	}
	return f, nil
}

// writeHeader writes seg's header at the start of f and, unless NoSync,
// fsyncs it: of a new file (create) or over a spare's (rewrite).
func (l *Log) writeHeader(f segFile, seg *segment) error {
	if _, err := f.WriteAt(appendHeader(nil, seg.base, seg.salt, seg.reused), 0); err != nil {
		return err
	}
	if l.cfg.NoSync {
		return nil
	}
	if err := f.Sync(); err != nil {
		return err
	}
	l.countFsync()
	return nil
}

func (l *Log) countFsync() {
	l.mu.Lock()
	l.stats.Fsyncs++
	l.mu.Unlock()
}

// syncDir makes the creation and removal of files in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// shutdown ends the writer: the appends it holds fail with ErrClosed, the
// pending releases are written and everything is fsynced, the files
// closed.
func (l *Log) shutdown() {
	w := &l.w
	l.qmu.Lock()
	l.refuse = true
	queued := l.queued
	l.queued, l.queuedRecs = nil, 0
	l.qmu.Unlock()
	for _, r := range append(w.carry, queued...) {
		l.answer(r, 0, ErrClosed)
	}
	w.carry = nil
	if w.compact != nil {
		w.compact.eof = true
		w.endCompaction()
	}
	var errs []error
	if !l.crashOnClose.Load() {
		l.commit(nil)
		if !l.cfg.NoSync && w.synced < w.head.size {
			if err := w.f.Sync(); err != nil {
				errs = append(errs, err)
			} else {
				l.countFsync()
			}
		}
		if err := l.trim(); err != nil {
			errs = append(errs, err)
		}
		// Releases still pending were not written: the log failed, or
		// the disk is full (the commit put them back and went on). They
		// come back at the next open, so say so rather than close clean.
		l.mu.Lock()
		if n := len(l.pending); n > 0 {
			errs = append(errs, fmt.Errorf("qlog: %d releases not written at close: %w", n, cmp.Or(l.failed, ErrNoSpace)))
		}
		l.mu.Unlock()
	}
	if err := w.f.Close(); err != nil && !errors.Is(err, io.EOF) {
		errs = append(errs, err)
	}
	if w.ring != nil {
		w.ring.close()
		w.ring = nil
	}
	w.closeErr = errors.Join(errs...)
}
