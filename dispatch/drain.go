package dispatch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"chute/gossip"
	"chute/internal/backoff"
	"chute/sink"
)

// A drainer empties one ClickHouse queue (ch:{table}, clickhouse:{table})
// into its table on the queue's dispatcher. It is the queue's only
// consumer: the queue delivers to it like to any consumer (bounded by its
// prefetch), it inserts one batch at a time (rows that arrive meanwhile form
// the next batch: group commit), at most one insert per BatchInterval, and
// acknowledges rows once ClickHouse holds them or once they are dead
// letters. A batch a server fails with a transient error goes to the next
// server of the list that is up at once (insertBatch); failed batches
// are retried on a timer with capped exponential backoff and jitter, or,
// when every server is down, when the first is up again; no put is
// needed to wake it. Its rows never expire
// back to the queue while it retries.
//
// The drainer keeps no list of its rows: they are the queue's messages in
// state msgDrained, and a batch is the oldest of them by number, read
// under the queue's lock (queue.drainBatch). A row's tail and value never
// change once queued, so the drainer reads them without the lock.
type drainer struct {
	m     *Manager
	q     *queue
	table string
	c     *consumer

	ready chan struct{} // capacity 1: rows arrived
	sweep chan struct{} // capacity 1: time to look for dead letters to delete (dlq.go)

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	detach   sync.Once

	// Owned by the loop.
	lastInsert time.Time  // start of the last insert
	lastClass  sink.Class // of the last failed insert, to log state changes once
	cur        *inflight  // the batch being inserted; nil between batches
	letters    letterBook // the queue's dead letters
	label      string     // the table label of the batch's metrics ("db.table" or "_other")
}

// inflight is the batch being inserted: fixed from its first attempt to
// its last, so a retry sends the same rows in the same order (and the same
// deduplication token), and one span covers every attempt.
type inflight struct {
	rows     []row
	bytes    int
	epoch    uint64 // of the queue's record when the batch was formed, for its token
	attempts int
	span     trace.Span // nil when tracing is off
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
// dispatcher. Callers do not hold handoverMu.
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
	if _, running := m.drainers[q.name]; running {
		m.mu.Unlock()
		return
	}
	d := &drainer{m: m, q: q, table: table, ready: make(chan struct{}, 1), sweep: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
// it) and returns once it has: an insert in flight is finished and settled
// first, so its rows are never handed over while ClickHouse takes them.
// Concurrent callers all wait. The rows it held go back to the queue, which
// hands them over.
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

// run inserts batches until stopped.
func (d *drainer) run() {
	defer d.abandon()
	set := d.m.settingsOf(d.q.name)
	b := backoff.Backoff{Min: set.RetryMin, Max: set.RetryMax}
	for {
		select {
		case <-d.stop:
			return
		case <-d.m.stop:
			return
		case <-d.sweep:
			d.sweepLetters()
			continue
		case <-d.ready:
		}
		for d.pending() > 0 {
			// Inserts may follow each other without a sleep (one took the
			// whole interval): look for stop before each.
			if d.stopped() {
				return
			}
			select {
			case <-d.sweep:
				d.sweepLetters()
			default:
			}
			set = d.m.settingsOf(d.q.name) // a changed settings key applies at the next batch
			// The interval runs from one insert's start to the next's: at
			// most one insert per interval, and a row that comes while an
			// insert is in flight waits for the interval's rest, not for a
			// whole interval after that insert.
			if wait := set.BatchInterval - d.m.clock.Since(d.lastInsert); wait > 0 && !d.m.leaving() {
				if !d.sleep(wait, d.m.flushing) { // cut short when the member leaves
					return
				}
			}
			d.lastInsert = d.m.clock.Now()
			ok, wait := d.insertBatch()
			if ok {
				b.Reset()
				continue
			}
			// Retried on a timer, without any put to wake it: when
			// every server is down, once the first is up again.
			b.Min, b.Max = set.RetryMin, set.RetryMax
			if wait <= 0 {
				wait = b.Next()
			}
			if !d.sleep(wait, nil) {
				return
			}
		}
	}
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

// sleep waits dur, or until cut is closed (nil: never), and reports
// false when the drainer was told to stop meanwhile. It sweeps dead
// letters when asked meanwhile.
func (d *drainer) sleep(dur time.Duration, cut <-chan struct{}) bool {
	t := d.m.clock.NewTimer(dur)
	defer t.Stop()
	for {
		select {
		case <-t.Chan():
			return true
		case <-cut:
			return true
		case <-d.sweep:
			d.sweepLetters()
		case <-d.stop:
			return false
		case <-d.m.stop:
			return false
		}
	}
}

// leaving reports whether the member is leaving (Handoff ran): drainers
// insert without waiting for their batch interval.
func (m *Manager) leaving() bool {
	select {
	case <-m.flushing:
		return true
	default:
		return false
	}
}

// pending is how many rows were delivered to the drainer and are not
// settled yet, the batch in flight included.
func (d *drainer) pending() int {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	return d.c.drained
}

// drainBatch returns the oldest rows delivered to the drainer c, by
// number, within the caps, without removing them, and their bytes in the
// request.
func (q *queue) drainBatch(c *consumer, set Settings) ([]row, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.drained == 0 {
		return nil, 0
	}
	rows, bytes := make([]row, 0, min(c.drained, set.BatchRows)), 0
	for seq, m := range q.msgs.all() {
		if len(rows) == set.BatchRows || len(rows) == c.drained {
			break
		}
		if m.state != msgDrained {
			continue // ready: beyond the drainer's prefetch
		}
		if len(rows) > 0 && bytes+len(m.value)+1 > set.BatchBytes {
			break
		}
		bytes += len(m.value) + 1
		rows = append(rows, row{seq: seq, m: m})
	}
	return rows, bytes
}

// ackRows removes the rows the drainer settled, unless something else
// removed them meanwhile, and delivers once.
func (q *queue) ackRows(rows []row, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range rows {
		if q.msgs.get(r.seq) == r.m {
			q.removeLocked(r.seq, r.m)
		}
	}
	q.deliverLocked(now)
}

// abandon ends the span of a batch left unfinished when the drainer stops
// (this member no longer dispatches the queue): its rows go back to the
// queue and on to the next dispatcher, as a new batch.
func (d *drainer) abandon() {
	if d.cur != nil && d.cur.span != nil {
		d.cur.span.SetAttributes(attribute.Int("chute.insert.attempts", d.cur.attempts))
		d.cur.span.SetStatus(otelcodes.Error, "handed over to another dispatcher before it was inserted")
		d.cur.span.End()
	}
	d.cur = nil
}

// drop acknowledges rows handled by an insert.
func (d *drainer) drop(done []row) {
	d.q.ackRows(done, d.m.clock.Now())
	d.m.flushReleases(d.q) // the backup drops its copies now, not at the next round
}

// insertBatch sends one batch and settles its rows; it reports whether
// the queue made progress (false: retry after a pause) and, when every
// server is down, how long until the first is up again (0: the caller
// pauses for its backoff).
//
// The batch goes to the next server that is up (m.servers). A transient
// failure marks the server down and the same batch goes to the next one
// at once, each server tried at most once per call; data and config
// errors are the table's and go no further.
func (d *drainer) insertBatch() (bool, time.Duration) {
	m := d.m
	raw, db := "", ""
	if m.cfg.ClickHouse != nil {
		raw, db = m.cfg.ClickHouse()
	}
	eps, err := sink.ParseURLs(raw)
	if errors.Is(err, sink.ErrNoURL) {
		d.warnState(sink.ClassConfig, "no clickhouse_url: rows of ClickHouse queues stay queued", "queue", d.q.name)
		return false, 0
	}
	if err != nil {
		d.warnState(sink.ClassConfig, "clickhouse_url cannot be used; rows stay queued", "queue", d.q.name, "err", err.Error())
		return false, 0
	}
	m.servers.Set(eps)
	set := m.settingsOf(d.q.name)
	var cluster sink.Settings
	compression := sink.CompressionNone
	if m.cfg.ClickHouseOptions != nil {
		cluster, compression = m.cfg.ClickHouseOptions()
	}
	var tlsCfg *tls.Config
	if m.cfg.ClickHouseTLS != nil {
		tlsCfg = m.cfg.ClickHouseTLS()
	}
	attach := func(ep sink.Endpoint) sink.Endpoint {
		ep.TLSConfig, ep.Settings, ep.Compression = tlsCfg, cluster.Override(set.Insert), compression
		return ep
	}
	ep, wait, _ := m.servers.Pick()
	if wait > 0 {
		return false, wait
	}
	ep = attach(ep)
	if d.cur == nil {
		rows, bytes := d.q.drainBatch(d.c, set)
		if len(rows) == 0 {
			return true, 0
		}
		rec, _ := m.record(d.q.name)
		d.cur = &inflight{rows: rows, bytes: bytes, epoch: rec.Epoch, span: d.startInsert(rows, bytes, db, ep, m.clock.Now())}
	}
	b := d.cur
	target := sink.Target(db, d.table)
	d.label = m.inserts.tables.label(sink.SplitTable(db, d.table))
	values := make([][]byte, len(b.rows))
	for i, r := range b.rows {
		values[i] = r.m.value
	}
	var tried []string
	for {
		b.attempts++
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.InsertTimeout+5*time.Second)
		res := m.sink.Insert(ctx, ep, target, values, d.token(ctx, ep, b.epoch, b.rows))
		down := m.servers.Record(ep.Addr, res)
		attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("table", d.label), attribute.String("outcome", res.Class.String())))
		m.inserts.duration.Record(ctx, res.Duration.Seconds(), attrs)
		if res.Class == sink.ClassTransient || res.Class == sink.ClassConfig {
			m.inserts.retries.Add(ctx, 1, attrs)
		}
		switch res.Class {
		case sink.ClassOK:
			d.drop(b.rows)
			d.recovered(target)
			m.inserts.inserted(ctx, d.label, len(b.rows), b.bytes)
			m.inserts.batches.Add(ctx, 1, metric.WithAttributes(attribute.String("table", d.label), attribute.String("outcome", "ok")))
			endInsert(b.span, b.attempts, res, 0)
			d.cur = nil
			cancel()
			return true, 0
		case sink.ClassData:
			insertAttempt(b.span, "clickhouse.refused", b.attempts, len(b.rows), res)
			ok := d.bisect(ctx, ep, target, b, res)
			d.cur = nil // what bisection left unsettled forms the next batch
			cancel()
			return ok, 0
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
				ep = attach(next)
				continue
			}
			insertAttempt(b.span, "clickhouse.retry", b.attempts, len(b.rows), res)
			_, wait, _ = m.servers.Pick()
			d.warnState(res.Class, "insert failed and every clickhouse server is down; retrying", "queue", d.q.name, "table", target,
				"endpoint", ep.String(), "retry_in", wait, "code", res.Code, "status", res.Status, "err", res.Message)
			return false, wait
		}
		insertAttempt(b.span, "clickhouse.retry", b.attempts, len(b.rows), res)
		d.warnState(res.Class, "insert failed; retrying", "queue", d.q.name, "table", target,
			"endpoint", ep.String(), "code", res.Code, "status", res.Status, "err", res.Message)
		return false, 0
	}
}

// token returns the batch's insert_deduplication_token, derived from the
// queue, the epoch when the batch was formed, this member and the batch's
// first and last numbers, the same at every attempt, so that a batch sent again
// after a lost answer is not stored twice; "" when the server
// does not know the setting (ClickHouse before 22.2, Debian's 18.16
// among them), which is asked once per server.
func (d *drainer) token(ctx context.Context, ep sink.Endpoint, epoch uint64, rows []row) string {
	m := d.m
	m.mu.Lock()
	known, asked := m.tokenSupport[ep.Addr]
	m.mu.Unlock()
	if !asked {
		ok, err := m.sink.HasSetting(ctx, ep, sink.TokenSetting)
		if err != nil {
			return "" // ask again at the next batch
		}
		known = ok
		m.mu.Lock()
		m.tokenSupport[ep.Addr] = ok
		m.mu.Unlock()
	}
	if !known || len(rows) == 0 {
		return ""
	}
	// The member too: two members claiming a queue at once both take
	// epoch e+1 and number from the same floor, and a batch of the one
	// that lost must not pass for one of the winner's.
	return fmt.Sprintf("%s:%d:%s:%d:%d", d.q.name, epoch, gossip.ID(m.cfg.MemberID).String(), rows[0].seq, rows[len(rows)-1].seq)
}

// bisect finds the rows of batch b ClickHouse refuses (refusal was its
// answer to the whole batch), inserts the others, turns the refused ones
// into dead letters (dlq.go), and ends the batch's span. Rows whose dead
// letter a NOSPACE alarm refuses stay queued, and bisect reports no
// progress, so that they are tried again after a pause.
func (d *drainer) bisect(ctx context.Context, ep sink.Endpoint, target string, b *inflight, refusal sink.Result) bool {
	m := d.m
	rows := b.rows
	values := make([][]byte, len(rows))
	for i, r := range rows {
		values[i] = r.m.value
	}
	last := refusal
	insert := func(ctx context.Context, part [][]byte) sink.Result {
		b.attempts++
		last = m.sink.Insert(ctx, ep, target, part, "")
		if b.span != nil {
			b.span.AddEvent("clickhouse.bisect", trace.WithAttributes(attribute.Int("chute.batch.rows", len(part)),
				attribute.String("chute.insert.outcome", last.Class.String()), attribute.Int("db.response.status_code", last.Code)))
		}
		return last
	}
	refused, err := sink.Bisect(ctx, insert, values, refusal)
	keep := make(map[int]bool) // rows neither inserted nor refused: they stay queued
	var stopped *sink.BisectError
	if errors.As(err, &stopped) {
		for _, i := range stopped.Unsettled {
			keep[i] = true
		}
	}
	waiting := d.storeLetters(ctx, rows, refused, target, ep)
	done := make([]row, 0, len(rows))
	for i, r := range rows {
		if !keep[i] && !waiting[i] {
			done = append(done, r)
		}
	}
	d.drop(done)
	n, nbytes := insertedRows(rows, keep, refused)
	m.inserts.inserted(ctx, d.label, n, nbytes)
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
	m.inserts.batches.Add(ctx, 1, metric.WithAttributes(attribute.String("table", d.label), attribute.String("outcome", outcome)))
	if err != nil {
		class := sink.ClassTransient
		if stopped != nil {
			class = stopped.Result.Class
		}
		endInsert(b.span, b.attempts, last, len(refused))
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
	if d.lastClass != class {
		d.m.log.Warn(msg, args...)
		d.lastClass = class
		return
	}
	d.m.log.Debug(msg, args...)
}

// recovered logs the end of a failure state.
func (d *drainer) recovered(target string) {
	if d.lastClass != sink.ClassOK {
		d.m.log.Info("inserts into ClickHouse succeed again", "queue", d.q.name, "table", target)
		d.lastClass = sink.ClassOK
	}
}
