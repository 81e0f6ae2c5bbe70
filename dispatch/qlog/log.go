package qlog

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
)

// Log is a node's queue log. Its methods are safe for concurrent use.
//
// One goroutine, the writer, owns the files: it writes appends in
// batches, fsyncs each batch once, writes releases, deletes segments and
// compacts. Log.mu guards what Release and Stats read of its state.
type Log struct {
	cfg   Config
	log   *slog.Logger
	hooks hooks

	wake chan struct{} // cap 1: appends are queued
	kick chan struct{} // cap 1: releases are pending
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the writer has returned

	closeOnce sync.Once
	closeErr  error

	// qmu guards queued, queuedRecs, refuse and paceNeed. An append queues itself and wakes
	// the writer, which takes the queue whole: the appender parks once,
	// for its answer, rather than also to be taken. qmu is never held
	// with mu.
	qmu        sync.Mutex
	queued     []*appendReq // appends not yet taken by the writer, in order
	refuse     bool         // the writer has stopped taking appends
	queuedRecs int          // records of queued
	// paceNeed, above zero while the writer paces, is how many queued
	// records end its wait (Config.SyncBatch): the append that brings
	// queuedRecs to it sends on enough.
	paceNeed int
	enough   chan struct{} // cap 1

	// crashOnClose makes Close stop the writer as a crash of the process
	// would: no release written, nothing fsynced. For tests.
	crashOnClose atomic.Bool

	w writer // the writer goroutine's alone

	mu sync.Mutex
	// Guarded by mu:
	segs    []*segment          // oldest first; the last is the head, written to
	moved   map[uint64]*segment // live moved records: seq -> segment holding them
	pending []uint64            // released seqs not yet written to the log
	next    uint64              // seq of the next append
	size    int64               // bytes of all segment files
	// spareBytes is the bytes of the spare files (writer.spares), which
	// an append passing the quota deletes first.
	spareBytes int64
	failed     error // set once the log takes no more appends
	stats      Stats
}

// hooks lets tests replace the files of a log.
type hooks struct {
	// openFile opens a segment file. Nil: openOSFile.
	openFile func(path string, flag int) (segFile, error)
}

// Stats are counters of a Log since it was opened, and its present size.
type Stats struct {
	Appended uint64 // records appended
	Fsyncs   uint64 // fdatasyncs of segment files
	Commits  uint64 // batches written (appends, moves and releases)
	Released uint64 // records released
	Moved    uint64 // live records rewritten at the head by compaction
	Deleted  uint64 // segment files deleted (or kept as spares)
	Reused   uint64 // segments written over a deleted one's file

	Waiting int // appends waiting for the writer to take them

	Live     int   // live records
	Segments int   // segment files
	Size     int64 // bytes of the segment files
	Spares   int64 // bytes of the spare files: deleted segments' kept to reuse
}

// RecordsPerFsync is how many appended records one fsync covered on
// average.
func (s Stats) RecordsPerFsync() float64 {
	if s.Fsyncs == 0 {
		return 0
	}
	return float64(s.Appended) / float64(s.Fsyncs)
}

// appendReq is one Append waiting for the writer.
type appendReq struct {
	recs  [][]byte
	bytes int // frames of recs
	done  chan struct{}
	state atomic.Int32 // reqWaiting, then reqDone (writer) or reqAbandoned (Append)
	first uint64       // set by the writer before reqDone
	err   error        // set by the writer before reqDone

	// mapped asks for the records' views in the head's region, which the
	// writer sets with first.
	mapped bool
	views  [][]byte
	region *Region
}

const (
	reqWaiting = iota
	reqDone
	reqAbandoned
)

// Append writes recs to the log and returns the seq of the first; the
// others follow it in order. It returns once the records are fsynced
// (written, with NoSync): appends that come while an fsync runs share the
// next one. recs must not change until Append returns; the log keeps no
// reference to them. An error means none of recs will be replayed,
// except when ctx ended after the writer took them (they may be on disk,
// and the log releases them itself) and after ErrFailed (the log could
// not cut what it wrote).
//
// Errors: ErrTooLarge, ErrNoSpace, ErrClosed, ErrFailed or an I/O error,
// ctx.Err().
func (l *Log) Append(ctx context.Context, recs ...[]byte) (uint64, error) {
	r, err := l.append(ctx, recs, false, nil)
	if err != nil || r == nil {
		return 0, err
	}
	return r.first, nil
}

// AppendMapped is Append that also returns the records as they lie in
// the log, appended to dst (which may be nil): views[len(dst)+i] is
// recs[i] in the mapping r of the segment file they were written to, and
// stays valid (read-only) while r is reachable, even after the records
// are released and their segment deleted. Whoever keeps a view keeps r
// with it. A view is nil where the record lies past the mapping (one
// append larger than the segment size), and r is nil (no views appended)
// when the segment could not be mapped; the caller then keeps recs. After
// an error the log may still write to dst's array: the caller must not
// reuse it.
func (l *Log) AppendMapped(ctx context.Context, recs, dst [][]byte) (first uint64, views [][]byte, r *Region, err error) {
	req, err := l.append(ctx, recs, true, dst)
	if err != nil || req == nil {
		return 0, dst, nil, err
	}
	return req.first, req.views, req.region, nil
}

// append is Append, with the records' views appended to views when
// mapped. It returns nil for no records.
func (l *Log) append(ctx context.Context, recs [][]byte, mapped bool, views [][]byte) (*appendReq, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	bytes := 0
	for _, r := range recs {
		if len(r) > l.cfg.MaxRecordBytes {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(r), l.cfg.MaxRecordBytes)
		}
		bytes += dataFrameSize(len(r))
	}
	if err := ctx.Err(); err != nil {
		// Ended already: not handed to the writer, whose receive would
		// otherwise race the Done case below.
		return nil, err
	}
	req := &appendReq{recs: recs, bytes: bytes, done: make(chan struct{}), mapped: mapped, views: views}
	l.qmu.Lock()
	if l.refuse {
		l.qmu.Unlock()
		return nil, ErrClosed
	}
	l.queued = append(l.queued, req)
	l.queuedRecs += len(recs)
	if l.paceNeed > 0 && l.queuedRecs >= l.paceNeed {
		select {
		case l.enough <- struct{}{}:
		default:
		}
	}
	l.qmu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a wake is pending already
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		// Not taken yet, the writer drops it; taken, its records are
		// released once written.
		if req.state.CompareAndSwap(reqWaiting, reqAbandoned) {
			return nil, ctx.Err()
		}
		<-req.done
	}
	if req.err != nil {
		return nil, req.err
	}
	return req, nil
}

// finish hands the writer's result to the Append waiting for it, and
// reports false when that Append gave up.
func (r *appendReq) finish(first uint64, err error) bool {
	r.first, r.err = first, err
	if !r.state.CompareAndSwap(reqWaiting, reqDone) {
		return false
	}
	close(r.done)
	return true
}

// Release marks records as no longer needed: a replay after a restart
// skips them once the release is on disk, and a segment whose records are
// all released is deleted. The release is written with the next batch and
// fsynced with the next append; one lost in a crash means its records are
// replayed again. Seqs that Open replayed are released the same way.
// Seqs that are not live (released already, never appended) are
// ignored, so releasing twice is harmless.
func (l *Log) Release(seqs ...uint64) error {
	l.mu.Lock()
	if l.closed() {
		l.mu.Unlock()
		return ErrClosed
	}
	n := l.releaseLocked(seqs)
	l.mu.Unlock()
	if n > 0 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// releaseLocked releases the live records among seqs, queues their
// release records and returns how many it released. l.mu is held.
func (l *Log) releaseLocked(seqs []uint64) int {
	n := 0
	for _, seq := range seqs {
		if l.forget(seq) {
			l.pending = append(l.pending, seq)
			n++
		}
	}
	l.stats.Released += uint64(n)
	return n
}

// forget marks record seq not live wherever it is held, and reports
// whether it was live. l.mu is held.
func (l *Log) forget(seq uint64) bool {
	if s, ok := l.moved[seq]; ok {
		delete(l.moved, seq)
		s.live--
		return true
	}
	if s := l.owner(seq); s != nil && s.isLive(seq) {
		s.clear(seq)
		return true
	}
	return false
}

// owner returns the segment holding data record seq, or nil. l.mu is held
// (or the log is not yet shared).
func (l *Log) owner(seq uint64) *segment {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > seq }) - 1
	if i < 0 || !l.segs[i].owns(seq) {
		return nil
	}
	return l.segs[i]
}

// closed reports whether Close was called. l.mu is held.
func (l *Log) closed() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// Size returns the bytes of the log's segment files.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Segments = len(l.segs)
	s.Size = l.size
	s.Spares = l.spareBytes
	s.Waiting = l.queueLen()
	for _, seg := range l.segs {
		s.Live += seg.live // moved records included
	}
	return s
}

// queueLen returns how many appends wait for the writer to take them.
func (l *Log) queueLen() int {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return len(l.queued)
}

// Close stops the writer once the batch it writes is done, writes the
// pending releases, fsyncs them and closes the files. Appends waiting
// fail with ErrClosed. Releases it could not write (a full disk, a
// failed log) make it fail: their records come back at the next open.
// Close is idempotent and returns the first call's error.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		close(l.stop)
		<-l.done
		l.closeErr = l.w.closeErr
	})
	return l.closeErr
}
