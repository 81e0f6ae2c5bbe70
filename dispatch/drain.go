package dispatch

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"chute/internal/backoff"
	"chute/sink"
)

// A drainer empties one ClickHouse queue (ch:{table}, clickhouse:{table})
// into its table on the queue's dispatcher. It is the queue's only
// consumer: the queue delivers to it like to any consumer (bounded by its
// prefetch, room for every batch in flight and the next one), and it
// acknowledges rows once ClickHouse holds them or once they are dead
// letters.
//
// One loop (run) owns the drainer's schedule: it forms batches and
// starts each on a goroutine of its own, at most max_inflight_inserts at
// once, and learns from the settled channel when one is done. Rows that
// arrive while batches are in flight form the next batch (group commit).
// A batch starts at least batch_interval after the previous start; one
// that is not full (below batch_rows and batch_bytes) also waits until
// 1/max_inserts_per_second has passed since the previous start (see
// doc.go, Batching). A batch's goroutine owns it from its first attempt
// to its last: a server failing it with a transient error passes it to
// the next server that is up at once (send); a failed batch is retried on
// a timer with capped exponential backoff and jitter, or, when every
// server is down, when the first is up again; no put is needed to wake
// it. Its rows never expire back to the queue while it retries.
//
// The drainer keeps no list of its rows: they are the queue's messages in
// state msgDrained, and a batch is the oldest of them by number that no
// batch in flight holds, read under the queue's lock (queue.drainBatch).
// A row's tail and value never change once queued, so the drainer reads
// them without the lock.
type drainer struct {
	m     *Manager
	q     *queue
	table string
	c     *consumer

	ready chan struct{} // capacity 1: rows arrived
	sweep chan struct{} // capacity 1: time to look for dead letters to delete (dlq.go)
	// sweepDue is when the letters next need the loop (unix nanoseconds,
	// the manager's clock; 0: now): their sweep, or a WARN of dropped
	// letters waiting for its minute. sweepDeadLetters wakes no drainer
	// before it.
	sweepDue atomic.Int64
	// rehome (capacity 1): the queue log deleted segments; the loop
	// copies the values of its rows in no batch to the heap
	// (rehomeDrained).
	rehome chan struct{}
	// settled carries each batch back from its goroutine, once; its
	// capacity is the most batches ever in flight, so a send never
	// blocks.
	settled chan *inflight

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	detach   sync.Once
	batches  sync.WaitGroup // the goroutines of the batches in flight

	// Owned by the loop.
	lastStart time.Time       // start of the last batch
	flight    []*inflight     // batches in flight, in the order they started
	flightN   int             // their rows
	held      heldBatch       // the batch the insert rate holds back
	rowsKept  spares[row]     // landed batches' rows slices, for the next batches
	valsKept  spares[[]byte]  // and their values slices
	pause     backoff.Backoff // while no batch can start: no URL, a URL that cannot be used
	paused    time.Time       // no batch starts before it: no server to send one to

	// lettersMu guards letters and label: the loop sweeps the letters,
	// the batches' goroutines store them.
	lettersMu sync.Mutex
	letters   letterBook // the queue's dead letters
	label     string     // the table label of the letters' metrics ("db.table" or "_other")

	classMu   sync.Mutex // guards lastClass
	lastClass sink.Class // of the last failed insert, to log state changes once

	// failing is set while a batch waits to be sent again after its
	// insert failed (every server down, a config error), or while no
	// batch can be sent (no clickhouse_url, one that cannot be used,
	// every server passed over), and cleared by an insert ClickHouse
	// took or refused as data: a member leaving does not wait to flush a
	// failing queue (flushLeft).
	failing atomic.Bool

	rowCap rowCap // of batches, while ClickHouse's query limits refuse larger ones

	// timeout bounds each insert request of the queue (insertTimeout),
	// in nanoseconds; 0: Config.InsertTimeout. It doubles after a
	// request that timed out, up to maxTimeoutFactor times that, and
	// halves back after one answered in under a quarter of it.
	timeout atomic.Int64
}

// maxTimeoutFactor bounds a queue's insert timeout: at most that many
// times Config.InsertTimeout.
const maxTimeoutFactor = 8

// inflight is a batch: fixed from its first attempt to its last, so a
// retry sends the same rows in the same order (and the same
// deduplication token), and one span covers every attempt. Its goroutine
// owns it until it sends it on settled.
type inflight struct {
	rows     []row
	values   [][]byte       // the rows' values, as the sink takes them
	reader   sink.RowReader // reads values from the queue log; nil: from memory
	bytes    int
	label    string // the table label of its metrics ("db.table" or "_other")
	attempts int
	limited  int // attempts refused by ClickHouse's limits of one query
	// untokened: an attempt went without a dedup token because the
	// server could not be asked whether it takes one (drainer.token), so
	// every later attempt goes without one too: a first attempt that
	// landed and a retry with a token would be two blocks.
	untokened bool
	span      trace.Span // nil when tracing is off, or once ended
	// rec is the batch's mark in the queue log (recTried), written
	// before its first attempt, released when it settles; 0 for none.
	rec uint64
	// again: formed from a mark (queue.tried), so an attempt made
	// elsewhere or before a restart may have landed, though none was
	// made here.
	again bool
}

// spares are slices of a batch kept by the loop from one batch to the
// next: a batch of txn-128 rows is tens of thousands of rows, and its
// slices were a fifth of the bytes a busy node allocated.
type spares[T any] struct{ kept [][]T }

// maxSpareBufs bounds the slices kept of each kind: one per batch in
// flight at the usual max_inflight_inserts, and one being formed.
const maxSpareBufs = 3

// keep keeps x for a later batch, cleared so that it holds nothing alive.
func (s *spares[T]) keep(x []T) {
	if cap(x) > 0 && len(s.kept) < maxSpareBufs {
		clear(x)
		s.kept = append(s.kept, x[:0])
	}
}

// take returns an empty kept slice of at least n elements' capacity;
// nil when none is kept or the last kept is smaller.
func (s *spares[T]) take(n int) []T {
	k := len(s.kept)
	if k == 0 || cap(s.kept[k-1]) < n {
		return nil
	}
	x := s.kept[k-1]
	s.kept = s.kept[:k-1]
	return x
}

// heldBatch is what the loop knows of a batch that is not full while the
// insert rate holds it back: when that began, and the rows and bytes it
// had at the last look, so that it reads the queue again only when the
// batch may have become full.
type heldBatch struct {
	since time.Time // zero: no batch is held
	rows  int
	bytes int
}

// mayBeFull reports whether a held batch may have reached a cap now that
// free rows are free: by rows, by bytes at the held rows' mean size, or
// because it doubled since the last look (rows larger than the held ones
// would fool the mean).
func (h heldBatch) mayBeFull(free int, set Settings) bool {
	if free >= set.BatchRows || free >= 2*h.rows {
		return true
	}
	return h.rows > 0 && int64(free)*int64(h.bytes)/int64(h.rows) >= int64(set.BatchBytes)
}

// row is a message delivered to the drainer, with its number.
type row struct {
	seq uint64
	m   *message
}

// wake tells the drainer that rows were delivered to it. It is called with
// the queue's lock held and never blocks.
func (d *drainer) wake() {
	select {
	case d.ready <- struct{}{}:
	default:
	}
}

// ensureDrainer starts the drainer of a ClickHouse queue this member
// dispatches, if it has none. It reads the record and starts the drainer
// under the queue's handoverMu: a handover (which stops the drainer, then
// takes the messages) either comes after and stops it, or came before and
// moved the record, so no drainer inserts rows that went to the next
// dispatcher. Callers do not hold handoverMu. Once the drainer is in
// drainers, the member does not forget q (forget.go).
func (m *Manager) ensureDrainer(q *queue) {
	table, ok := sink.TableOf(q.name)
	if !ok {
		return
	}
	m.mu.RLock()
	_, running := m.drainers[q.name]
	m.mu.RUnlock()
	if running {
		return
	}
	q.handoverMu.Lock()
	defer q.handoverMu.Unlock()
	if rec, ok := m.recordAt(q.recordKey); ok && rec.Member != m.cfg.MemberID {
		return
	}
	m.mu.Lock()
	if _, running := m.drainers[q.name]; running || m.queues[q.name] != q {
		// Or q was forgotten since the caller looked it up: the reconcile
		// round starts the drainer of the queue that replaced it.
		m.mu.Unlock()
		return
	}
	d := &drainer{m: m, q: q, table: table, ready: make(chan struct{}, 1), sweep: make(chan struct{}, 1), rehome: make(chan struct{}, 1),
		settled: make(chan *inflight, maxInflightInserts), stop: make(chan struct{}), done: make(chan struct{})}
	d.c = &consumer{id: "clickhouse", prefix: "q", drain: d}
	m.drainers[q.name] = d
	m.mu.Unlock()
	q.addConsumer(d.c, m.clock.Now())
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(d.done)
		d.run()
	}()
}

// stopDrainer stops a queue's drainer (this member no longer dispatches
// it) and returns once it has: every insert in flight is finished and
// settled first, so its rows are never handed over while ClickHouse takes
// them. Concurrent callers all wait. The rows it held go back to the
// queue, which hands them over.
func (m *Manager) stopDrainer(name string) {
	m.mu.Lock()
	d, ok := m.drainers[name]
	m.mu.Unlock()
	if !ok {
		return
	}
	d.stopOnce.Do(func() { close(d.stop) })
	<-d.done
	d.detach.Do(func() { d.q.removeConsumer(d.c, m.clock.Now()) })
	m.mu.Lock()
	if m.drainers[name] == d {
		delete(m.drainers, name)
	}
	m.mu.Unlock()
}

// run starts batches until stopped, then waits for those in flight.
func (d *drainer) run() {
	defer d.batches.Wait() // each settles, or ends its span when stopped while it waits to retry
	for {
		set := d.m.settingsOf(d.q.name) // a changed settings key applies at the next batch
		d.pause.Min, d.pause.Max = set.RetryMin, set.RetryMax
		wait := d.startBatches(set)
		var timer clockwork.Timer
		var tick <-chan time.Time
		if wait > 0 {
			timer = d.m.clock.NewTimer(wait)
			tick = timer.Chan()
		}
		var cut <-chan struct{}
		if !d.m.leaving() {
			cut = d.m.flushing // the member leaves: no more waiting for the interval
		}
		select {
		case <-d.stop:
		case <-d.m.stop:
		case <-d.sweep:
			d.lettersMu.Lock()
			d.sweepLetters()
			d.noteSweepDue()
			d.lettersMu.Unlock()
		case <-d.ready:
		case <-d.rehome:
			d.rehomeDrained()
		case b := <-d.settled:
			d.land(b)
		case <-tick:
		case <-cut:
		}
		if timer != nil {
			timer.Stop()
		}
		if d.stopped() {
			return
		}
	}
}

// rehomeDrained copies to the heap the values, still views of segments
// the queue log deleted, of the rows delivered to the drainer and in no
// batch in flight (rehomeValues does the queue's other rows). In the
// loop: a batch in flight reads its rows' values without the queue's
// lock, and only the loop starts batches. The rows of a batch in flight
// keep their segments until it lands.
func (d *drainer) rehomeDrained() {
	q := d.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for seq, msg := range q.msgs.all() {
		if msg.state == msgDrained && msg.region.Deleted() && !inFlight(d.flight, seq) {
			msg.rehome()
		}
	}
}

// land forgets a batch its goroutine settled: its rows are gone, or, the
// ones it could not settle, free for the next batch.
func (d *drainer) land(b *inflight) {
	for i, f := range d.flight {
		if f == b {
			d.flight = slices.Delete(d.flight, i, i+1) // clears the place it frees: the batch's regions go
			d.flightN -= len(b.rows)
			break
		}
	}
	d.rowsKept.keep(b.rows)
	d.valsKept.keep(b.values)
	b.rows, b.values, b.reader = nil, nil, nil
}

// startBatches starts the batches that may start now and returns how
// long until the next one may (0: none waits for the clock, only for
// rows or for a batch to settle).
func (d *drainer) startBatches(set Settings) time.Duration {
	set.BatchRows = d.rowCap.limit(set.BatchRows)
	for {
		select {
		case b := <-d.settled: // its slot and its rows are free
			d.land(b)
			continue
		default:
		}
		if len(d.flight) >= max(set.MaxInflightInserts, 1) {
			return 0
		}
		free := d.freeRows()
		if free == 0 {
			d.held = heldBatch{}
			return 0
		}
		now := d.m.clock.Now()
		if now.Before(d.paused) {
			return d.paused.Sub(now)
		}
		leaving := d.m.leaving()
		if wait := set.BatchInterval - now.Sub(d.lastStart); wait > 0 && !leaving {
			return wait
		}
		rateAt := d.lastStart.Add(set.insertGap())
		limited := !leaving && now.Before(rateAt)
		if limited && !d.held.since.IsZero() && !d.held.mayBeFull(free, set) {
			return rateAt.Sub(now)
		}
		if _, elsewhere := d.dispatchedElsewhere(); elsewhere {
			return d.m.cfg.ReconcileInterval // the reconcile loop stops this drainer, or the record comes back
		}
		f := d.q.drainBatch(d.c, set, d.flight, d.rowsKept.take(0), now, leaving)
		if len(f.rows) == 0 {
			d.rowsKept.keep(f.rows)
			// 0: what is free lies among the numbers of a batch in
			// flight, and goes after that one; else the rest of a tried
			// batch is on its way.
			return f.wait
		}
		if limited && !f.full {
			if d.held.since.IsZero() {
				d.held.since = now
			}
			d.held.rows, d.held.bytes = len(f.rows), f.bytes
			d.rowsKept.keep(f.rows)
			return rateAt.Sub(now)
		}
		ep, db, wait, ok := d.endpoint(set)
		if !ok {
			d.failing.Store(true) // nowhere to send it: flushLeft does not wait
			if wait <= 0 {
				wait = d.pause.Next()
			}
			d.paused = now.Add(wait) // rows that come meanwhile do not ask again
			return wait
		}
		d.pause.Reset()
		var held time.Duration
		if !d.held.since.IsZero() {
			held = now.Sub(d.held.since)
		}
		d.held = heldBatch{}
		if !f.tried { // a tried batch is a retry, not a start: it holds no batch back
			d.lastStart = now
		}
		d.start(f, db, ep, held)
	}
}

// freeRows is how many rows were delivered to the drainer and are in no
// batch in flight (a batch's rows it settled meanwhile aside).
func (d *drainer) freeRows() int {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	return max(d.c.drained-d.flightN, 0)
}

// start sends batch f on a goroutine of its own; held is how long the
// insert rate held it back.
func (d *drainer) start(f formed, db string, ep sink.Endpoint, held time.Duration) {
	m := d.m
	rows, bytes := f.rows, f.bytes
	var rec uint64
	if f.tried {
		rec = d.q.takeTried(rows[0].seq)
	}
	values := d.valsKept.take(len(rows))
	if values == nil {
		values = make([][]byte, 0, len(rows))
	}
	for _, r := range rows {
		values = append(values, r.m.value)
	}
	b := &inflight{rows: rows, values: values, reader: newRegionReader(rows).rowReader(), bytes: bytes, rec: rec, again: f.tried, label: m.inserts.tables.label(sink.SplitTable(db, d.table)),
		span: d.startInsert(rows, bytes, db, ep, m.clock.Now())}
	if b.span != nil {
		b.span.SetAttributes(attribute.Float64("chute.batch.wait", held.Seconds()))
	}
	ctx, table := context.Background(), metric.WithAttributeSet(attribute.NewSet(attribute.String("table", b.label)))
	m.inserts.batchRows.Record(ctx, int64(len(rows)), table)
	m.inserts.batchWait.Record(ctx, held.Seconds(), table)
	d.flight = append(d.flight, b)
	d.flightN += len(rows)
	d.batches.Add(1)
	go func() {
		defer d.batches.Done()
		d.insert(b, ep)
		d.settled <- b
	}()
}

// stopped reports whether the drainer or its manager was told to stop.
func (d *drainer) stopped() bool {
	select {
	case <-d.stop:
		return true
	case <-d.m.stop:
		return true
	default:
		return false
	}
}

// sleep waits dur and reports false when the drainer was told to stop
// meanwhile.
func (d *drainer) sleep(dur time.Duration) bool {
	t := d.m.clock.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-d.stop:
		return false
	case <-d.m.stop:
		return false
	}
}

// insertContext bounds one request of the queue's inserts by its
// timeout (insertTimeout), which it returns for timed; the sink client's
// own, maxTimeoutFactor times Config.InsertTimeout, is the backstop.
func (d *drainer) insertContext(parent context.Context) (context.Context, context.CancelFunc, time.Duration) {
	t := d.insertTimeout()
	ctx, cancel := context.WithTimeout(parent, t)
	return ctx, cancel, t
}

// insertTimeout is how long a request of the queue's inserts may take.
func (d *drainer) insertTimeout() time.Duration {
	if t := time.Duration(d.timeout.Load()); t > 0 {
		return t
	}
	return d.m.cfg.InsertTimeout
}

// timed adjusts the queue's insert timeout to res, the answer of a
// request that ran with timeout ran.
// ClickHouse goes on with an insert whose client went away, and a batch
// sent again is the same rows again: an insert that takes longer than the
// timeout, every time (a slow materialized view, a busy disk), landed once
// per attempt, for ever, and its rows never left the queue. So a timeout
// doubles the next requests' (up to maxTimeoutFactor times
// Config.InsertTimeout): a few copies at most, and the batch goes. It
// doubles from the request's own timeout: two requests in flight that
// time out together double it once, not twice. An answer in under a
// quarter of a grown timeout halves it back.
func (d *drainer) timed(target string, ep sink.Endpoint, res sink.Result, ran time.Duration) {
	base, was := d.m.cfg.InsertTimeout, d.timeout.Load()
	t := time.Duration(was)
	if t <= 0 {
		t = base
	}
	switch {
	case errors.Is(res.Err, sink.ErrTimeout):
		if next := min(2*ran, maxTimeoutFactor*base); next > t && d.timeout.CompareAndSwap(was, int64(next)) {
			d.m.log.Warn("clickhouse insert timed out: it may have landed, and goes again with the same rows; the queue's insert timeout doubles",
				"queue", d.q.name, "table", target, "endpoint", ep.String(), "timeout", ran, "next_timeout", next)
		}
	case res.Class == sink.ClassOK && t > base && res.Duration < t/4:
		d.timeout.CompareAndSwap(was, int64(max(t/2, base)))
	}
}

// stopContext returns a context that ends when the drainer or its
// manager stops, or when stop is called.
func (d *drainer) stopContext() (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = context.WithCancel(context.Background())
	go func() {
		select {
		case <-d.stop:
		case <-d.m.stop:
		case <-ctx.Done():
		}
		stop()
	}()
	return ctx, stop
}

// leaving reports whether the member is leaving (Handoff ran): drainers
// insert without waiting for their batch interval or insert rate.
func (m *Manager) leaving() bool {
	select {
	case <-m.flushing:
		return true
	default:
		return false
	}
}

// formed is a batch drainBatch formed.
type formed struct {
	rows  []row
	bytes int  // in the request
	full  bool // a cap cut it, or it is a tried batch
	// wait, when no batch formed, is how long the rest of a tried
	// batch's rows may still take to come (0: nothing to wait for).
	wait  time.Duration
	tried bool // a tried batch formed again (its mark stays until it starts: takeTried)
}

// drainBatch returns the oldest rows delivered to the drainer c, by
// number, that lie outside the numbers of the batches in flight, within
// the caps, without removing them, appended to dst[:0]; their bytes in
// the request; and whether a cap cut the batch (it is full).
//
// When the oldest of those rows heads a tried batch (queue.tried), the
// batch is that one again, its rows whatever the caps, and full; none
// until all its rows are here, for at most triedWait after it was given
// up or came (wait: the rest of that), unless hurry (the member leaves).
// A batch of other rows ends before a tried batch's first row.
func (q *queue) drainBatch(c *consumer, set Settings, flight []*inflight, dst []row, now time.Time, hurry bool) formed {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.drained == 0 {
		return formed{rows: dst[:0]}
	}
	b := formed{rows: dst[:0]}
	if cap(b.rows) == 0 {
		b.rows = make([]row, 0, min(c.drained, set.BatchRows))
	}
	var tried triedBatch // rows 0: an ordinary batch
	skipped := 0         // drained rows in the span of a batch in flight
	for seq, m := range q.msgs.all() {
		if tried.rows > 0 {
			if len(b.rows) == tried.rows {
				break
			}
			if m.state == msgReady {
				// Beyond the drainer's prefetch, which its own rows,
				// numbered above a hand-over's, may fill: delivered now,
				// the tried batch being the next to go.
				q.drainLocked(c, m)
			}
			if m.state != msgDrained || inFlight(flight, seq) {
				break // not the batch's: it has fewer rows here
			}
		} else {
			if len(b.rows)+skipped == c.drained {
				break
			}
			if m.state != msgDrained {
				continue // ready: beyond the drainer's prefetch
			}
			if inFlight(flight, seq) {
				skipped++
				continue
			}
			if len(q.tried) > 0 {
				if len(b.rows) == 0 {
					q.dropGoneTriedLocked()
					tried = q.tried[seq]
				} else if _, ok := q.tried[seq]; ok {
					b.full = true // it goes, and the tried batch after it
					return b
				}
			}
			if tried.rows == 0 && (len(b.rows) == set.BatchRows || len(b.rows) > 0 && b.bytes+len(m.value)+1 > set.BatchBytes) {
				b.full = true
				return b
			}
		}
		b.bytes += len(m.value) + 1
		b.rows = append(b.rows, row{seq: seq, m: m})
	}
	if tried.rows > 0 {
		if len(b.rows) < tried.rows && !hurry {
			if wait := tried.at.Add(triedWait).Sub(now); wait > 0 {
				return formed{rows: b.rows[:0], wait: wait}
			}
		}
		b.full, b.tried = true, true
		return b
	}
	b.full = len(b.rows) == set.BatchRows
	return b
}

// dropGoneTriedLocked forgets the tried batches whose first row left the
// queue. (Not those whose first row is below the oldest row delivered to
// the drainer: a hand-over's rows keep their numbers, below the new
// dispatcher's, and wait while its drainer holds all it may of its own.)
// The caller holds mu.
func (q *queue) dropGoneTriedLocked() {
	for first, t := range q.tried {
		if q.msgs.get(first) == nil {
			releaseLog(q.log, t.rec)
			delete(q.tried, first)
		}
	}
}

// takeTried removes the mark of the tried batch whose first row is
// numbered first, which starts, and returns its record in the queue log:
// the batch carries it now.
func (q *queue) takeTried(first uint64) (rec uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rec = q.tried[first].rec
	delete(q.tried, first)
	return rec
}

// markTried notes batch rows, sent to ClickHouse and given up, as tried
// (queue.tried), with rec, its record in the queue log, while its first
// row is still here; false when it is not (rec stays the caller's).
func (q *queue) markTried(rows []row, now time.Time, rec uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(rows) == 0 || q.msgs.get(rows[0].seq) != rows[0].m {
		return false
	}
	q.setTriedLocked(rows[0].seq, triedBatch{rows: len(rows), at: now, rec: rec})
	return true
}

// setTriedLocked marks the row numbered first as the first of tried batch
// t, releasing the record of a mark t replaces. The caller holds mu.
func (q *queue) setTriedLocked(first uint64, t triedBatch) {
	if q.tried == nil {
		q.tried = make(map[uint64]triedBatch)
	}
	if old, ok := q.tried[first]; ok && old.rec != t.rec {
		releaseLog(q.log, old.rec)
	}
	q.tried[first] = t
}

// inFlight reports whether seq lies between the first and last numbers of
// a batch in flight. A row there that the batch does not hold (delivered
// after the batch formed) waits for it: batches never overlap.
func inFlight(flight []*inflight, seq uint64) bool {
	for _, b := range flight {
		if seq >= b.rows[0].seq && seq <= b.rows[len(b.rows)-1].seq {
			return true
		}
	}
	return false
}

// ackRows removes the rows the drainer settled, unless something else
// removed them meanwhile, and delivers once. Their records are released
// from the queue log a few hundred at a time: one lock of the log each,
// not one per row.
func (q *queue) ackRows(rows []row, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var buf [256]uint64
	records := buf[:0]
	for _, r := range rows {
		if q.msgs.get(r.seq) != r.m {
			continue
		}
		q.stats.Acked++
		if records = append(records, q.removeKeepRecordLocked(r.seq, r.m)); len(records) == cap(records) {
			releaseLog(q.log, records...)
			records = records[:0]
		}
	}
	releaseLog(q.log, records...)
	q.deliverLocked(now)
}

// abandon gives up batch b when the drainer stops (this member no longer
// dispatches the queue) and ends its span: its rows go back to the queue
// and on to the next dispatcher. With tried (an attempt of it may have
// landed) the next dispatcher sends them as the same batch first
// (queue.tried), and kept reports whether b's mark in the queue log went
// back to the queue with it (else the caller releases it).
func (d *drainer) abandon(b *inflight, tried bool) (kept bool) {
	if tried {
		kept = d.q.markTried(b.rows, d.m.clock.Now(), b.rec)
	}
	if b.span != nil {
		b.span.SetAttributes(attribute.Int("chute.insert.attempts", b.attempts))
		b.span.SetStatus(otelcodes.Error, "handed over to another dispatcher before it was inserted")
		b.span.End()
		b.span = nil
	}
	return kept
}

// drop acknowledges rows handled by an insert.
func (d *drainer) drop(done []row) {
	d.q.ackRows(done, d.m.clock.Now())
	d.m.flushReleases(d.q) // the backup drops its copies now, not at the next round
}

// endpoint returns the server the next insert goes to (m.servers), with
// the cluster's settings and the queue's, and the database; false when
// there is none: no usable URL (wait 0: pause for a backoff), or every
// server down (wait: until the first is up again).
func (d *drainer) endpoint(set Settings) (ep sink.Endpoint, db string, wait time.Duration, ok bool) {
	m := d.m
	raw := ""
	if m.cfg.ClickHouse != nil {
		raw, db = m.cfg.ClickHouse()
	}
	eps, err := sink.ParseURLs(raw)
	if errors.Is(err, sink.ErrNoURL) {
		d.warnState(sink.ClassConfig, "no clickhouse_url: rows of ClickHouse queues stay queued", "queue", d.q.name)
		return sink.Endpoint{}, db, 0, false
	}
	if err != nil {
		d.warnState(sink.ClassConfig, "clickhouse_url cannot be used; rows stay queued", "queue", d.q.name, "err", err.Error())
		return sink.Endpoint{}, db, 0, false
	}
	m.servers.Set(eps)
	ep, wait, _ = m.servers.Pick()
	if wait > 0 {
		return sink.Endpoint{}, db, wait, false
	}
	return d.attach(ep, set), db, 0, true
}

// attach gives ep the TLS config, settings and compression of this
// queue's inserts.
func (d *drainer) attach(ep sink.Endpoint, set Settings) sink.Endpoint {
	m := d.m
	var cluster sink.Settings
	compression := sink.CompressionNone
	if m.cfg.ClickHouseOptions != nil {
		cluster, compression = m.cfg.ClickHouseOptions()
	}
	var tlsCfg *tls.Config
	if m.cfg.ClickHouseTLS != nil {
		tlsCfg = m.cfg.ClickHouseTLS()
	}
	ep.TLSConfig, ep.Settings, ep.Compression = tlsCfg, cluster.Override(set.Insert), compression
	return ep
}

// insert sends batch b, first to ep, until it is settled (its rows
// inserted, or dead letters) or the drainer stops, pausing between tries
// with its own backoff. A bisection that leaves rows unsettled pauses
// too before it returns, so those rows wait before they form a batch
// again.
func (d *drainer) insert(b *inflight, ep sink.Endpoint) {
	if b.rec == 0 || b.again {
		// A tried batch formed again gets a record of the rows it has
		// now: its mark's may name more (it went with what came within
		// triedWait), or name its first row only (recMark), which a
		// restart would read as the rows after it, numbered anew.
		if rec := d.m.persistTried(context.Background(), d.q.name, b.rows); rec != 0 || b.rec == 0 {
			d.m.release(b.rec)
			b.rec = rec
		}
	}
	d.m.markOnBackup(d.q, b.rows)
	kept := false // the mark went back to the queue (abandon)
	defer func(first uint64) {
		d.q.unmarkSent(first)
		if !kept {
			d.m.release(b.rec)
		}
	}(b.rows[0].seq)
	set := d.m.settingsOf(d.q.name)
	bo := backoff.Backoff{Min: set.RetryMin, Max: set.RetryMax}
	for {
		if d.fenced() {
			kept = d.abandon(b, b.attempts > 0 || b.again)
			return
		}
		settled, progress, wait := d.send(b, ep, set)
		if settled && progress {
			return
		}
		set = d.m.settingsOf(d.q.name)
		bo.Min, bo.Max = set.RetryMin, set.RetryMax
		if wait <= 0 {
			wait = bo.Next()
		}
		if !d.sleep(wait) {
			kept = d.abandon(b, !settled) // settled: what is left of a bisection or a split is no batch
			return
		}
		if settled {
			return
		}
		for {
			var ok bool
			if ep, _, wait, ok = d.endpoint(set); ok {
				break
			}
			if wait <= 0 {
				wait = bo.Next()
			}
			if !d.sleep(wait) {
				kept = d.abandon(b, true)
				return
			}
		}
	}
}

// send tries batch b once on each server that is up, from ep on, and
// settles its rows. It reports whether the batch is settled (inserted,
// or bisected: what bisection left unsettled forms a later batch),
// whether that made progress (false: pause before anything else), and,
// when every server is down, how long until the first is up again (0:
// pause for the backoff).
//
// A transient failure marks the server down and the same batch goes to
// the next one at once, each server tried at most once per call; data
// and config errors are the table's and go no further.
func (d *drainer) send(b *inflight, ep sink.Endpoint, set Settings) (settled, progress bool, wait time.Duration) {
	m := d.m
	db := ""
	if m.cfg.ClickHouse != nil {
		_, db = m.cfg.ClickHouse()
	}
	target := sink.Target(db, d.table)
	var tried []string
	for {
		b.attempts++
		ctx, cancel, ran := d.insertContext(context.Background())
		tok := ""
		if !b.untokened {
			var asked bool
			tok, asked = d.token(ctx, ep, b.rows, nil)
			b.untokened = !asked
		}
		res := m.sink.InsertFrom(ctx, ep, target, b.values, b.reader, tok)
		d.timed(target, ep, res, ran)
		if res.Landed {
			res = d.viewFailed(target, ep, len(b.rows), res)
		}
		if tok != "" && res.Code == codeUnknownSetting && strings.Contains(res.Message, sink.TokenSetting) {
			// Another server at the address (a rollback): asked again.
			m.mu.Lock()
			delete(m.tokenSupport, ep.Addr)
			m.mu.Unlock()
		}
		if res.Class == sink.ClassData && !res.NamesRow() {
			res = d.blameRequest(ctx, ep, target, res)
		}
		down := m.servers.Record(ep.Addr, res)
		if res.Class == sink.ClassOK || res.Class == sink.ClassData {
			d.failing.Store(false)
		}
		attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("table", b.label), attribute.String("outcome", res.Class.String())))
		m.inserts.duration.Record(ctx, res.Duration.Seconds(), attrs)
		if res.Class == sink.ClassTransient || res.Class == sink.ClassConfig {
			m.inserts.retries.Add(ctx, 1, attrs)
		}
		switch res.Class {
		case sink.ClassOK:
			d.drop(b.rows)
			d.rowCap.landed(len(b.rows), set.BatchRows)
			d.recovered(target)
			m.inserts.inserted(ctx, b.label, len(b.rows), b.bytes)
			m.inserts.batches.Add(ctx, 1, metric.WithAttributes(attribute.String("table", b.label), attribute.String("outcome", "ok")))
			endInsert(b.span, b.attempts, res, 0)
			b.span = nil
			cancel()
			return true, true, 0
		case sink.ClassData:
			insertAttempt(b.span, "clickhouse.refused", b.attempts, len(b.rows), res)
			cancel()
			ok := d.bisect(ep, target, b, res)
			b.span = nil // bisect ended it
			return true, ok, 0
		}
		cancel()
		d.setLastError(target, res)
		if res.Class == sink.ClassTransient && down > 0 {
			tried = append(tried, ep.Addr)
			next, wait, ok := m.servers.Pick(tried...)
			if ok && wait == 0 {
				insertAttempt(b.span, "clickhouse.failover", b.attempts, len(b.rows), res)
				m.log.Warn("clickhouse server failed a batch; sending it to the next one", "queue", d.q.name, "table", target,
					"endpoint", ep.String(), "down_for", down, "next", next.String(), "code", res.Code, "status", res.Status, "err", res.Message)
				ep = d.attach(next, set)
				continue
			}
			insertAttempt(b.span, "clickhouse.retry", b.attempts, len(b.rows), res)
			d.failing.Store(true)
			_, wait, _ = m.servers.Pick()
			d.warnState(res.Class, "insert failed and every clickhouse server is down; retrying", "queue", d.q.name, "table", target,
				"endpoint", ep.String(), "retry_in", wait, "code", res.Code, "status", res.Status, "err", res.Message)
			return false, false, wait
		}
		if res.OverQueryLimit() && len(b.rows) > 1 {
			if b.limited++; b.limited >= splitAfter {
				d.split(b, target, ep, res)
				return true, false, 0 // a pause, then the rows form smaller batches
			}
		}
		insertAttempt(b.span, "clickhouse.retry", b.attempts, len(b.rows), res)
		d.failing.Store(true)
		d.warnState(res.Class, "insert failed; retrying", "queue", d.q.name, "table", target,
			"endpoint", ep.String(), "code", res.Code, "status", res.Status, "err", res.Message)
		return false, false, 0
	}
}

// split gives up batch b, which ClickHouse's limits of one query refused
// splitAfter times (res the last answer): its rows stay queued, and the
// queue's batches are capped at half of it (rowCap).
func (d *drainer) split(b *inflight, target string, ep sink.Endpoint, res sink.Result) {
	m := d.m
	next := d.rowCap.refused(len(b.rows))
	d.failing.Store(true)
	m.inserts.batches.Add(context.Background(), 1, metric.WithAttributes(attribute.String("table", b.label), attribute.String("outcome", "retry")))
	endInsert(b.span, b.attempts, res, 0)
	b.span = nil
	d.warnState(res.Class, "insert over ClickHouse's limits of one query; its rows go again in smaller batches", "queue", d.q.name, "table", target,
		"endpoint", ep.String(), "rows", len(b.rows), "next_rows", next, "code", res.Code, "err", res.Message)
}

// viewFailed returns res, an error a materialized view of the table
// raised once the rows were in it (sink.Result.Landed), as the success
// it is for the queue's table: sent again, or bisected into dead letters,
// the rows would be in the table twice or more. The view misses them:
// logged, and kept as the queue's last insert error for /status.
func (d *drainer) viewFailed(target string, ep sink.Endpoint, rows int, res sink.Result) sink.Result {
	m := d.m
	d.setLastError(target, res)
	m.log.Log(context.Background(), m.warns.level("view "+d.q.name, m.clock.Now()),
		"rows inserted, but a materialized view of the table failed on them: the view misses them", "queue", d.q.name, "table", target,
		"endpoint", ep.String(), "rows", rows, "code", res.Code, "err", res.Message)
	return sink.Result{Status: res.Status, Class: sink.ClassOK, Duration: res.Duration, WireBytes: res.WireBytes}
}

// blameRequest returns res, a data error of a batch that names no row,
// as a config error when the same insert with no row is refused too: the
// request is at fault (a queue's insert setting the server cannot parse,
// whose answer is a parse error, 18.16's code 72), and bisecting would
// send every row of the batch to the dead letters. The rows stay queued
// and are tried again; /status and the log say why.
func (d *drainer) blameRequest(ctx context.Context, ep sink.Endpoint, target string, res sink.Result) sink.Result {
	probe := d.m.sink.Insert(ctx, ep, target, nil, "")
	if probe.Class == sink.ClassOK {
		return res
	}
	res.Class = sink.ClassConfig
	res.Message += " (an insert with no row is refused too: check the queue's insert settings)"
	return res
}

// token returns the insert_deduplication_token of rows (idx: the
// indexes of b's rows it covers, ascending; nil: all of them): the queue,
// a digest of the rows' message ids in order, and their count (rowsToken),
// the same at every attempt and on every member that sends the same rows,
// so that a batch sent again after a lost answer is not stored twice,
// even by the next dispatcher after a hand-over (handed-over batches keep
// their rows, queue.go tried); "" when the server does not know the
// setting (ClickHouse before 22.2, Debian's 18.16 among them), which is
// asked once per server. asked is false when the server could not be
// asked (the token is "" then, and the question is asked again for the
// next batch).
func (d *drainer) token(ctx context.Context, ep sink.Endpoint, rows []row, idx []int) (tok string, asked bool) {
	m := d.m
	m.mu.Lock()
	known, asked := m.tokenSupport[ep.Addr]
	m.mu.Unlock()
	if !asked {
		ok, err := m.sink.HasSetting(ctx, ep, sink.TokenSetting)
		if err != nil {
			return "", false
		}
		known = ok
		m.mu.Lock()
		m.tokenSupport[ep.Addr] = ok
		m.mu.Unlock()
	}
	if !known || len(rows) == 0 {
		return "", true
	}
	return rowsToken(d.q.name, rows, idx), true
}

// rowsToken is the deduplication token of rows (idx: the indexes of the
// rows it covers, ascending; nil: all): "<queue>:<digest>:<count>", the
// digest the first 128 bits of SHA-256 over the rows' message ids in
// order. Ids are unique in the cluster and a message's value never
// changes, so equal tokens are equal rows in the same order, whichever
// member formed the batch and whatever numbers it gave them. (Numbers
// are not: two members claiming a queue at once both number from the
// same floor, and a token of numbers would pass a batch of one for the
// other's, which ClickHouse then drops.)
func rowsToken(queue string, rows []row, idx []int) string {
	h := sha256.New()
	var buf [64 * 16]byte
	n, count := 0, len(rows)
	put := func(id MsgID) {
		binary.LittleEndian.PutUint64(buf[n:], id.Origin)
		binary.LittleEndian.PutUint64(buf[n+8:], id.N)
		if n += 16; n == len(buf) {
			h.Write(buf[:])
			n = 0
		}
	}
	if idx == nil {
		for _, r := range rows {
			put(r.m.id)
		}
	} else {
		count = len(idx)
		for _, i := range idx {
			put(rows[i].m.id)
		}
	}
	h.Write(buf[:n])
	var sum [sha256.Size]byte
	return queue + ":" + hex.EncodeToString(h.Sum(sum[:0])[:16]) + ":" + strconv.Itoa(count)
}

// codeUnknownSetting is ClickHouse's UNKNOWN_SETTING.
const codeUnknownSetting = 115

// partToken returns the deduplication token of the part idx (indexes into
// b.rows, ascending) of a bisection of b: its rows' own (rowsToken), so
// that no two parts share one. Without one, a table that deduplicates
// (Replicated*MergeTree, non_replicated_deduplication_window) took two
// parts of equal rows for one and dropped the second, which was counted
// inserted. "" when b goes without tokens.
func (d *drainer) partToken(ctx context.Context, ep sink.Endpoint, b *inflight, idx []int) string {
	if b.untokened || len(idx) == 0 {
		return ""
	}
	tok, _ := d.token(ctx, ep, b.rows, idx)
	return tok
}

// bisect finds the rows of batch b ClickHouse refuses (refusal was its
// answer to the whole batch), inserts the others, turns the refused ones
// into dead letters (dlq.go), and ends the batch's span. Rows whose dead
// letter a NOSPACE alarm refuses stay queued, and bisect reports no
// progress, so that they are tried again after a pause.
func (d *drainer) bisect(ep sink.Endpoint, target string, b *inflight, refusal sink.Result) bool {
	m := d.m
	rows := b.rows
	last := refusal
	// A bisection makes a request per refused row, or more: each request
	// gets an insert's own bound, not a share of the one the batch was
	// first sent with, which a long bisection on a slow machine outlived.
	// A request cut by a deadline may still have been written, and its
	// rows, left unsettled, would go in twice. The drainer stopping ends
	// the bisection between requests, never during one.
	ctx, stop := d.stopContext()
	defer stop()
	insert := func(ctx context.Context, idx []int, part [][]byte) sink.Result {
		b.attempts++
		rctx, cancel, ran := d.insertContext(context.WithoutCancel(ctx))
		defer cancel()
		last = m.sink.InsertFrom(rctx, ep, target, part, b.reader, d.partToken(rctx, ep, b, idx))
		d.timed(target, ep, last, ran)
		if last.Landed {
			last = d.viewFailed(target, ep, len(part), last)
		}
		if b.span != nil {
			b.span.AddEvent("clickhouse.bisect", trace.WithAttributes(attribute.Int("chute.batch.rows", len(part)),
				attribute.String("chute.insert.outcome", last.Class.String()), attribute.Int("db.response.status_code", last.Code)))
		}
		return last
	}
	refused, err := sink.Bisect(ctx, insert, b.values, refusal)
	keep := make(map[int]bool) // rows neither inserted nor refused: they stay queued
	var stopped *sink.BisectError
	if errors.As(err, &stopped) {
		for _, i := range stopped.Unsettled {
			keep[i] = true
		}
	}
	d.lettersMu.Lock()
	d.label = b.label
	waiting := d.storeLetters(ctx, rows, refused, target, ep)
	d.lettersMu.Unlock()
	done := make([]row, 0, len(rows))
	for i, r := range rows {
		if !keep[i] && !waiting[i] {
			done = append(done, r)
		}
	}
	d.drop(done)
	n, nbytes := insertedRows(rows, keep, refused)
	m.inserts.inserted(ctx, b.label, n, nbytes)
	if len(refused) > 0 {
		d.setLastError(target, refused[len(refused)-1].Result)
	}
	outcome := "ok"
	switch {
	case err != nil, len(waiting) > 0:
		outcome = "retry"
	case len(refused) > 0:
		outcome = "dead_letters"
	}
	m.inserts.batches.Add(ctx, 1, metric.WithAttributes(attribute.String("table", b.label), attribute.String("outcome", outcome)))
	if err != nil {
		class := sink.ClassTransient
		if stopped != nil {
			class = stopped.Result.Class
		}
		endInsert(b.span, b.attempts, last, len(refused))
		if errors.Is(err, context.Canceled) {
			// The drainer stops (a handover, a shutdown): ClickHouse
			// did not fail.
			m.log.Info("isolating refused rows stopped with the queue's drainer; the rest stay queued", "queue", d.q.name, "table", target, "rows", len(keep))
			return false
		}
		d.warnState(class, "insert failed while isolating refused rows; retrying the rest", "queue", d.q.name, "table", target, "err", err.Error())
		return false
	}
	endInsert(b.span, b.attempts, sink.Result{Class: sink.ClassOK, Status: last.Status}, len(refused))
	return len(waiting) == 0 // rows waiting for space: tried again after a pause
}

// insertedRows is the number and the request bytes (value and newline)
// of the rows a bisection put in: neither kept queued nor refused.
func insertedRows(rows []row, keep map[int]bool, refused []sink.Refused) (n, bytes int) {
	ref := make(map[int]bool, len(refused))
	for _, r := range refused {
		ref[r.Index] = true
	}
	for i, r := range rows {
		if !keep[i] && !ref[i] {
			n++
			bytes += len(r.m.value) + 1
		}
	}
	return n, bytes
}

// setLastError keeps a failed insert for /status.
func (d *drainer) setLastError(target string, res sink.Result) {
	e := &InsertError{Time: d.m.clock.Now().UTC(), Table: target, Class: res.Class.String(), Code: res.Code, Status: res.Status, Message: res.Message}
	d.q.mu.Lock()
	d.q.lastInsertError = e
	d.q.mu.Unlock()
}

// warnState logs a failure loudly once per change of state, then at debug.
func (d *drainer) warnState(class sink.Class, msg string, args ...any) {
	d.classMu.Lock()
	defer d.classMu.Unlock()
	if d.lastClass != class {
		d.m.log.Warn(msg, args...)
		d.lastClass = class
		return
	}
	d.m.log.Debug(msg, args...)
}

// recovered logs the end of a failure state.
func (d *drainer) recovered(target string) {
	d.classMu.Lock()
	defer d.classMu.Unlock()
	if d.lastClass != sink.ClassOK {
		d.m.log.Info("inserts into ClickHouse succeed again", "queue", d.q.name, "table", target)
		d.lastClass = sink.ClassOK
	}
}
