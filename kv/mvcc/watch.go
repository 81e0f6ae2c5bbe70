package mvcc

import (
	"sort"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A watcher is in one of two sets of the store. Synced watchers are fed by
// every write, while the write holds mu. Unsynced watchers are behind: they
// started in the past, or their stream's buffer was full when a write came.
// The store's sync loop feeds them from the change log, a bounded batch at a
// time, and moves them back to synced when they reach the current revision.
// So a write never waits for a watcher, and a slow watcher loses nothing
// unless its place in history is compacted away, which cancels it with
// compact_revision as etcd does.

// syncBatchEvents and syncBatchBytes bound the events one sync step hands
// to one watcher, one response; a step never splits a revision. The bytes
// (keys and values, previous ones too) are gRPC's default limit of a
// message a client takes: bounded by count alone, a watcher catching up
// through large values got responses no client could take (past 2 GiB,
// none the server could send), and its client watched again from the
// same revision for ever. A revision larger than that goes whole.
const (
	syncBatchEvents = 1000
	syncBatchBytes  = 4 << 20
)

// Watcher is one watch: what it selects and how, and its place in
// history. Store.Watch creates it; its fields are the store's.
type Watcher struct {
	id       int64
	r        KeyRange
	prevKV   bool
	noPut    bool
	noDelete bool
	progress bool // progress_notify: told the revision when idle
	sink     WatchSink

	// Guarded by Store.mu.
	minRev   int64  // the next revision this watcher must see
	removed  bool   // cancelled, compacted or its stream ended
	notified bool   // sent something since the last progress tick
	visited  uint64 // the pass of watcherGroup.forChanges that last yielded it
	// pending are the events of a write the sink refused (it was full),
	// sent before anything read from the log after them, as etcd keeps
	// a slow watcher's events as a victim: read again from the log, the
	// DELETEs at a revision compacted meanwhile would be gone.
	pending *pb.WatchResponse
}

// sentThrough is the revision up to which w was sent every event. The
// caller holds Store.mu.
func (w *Watcher) sentThrough() int64 {
	if w.pending != nil {
		return w.pending.Header.Revision - 1
	}
	return w.minRev - 1
}

// WatchSink receives a watcher's responses: a watch stream's send queue.
// Both methods are called with the store's lock held, so they must not
// block, nor call the store. The responses belong to the sink; their
// events are shared with other watchers and must not be modified.
type WatchSink interface {
	// PushEvents queues resp and reports whether there was room for it.
	// A watcher refused falls behind and is fed again from history.
	PushEvents(resp *pb.WatchResponse) bool
	// PushControl queues resp whatever the buffer holds; used for the few
	// responses a watcher gets once (compaction).
	PushControl(resp *pb.WatchResponse)
}

// wants reports whether the change rec is one this watcher asked for.
func (w *Watcher) wants(rec *changeRecord) bool {
	if rec.typ == mvccpb.PUT && w.noPut || rec.typ == mvccpb.DELETE && w.noDelete {
		return false
	}
	return w.r.Contains(rec.kv.Key)
}

// Watch registers a watcher with id, as cr asks (key range, filters,
// prev_kv, progress_notify), that sends its responses to sink; kv
// checks the range beforehand. It sees changes from cr.StartRevision (0 =
// from the next write): a start in the past makes it catch up from
// history; one in the future makes it skip the writes before it.
func (s *Store) Watch(id int64, cr *pb.WatchCreateRequest, sink WatchSink) *Watcher {
	w := &Watcher{id: id, r: KeyRange{Key: cr.Key, End: cr.RangeEnd}, prevKV: cr.PrevKv, progress: cr.ProgressNotify, sink: sink}
	for _, f := range cr.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			w.noPut = true
		case pb.WatchCreateRequest_NODELETE:
			w.noDelete = true
		}
	}
	startRev := cr.StartRevision
	s.mu.Lock()
	defer s.mu.Unlock()
	if startRev == 0 || startRev > s.rev {
		w.minRev = max(startRev, s.rev+1)
		s.synced.add(w)
		return w
	}
	w.minRev = startRev
	s.unsynced[w] = struct{}{}
	s.kickSync()
	return w
}

// Watchers returns how many watchers are registered: synced (fed by
// every write) and unsynced (behind, fed from history).
func (s *Store) Watchers() (synced, unsynced int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced.len(), len(s.unsynced)
}

// Unwatch removes w; it gets nothing more. Removing it twice is harmless.
func (s *Store) Unwatch(w *Watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeWatcherLocked(w)
}

func (s *Store) removeWatcherLocked(w *Watcher) {
	w.removed = true
	s.synced.remove(w)
	delete(s.unsynced, w)
}

// notify hands the events of the write at rev to every synced watcher that
// wants them; a watcher whose sink is full becomes unsynced at rev. The caller
// holds mu.
func (s *Store) notify(rev int64, changes []changeRecord) {
	var events sharedEvents
	s.notifyPass++
	for w := range s.synced.forChanges(s.notifyPass, changes) {
		if rev < w.minRev {
			continue
		}
		var mine []*mvccpb.Event
		for i := range changes {
			if w.wants(&changes[i]) {
				mine = append(mine, events.of(changes, i, w.prevKV))
			}
		}
		if len(mine) == 0 {
			continue
		}
		resp := &pb.WatchResponse{Header: s.Header(rev), WatchId: w.id, Events: mine}
		w.minRev = rev + 1
		if w.sink.PushEvents(resp) {
			w.notified = true
			continue
		}
		w.pending = resp
		s.synced.remove(w)
		s.unsynced[w] = struct{}{}
	}
}

// sharedEvents makes the events of one write's changes for the watchers
// notified of it, once each: with the previous value, and without it
// when that differs. Responses share them; nobody changes an event.
type sharedEvents struct {
	full, bare []*mvccpb.Event
}

// of returns the event of changes[i], with its previous value or not.
func (e *sharedEvents) of(changes []changeRecord, i int, withPrev bool) *mvccpb.Event {
	if e.full == nil {
		e.full = make([]*mvccpb.Event, len(changes))
		e.bare = make([]*mvccpb.Event, len(changes))
	}
	rec := &changes[i]
	if withPrev || rec.prev == nil {
		if e.full[i] == nil {
			e.full[i] = rec.event(true)
		}
		return e.full[i]
	}
	if e.bare[i] == nil {
		e.bare[i] = rec.event(false)
	}
	return e.bare[i]
}

// kickSync asks the sync loop for a pass without waiting for its tick.
func (s *Store) kickSync() {
	select {
	case s.syncKick <- struct{}{}:
	default:
	}
}

// syncWatchers runs one pass over the unsynced watchers.
func (s *Store) syncWatchers() {
	s.mu.RLock()
	ws := make([]*Watcher, 0, len(s.unsynced))
	for w := range s.unsynced {
		ws = append(ws, w)
	}
	s.mu.RUnlock()
	for _, w := range ws {
		s.syncOne(w)
	}
}

// syncOne moves w forward by at most one batch of the log. It reads under
// the read lock and takes the write lock only to record progress; writes
// in between are found by the next pass, since w is still unsynced.
func (s *Store) syncOne(w *Watcher) {
	s.mu.RLock()
	if w.removed {
		s.mu.RUnlock()
		return
	}
	if w.minRev < s.compactRev {
		compactRev := s.compactRev
		s.mu.RUnlock()
		s.mu.Lock()
		if !w.removed {
			s.removeWatcherLocked(w)
			w.sink.PushControl(&pb.WatchResponse{
				Header:          s.Header(0), // etcd's carries no revision
				WatchId:         w.id,
				CompactRevision: compactRev,
				Canceled:        true,
				CancelReason:    "etcdserver: mvcc: required revision has been compacted",
			})
		}
		s.mu.Unlock()
		return
	}
	evs, last := s.logFrom(w)
	var resp *pb.WatchResponse
	if len(evs) > 0 {
		resp = &pb.WatchResponse{Header: s.Header(last), WatchId: w.id, Events: evs}
	}
	s.mu.RUnlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if w.removed {
		return
	}
	if w.pending != nil {
		if !w.sink.PushEvents(w.pending) {
			return // still full; the next pass retries
		}
		w.pending = nil
		w.notified = true
	}
	if resp != nil {
		if !w.sink.PushEvents(resp) {
			return // still full; the next pass retries from the same place
		}
		w.notified = true
	}
	// Never back: a watch from a revision the store has not reached
	// yet, made unsynced by a Restore of an older snapshot, would get
	// revisions before its start from the log replayed after it.
	w.minRev = max(w.minRev, last+1)
	if w.minRev > s.rev {
		delete(s.unsynced, w)
		s.synced.add(w)
	}
}

// logFrom returns the events w wants from its minRev on, at most about one
// batch and never part of a revision, and the last revision it looked at.
// The caller holds mu for reading.
func (s *Store) logFrom(w *Watcher) ([]*mvccpb.Event, int64) {
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev >= w.minRev })
	last := s.rev
	var evs []*mvccpb.Event
	size := 0
	for ; i < len(s.log); i++ {
		rec := &s.log[i]
		if (len(evs) >= syncBatchEvents || size >= syncBatchBytes) && rec.rev != s.log[i-1].rev {
			last = s.log[i-1].rev
			break
		}
		if w.wants(rec) {
			ev := rec.event(w.prevKV)
			evs = append(evs, ev)
			size += len(ev.Kv.Key) + len(ev.Kv.Value)
			if ev.PrevKv != nil {
				size += len(ev.PrevKv.Key) + len(ev.PrevKv.Value)
			}
		}
	}
	return evs, last
}

// ProgressRev returns the revision up to which every watcher in ws has been
// sent all its events: the current revision, or just below the oldest
// position of a watcher that is behind; current reports the former.
func (s *Store) ProgressRev(ws []*Watcher) (rev int64, current bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rev = s.rev
	for _, w := range ws {
		if _, behind := s.unsynced[w]; behind && w.sentThrough() < rev {
			rev = w.sentThrough()
		}
	}
	return rev, rev == s.rev
}

// notifyProgress sends the current revision to every synced watcher that
// asked for progress notifications and got nothing since the last call.
func (s *Store) notifyProgress() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.synced.all() {
		if w.progress && !w.notified {
			w.sink.PushEvents(&pb.WatchResponse{Header: s.Header(s.rev), WatchId: w.id})
		}
		w.notified = false
	}
}

// RunWatchLoops feeds the watchers that are behind, every syncEvery or
// when a write or compaction asks, and sends progress notifications every
// progressEvery, until stop is closed. The caller runs it on a goroutine
// it owns and waits for; one per store.
func (s *Store) RunWatchLoops(stop <-chan struct{}, syncEvery, progressEvery time.Duration) {
	syncTick := time.NewTicker(syncEvery)
	defer syncTick.Stop()
	progressTick := time.NewTicker(progressEvery)
	defer progressTick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.syncKick:
			s.syncWatchers()
		case <-syncTick.C:
			s.syncWatchers()
		case <-progressTick.C:
			s.notifyProgress()
		}
	}
}
