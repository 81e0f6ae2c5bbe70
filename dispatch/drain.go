package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"chute/sink"
)

// A drainer empties one ClickHouse queue (ch:{table}, clickhouse:{table})
// into its table on the queue's dispatcher. It is the queue's only
// consumer: the queue delivers to it like to any consumer (bounded by its
// prefetch), it inserts one batch at a time (rows that arrive meanwhile form
// the next batch: group commit), at most one insert per BatchInterval, and
// acknowledges rows once ClickHouse holds them or once they are dead
// letters. Failed batches are retried on a timer with capped exponential
// backoff and jitter; no put is needed to wake it. Its rows never expire
// back to the queue while it retries.
type drainer struct {
	m     *Manager
	q     *queue
	table string
	c     *consumer

	mu    sync.Mutex // guards rows
	rows  []pendingRow
	ready chan struct{} // capacity 1: rows arrived

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	detach   sync.Once

	// Owned by the loop.
	lastInsert time.Time
	lastClass  sink.Class // of the last failed insert, to log state changes once
}

// pendingRow is a delivered, unacknowledged row.
type pendingRow struct {
	seq   uint64
	tail  string
	value []byte
}

// Deliver implements kv.Deliveries for the drainer's consumer.
func (d *drainer) Deliver(kvs []*mvccpb.KeyValue) {
	d.mu.Lock()
	for _, kv := range kvs {
		k := ParseKey(string(kv.Key))
		d.rows = append(d.rows, pendingRow{seq: k.Seq, tail: k.Tail, value: kv.Value})
	}
	d.mu.Unlock()
	select {
	case d.ready <- struct{}{}:
	default:
	}
}

// ensureDrainer starts the drainer of a ClickHouse queue this member
// dispatches, if it has none.
func (m *Manager) ensureDrainer(q *queue) {
	table, ok := sink.TableOf(q.name)
	if !ok {
		return
	}
	m.mu.Lock()
	if _, running := m.drainers[q.name]; running {
		m.mu.Unlock()
		return
	}
	d := &drainer{m: m, q: q, table: table, ready: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	d.c = &consumer{id: "clickhouse", prefix: "q", out: d, unacked: make(map[uint64]*message), sink: true,
		prefetch: 2 * m.cfg.BatchRows} // one batch in flight, the next one gathering
	m.drainers[q.name] = d
	m.mu.Unlock()
	q.addConsumer(d.c, m.now())
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
	d.detach.Do(func() { d.q.removeConsumer(d.c, m.now()) })
	m.mu.Lock()
	if m.drainers[name] == d {
		delete(m.drainers, name)
	}
	m.mu.Unlock()
}

// run inserts batches until stopped.
func (d *drainer) run() {
	backoff := d.m.cfg.RetryMin
	for {
		select {
		case <-d.stop:
			return
		case <-d.m.stop:
			return
		case <-d.ready:
		}
		for d.pending() > 0 {
			if wait := d.m.cfg.BatchInterval - time.Since(d.lastInsert); wait > 0 {
				if !d.sleep(wait) {
					return
				}
			}
			ok := d.insertBatch()
			d.lastInsert = time.Now()
			if ok {
				backoff = d.m.cfg.RetryMin
				continue
			}
			// Capped exponential backoff with jitter: retried without any
			// put to wake it.
			wait := backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, d.m.cfg.RetryMax)
			if !d.sleep(wait) {
				return
			}
		}
	}
}

func (d *drainer) sleep(dur time.Duration) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.stop:
		return false
	case <-d.m.stop:
		return false
	}
}

func (d *drainer) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.rows)
}

// batch returns the oldest rows within the caps, without removing them.
func (d *drainer) batch() []pendingRow {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, bytes := 0, 0
	for n < len(d.rows) && n < d.m.cfg.BatchRows {
		if n > 0 && bytes+len(d.rows[n].value)+1 > d.m.cfg.BatchBytes {
			break
		}
		bytes += len(d.rows[n].value) + 1
		n++
	}
	return append([]pendingRow(nil), d.rows[:n]...)
}

// drop removes rows handled by an insert and acknowledges them.
func (d *drainer) drop(done map[uint64]bool) {
	d.mu.Lock()
	kept := d.rows[:0]
	for _, r := range d.rows {
		if !done[r.seq] {
			kept = append(kept, r)
		}
	}
	clear(d.rows[len(kept):])
	d.rows = kept
	d.mu.Unlock()
	d.q.ackSeqs(done, d.m.now())
}

// insertBatch sends one batch and settles its rows; it reports whether the
// queue made progress (false: retry after a backoff).
func (d *drainer) insertBatch() bool {
	m := d.m
	raw, db := "", ""
	if m.cfg.ClickHouse != nil {
		raw, db = m.cfg.ClickHouse()
	}
	if raw == "" {
		d.warnState(sink.ClassConfig, "no clickhouse_url: rows of ClickHouse queues stay queued", "queue", d.q.name)
		return false
	}
	ep, err := sink.ParseURL(raw)
	if err != nil {
		d.warnState(sink.ClassConfig, "clickhouse_url cannot be used; rows stay queued", "queue", d.q.name, "err", err.Error())
		return false
	}
	rows := d.batch()
	if len(rows) == 0 {
		return true
	}
	target := sink.Target(db, d.table)
	values := make([][]byte, len(rows))
	for i, r := range rows {
		values[i] = r.value
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.InsertTimeout+5*time.Second)
	defer cancel()
	res := m.sink.Insert(ctx, ep, target, values, d.token(ctx, ep, rows))
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("table", target), attribute.String("outcome", res.Class.String())))
	m.inserts.duration.Record(ctx, res.Duration.Seconds(), attrs)
	if res.Class == sink.ClassTransient || res.Class == sink.ClassConfig {
		m.inserts.retries.Add(ctx, 1, attrs)
	}
	done := make(map[uint64]bool, len(rows))
	switch res.Class {
	case sink.ClassOK:
		for _, r := range rows {
			done[r.seq] = true
		}
		d.drop(done)
		d.recovered(target)
		m.metrics.rowsInserted.Add(uint64(len(rows)))
		return true
	case sink.ClassData:
		return d.bisect(ctx, ep, target, rows)
	default:
		d.warnState(res.Class, "insert failed; retrying", "queue", d.q.name, "table", target,
			"endpoint", ep.String(), "code", res.Code, "status", res.Status, "err", res.Message)
		return false
	}
}

// token returns the batch's insert_deduplication_token, derived from the
// queue, its epoch and the batch's first and last numbers, so that a batch
// sent again after a lost answer is not stored twice; "" when the server
// does not know the setting (ClickHouse before 22.2, Debian's 18.16
// among them), which is asked once per server.
func (d *drainer) token(ctx context.Context, ep sink.Endpoint, rows []pendingRow) string {
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
	rec, _ := m.record(d.q.name)
	return fmt.Sprintf("%s:%d:%d:%d", d.q.name, rec.Epoch, rows[0].seq, rows[len(rows)-1].seq)
}

// bisect finds the rows ClickHouse refuses, inserts the others, and turns
// the refused ones into dead letters.
func (d *drainer) bisect(ctx context.Context, ep sink.Endpoint, target string, rows []pendingRow) bool {
	m := d.m
	values := make([][]byte, len(rows))
	for i, r := range rows {
		values[i] = r.value
	}
	insert := func(ctx context.Context, part [][]byte) sink.Result {
		return m.sink.Insert(ctx, ep, target, part, "")
	}
	refused, err := sink.Bisect(ctx, insert, values)
	settled := len(rows)
	var stopped *sink.BisectError
	if errors.As(err, &stopped) {
		settled = stopped.Settled
	}
	done := make(map[uint64]bool, settled)
	for _, r := range rows[:settled] {
		done[r.seq] = true
	}
	for _, ref := range refused {
		d.deadLetter(rows[ref.Index], target, ref.Result, ep)
	}
	d.drop(done)
	m.metrics.rowsInserted.Add(uint64(settled - len(refused)))
	if err != nil {
		class := sink.ClassTransient
		if stopped != nil {
			class = stopped.Result.Class
		}
		d.warnState(class, "insert failed while isolating refused rows; retrying the rest", "queue", d.q.name, "table", target, "err", err.Error())
		return false
	}
	return true
}

// deadLetter stores a refused row under /q/{name}/dlq/{seq} with
// ClickHouse's reason (redacted).
func (d *drainer) deadLetter(r pendingRow, target string, res sink.Result, ep sink.Endpoint) {
	letter, _ := json.Marshal(struct {
		Table string `json:"table"`
		Key   string `json:"key"`
		Code  int    `json:"code"`
		Error string `json:"error"`
		Row   string `json:"row"`
	}{Table: target, Key: r.tail, Code: res.Code, Error: sink.Redact(res.Message, ep), Row: string(r.value)})
	d.m.records.Put(DeadLetterKey(d.q.name, r.seq), letter)
	d.m.metrics.deadLetters.Add(1)
	d.m.log.Warn("row refused by ClickHouse; stored as a dead letter", "queue", d.q.name, "table", target,
		"seq", r.seq, "code", res.Code, "key", DeadLetterKey(d.q.name, r.seq))
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
