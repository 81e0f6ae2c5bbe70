package dispatch

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// insertMetrics are recorded by the drainers at every insert, and by
// Produce at every put. Their table label is bounded (tableLabels).
type insertMetrics struct {
	duration metric.Float64Histogram // by table and outcome class
	retries  metric.Int64Counter     // failed inserts that will be retried, by table and class
	batches  metric.Int64Counter     // batches settled, by table and outcome
	rows     metric.Int64Counter     // rows inserted, by table
	bytes    metric.Int64Counter     // bytes of the rows inserted, by table
	dead     metric.Int64Counter     // rows stored as dead letters, by table
	// batchRows and batchWait are recorded at each batch's start: its
	// rows, and how long the queue's insert rate held it back.
	batchRows metric.Int64Histogram
	batchWait metric.Float64Histogram
	puts      *putCounts // messages put, by queue and result
	tables    *tableLabels
}

// otherTables is the table label of the tables past the bound.
const otherTables = "_other"

// tableLabels gives the tables this member inserts into the values of
// the table label: "db.table", unquoted, for the first max tables, then
// otherTables for all the others, so that a member inserting into
// thousands of tables exports a bounded number of series. A table keeps
// its label for the life of the process.
type tableLabels struct {
	max  int
	mu   sync.Mutex // guards seen
	seen map[string]bool
}

// label returns the table label of table in database db (unquoted, as
// sink.SplitTable gives them).
func (l *tableLabels) label(db, table string) string {
	name := db + "." + table
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[name] {
		return name
	}
	if len(l.seen) >= l.max {
		return otherTables
	}
	l.seen[name] = true
	return name
}

// inserted counts rows (and their bytes in the request) ClickHouse took
// into the table labelled table.
func (im insertMetrics) inserted(ctx context.Context, table string, rows, bytes int) {
	if rows == 0 {
		return
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attribute.String("table", table)))
	im.rows.Add(ctx, int64(rows), opt)
	im.bytes.Add(ctx, int64(bytes), opt)
}

// deadLettered counts n rows of the table labelled table stored as
// dead letters.
func (im insertMetrics) deadLettered(ctx context.Context, table string, n int) {
	im.dead.Add(ctx, int64(n), metric.WithAttributeSet(attribute.NewSet(attribute.String("table", table))))
}

// putCounts counts the messages put by queue and result, exported as
// the observable counter chute.queue.puts: a put adds to an atomic
// rather than recording through the SDK, which every put would pay.
// Queue names come from clients, a queue per request with request/reply,
// and refused puts name queues that never were: the series of a
// forgotten queue go with it (forget), those of a queue this member
// does not hold once no put counted in them between two sweeps (sweep),
// and past max queue label values the others share queue="_other", as
// tables do (Config.MetricsMaxTables).
type putCounts struct {
	mu     sync.RWMutex // guards m and queues
	m      map[putResult]*putCount
	queues map[string]int // the series in m of each queue label
	max    int
}

// drop deletes the series of queue, forgotten.
func (c *putCounts) drop(queue string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queues[queue] == 0 {
		return
	}
	for k := range c.m {
		if k.queue == queue {
			delete(c.m, k)
		}
	}
	delete(c.queues, queue)
}

// sweep drops the series of the queues that held does not report
// held here and whose counts did not change since the last sweep:
// queues this member only forwarded puts to, or refused puts to (a name
// that never was a queue), and does not hold. forget drops those of the
// queues it held; without this, theirs stayed for good, and past max
// queue labels every queue counted as queue="_other". held is called
// without c.mu.
func (c *putCounts) sweep(held func(queue string) bool) {
	c.mu.RLock()
	names := make([]string, 0, len(c.queues))
	for q := range c.queues {
		if q != otherTables {
			names = append(names, q)
		}
	}
	c.mu.RUnlock()
	gone := make(map[string]bool)
	for _, q := range names {
		if !held(q) {
			gone[q] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, pc := range c.m {
		if n := pc.n.Load(); n != pc.swept {
			pc.swept = n
			delete(gone, k.queue) // counted since: kept for another sweep
		}
	}
	for k := range c.m {
		if gone[k.queue] {
			delete(c.m, k)
		}
	}
	for q := range gone {
		delete(c.queues, q)
	}
}

// putCount is one series of chute.queue.puts.
type putCount struct {
	n    atomic.Int64
	attr metric.ObserveOption
	// swept is n at the last sweep; under putCounts.mu's write lock.
	swept int64
}

// putResult keys the puts counter's series (no allocation to look them
// up).
type putResult struct {
	queue string
	code  codes.Code
}

// countPuts adds n messages put to queue with the outcome err (a gRPC
// status error, nil for OK).
func (im insertMetrics) countPuts(_ context.Context, queue string, err error, n int) {
	k := putResult{queue: queue, code: status.Code(err)}
	c := im.puts
	c.mu.RLock()
	if pc := c.m[k]; pc != nil {
		// Added under the read lock: sweep and drop, which delete series,
		// take the write lock, so a put never lands in a series deleted
		// after it was looked up.
		pc.n.Add(int64(n))
		c.mu.RUnlock()
		return
	}
	c.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	named := len(c.queues)
	if c.queues[otherTables] > 0 {
		named--
	}
	if _, ok := c.queues[k.queue]; !ok && named >= c.max {
		k.queue = otherTables
	}
	pc := c.m[k]
	if pc == nil {
		pc = &putCount{attr: metric.WithAttributeSet(attribute.NewSet(attribute.String("queue", k.queue), attribute.String("result", k.code.String())))}
		c.m[k] = pc
		c.queues[k.queue]++
	}
	pc.n.Add(int64(n))
}

func newInsertMetrics(mp metric.MeterProvider, maxTables int) (insertMetrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter("chute/dispatch")
	d, err := meter.Float64Histogram("chute.clickhouse.insert.duration",
		metric.WithUnit("s"), metric.WithDescription("Duration of ClickHouse inserts, by table and outcome (ok, transient, data, config)."),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	if err != nil {
		return insertMetrics{}, err
	}
	r, err := meter.Int64Counter("chute.clickhouse.retries", metric.WithDescription("Failed inserts retried later, by table and outcome (transient, config)."))
	if err != nil {
		return insertMetrics{}, err
	}
	b, err := meter.Int64Counter("chute.clickhouse.batches", metric.WithDescription(
		"Batches settled, by table and outcome: ok (every row inserted), dead_letters (some rows refused, the others inserted), retry (isolating refused rows failed; the rest form a new batch)."))
	if err != nil {
		return insertMetrics{}, err
	}
	rows, err := meter.Int64Counter("chute.clickhouse.rows.inserted", metric.WithDescription("Rows ClickHouse holds, inserted by this member, by table."))
	if err != nil {
		return insertMetrics{}, err
	}
	bytes, err := meter.Int64Counter("chute.clickhouse.inserted.bytes", metric.WithUnit("By"), metric.WithDescription("Bytes of the rows ClickHouse holds (as sent, a newline each), inserted by this member, by table."))
	if err != nil {
		return insertMetrics{}, err
	}
	dead, err := meter.Int64Counter("chute.clickhouse.dead_letters", metric.WithDescription("Rows ClickHouse refused, stored as dead letters, by table."))
	if err != nil {
		return insertMetrics{}, err
	}
	br, err := meter.Int64Histogram("chute.clickhouse.batch.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows of each batch inserted, by table, counted when it starts."),
		metric.WithExplicitBucketBoundaries(1, 10, 100, 1000, 5000, 10000, 25000, 50000, 100000, 250000, 1000000))
	if err != nil {
		return insertMetrics{}, err
	}
	bw, err := meter.Float64Histogram("chute.clickhouse.batch.wait", metric.WithUnit("s"),
		metric.WithDescription("How long the queue's max_inserts_per_second held each batch back after its batch_interval, by table (0: not at all)."),
		metric.WithExplicitBucketBoundaries(0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return insertMetrics{}, err
	}
	puts := &putCounts{m: make(map[putResult]*putCount), queues: make(map[string]int), max: maxTables}
	p, err := meter.Int64ObservableCounter("chute.queue.puts", metric.WithDescription(
		"Messages put on this member, by queue and result (the gRPC code the producer got: OK, InvalidArgument, ResourceExhausted, ...)."))
	if err != nil {
		return insertMetrics{}, err
	}
	if _, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		puts.mu.RLock()
		defer puts.mu.RUnlock()
		for _, pc := range puts.m {
			o.ObserveInt64(p, pc.n.Load(), pc.attr)
		}
		return nil
	}, p); err != nil {
		return insertMetrics{}, err
	}
	return insertMetrics{duration: d, retries: r, batches: b, rows: rows, bytes: bytes, dead: dead, puts: puts,
		batchRows: br, batchWait: bw,
		tables: &tableLabels{max: maxTables, seen: make(map[string]bool)}}, nil
}

// registerMetrics exports the manager's counters and each queue's state
// as OTel observable instruments, read at every collection (Prometheus
// scrape); recording costs nothing on the hot path.
func (m *Manager) registerMetrics(mp metric.MeterProvider) error {
	meter := mp.Meter("chute/dispatch")
	counter := func(name, desc string) (metric.Int64ObservableCounter, error) {
		return meter.Int64ObservableCounter(name, metric.WithDescription(desc))
	}
	gauge := func(name, unit, desc string) (metric.Int64ObservableGauge, error) {
		return meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	}
	var errs []error
	must := func(i metric.Int64Observable, err error) metric.Int64Observable {
		errs = append(errs, err)
		return i
	}
	depthRows := must(gauge("chute.queue.depth.rows", "{row}", "Messages this member holds for a queue (dispatched or held copies)."))
	depthBytes := must(gauge("chute.queue.depth.bytes", "By", "Bytes of the messages this member holds for a queue."))
	unacked := must(gauge("chute.queue.unacked", "{message}", "Messages delivered and not yet acknowledged."))
	enqueued := must(counter("chute.queue.enqueued", "Messages a queue took on this member (puts and handovers)."))
	delivered := must(counter("chute.queue.delivered", "Deliveries to consumers, redeliveries included."))
	redelivered := must(counter("chute.queue.redelivered", "Deliveries after the first of a message."))
	acked := must(counter("chute.queue.acked", "Messages acknowledged (or inserted into ClickHouse)."))
	refused := must(counter("chute.queue.refused", "Puts this member refused its clients over the byte cap, after waiting for room."))
	waited := must(counter("chute.queue.waited", "Puts of this member's clients that found their queue full and waited for room."))
	forwards := must(counter("chute.queue.forwarded", "Messages forwarded to another member's dispatcher."))
	broadcasts := must(counter("chute.queue.broadcast", "Messages held on every member while their dispatcher was unreachable."))
	elections := must(counter("chute.queue.elections", "Dispatcher claims this member made."))
	handovers := must(counter("chute.queue.handed_over", "Messages handed to a new dispatcher."))
	handoverFailures := must(counter("chute.queue.handover_failures", "Hand-overs of what this member holds that the dispatcher did not take; the messages stay held."))
	passedOver := must(gauge("chute.queue.members_passed_over", "{member}", "Members gossip calls alive that did not answer this member on the peer link, passed over until a ping answers."))
	logBytes := must(gauge("chute.queue_log.bytes", "By", "Bytes of the queue log's files under the data dir: its segments, and deleted ones kept to be written over."))
	logSpare := must(gauge("chute.queue_log.spare_bytes", "By", "Of chute.queue_log.bytes, the deleted segments' files kept to be written over (two at most): no queued message, deleted first when space is short."))
	logRecords := must(gauge("chute.queue_log.records", "{record}", "Live records of the queue log: messages this member keeps on disk."))
	logAppended := must(counter("chute.queue_log.appended", "Records appended to the queue log."))
	logFsyncs := must(counter("chute.queue_log.fsyncs", "Fsyncs of the queue log; appended/fsyncs is the group commit's batch."))
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, q := range m.snapshot() {
			st := q.status()
			opt := metric.WithAttributeSet(attribute.NewSet(attribute.String("queue", q.name)))
			o.ObserveInt64(depthRows, int64(st.Rows+st.Held), opt)
			o.ObserveInt64(depthBytes, st.Bytes, opt)
			o.ObserveInt64(unacked, int64(st.Unacked), opt)
			o.ObserveInt64(enqueued, int64(st.Stats.Enqueued), opt)
			o.ObserveInt64(delivered, int64(st.Stats.Delivered), opt)
			o.ObserveInt64(redelivered, int64(st.Stats.Redelivered), opt)
			o.ObserveInt64(acked, int64(st.Stats.Acked), opt)
			o.ObserveInt64(refused, int64(st.Stats.Refused), opt)
			o.ObserveInt64(waited, int64(st.Stats.Waited), opt)
		}
		o.ObserveInt64(forwards, int64(m.metrics.forwards.Load()))
		o.ObserveInt64(broadcasts, int64(m.metrics.broadcasts.Load()))
		o.ObserveInt64(elections, int64(m.metrics.elections.Load()))
		o.ObserveInt64(handovers, int64(m.metrics.handovers.Load()))
		o.ObserveInt64(handoverFailures, int64(m.metrics.handoverFailures.Load()))
		m.mu.RLock()
		o.ObserveInt64(passedOver, int64(len(m.unreachable)))
		m.mu.RUnlock()
		if m.qlog != nil {
			ls := m.qlog.Stats()
			o.ObserveInt64(logBytes, ls.Size+ls.Spares)
			o.ObserveInt64(logSpare, ls.Spares)
			o.ObserveInt64(logRecords, int64(ls.Live))
			o.ObserveInt64(logAppended, int64(ls.Appended))
			o.ObserveInt64(logFsyncs, int64(ls.Fsyncs))
		}
		return nil
	}, depthRows, depthBytes, unacked, enqueued, delivered, redelivered, acked, refused, waited,
		forwards, broadcasts, elections, handovers, handoverFailures, passedOver, logBytes, logSpare, logRecords, logAppended, logFsyncs)
	return err
}
