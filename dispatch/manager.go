package dispatch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"chute/dispatch/qlog"
	"chute/gossip"
	"chute/gossip/peer"
	"chute/internal/backoff"
	"chute/kv"
	"chute/sink"
)

// Config configures a Manager. New never reads flags, files or the
// environment.
type Config struct {
	// MemberID is this member's id, written in the dispatcher records it
	// claims. Required.
	MemberID uint64
	// ClusterID is sent with calls to other members, which refuse calls of
	// another cluster. Zero: zero (tests of one member).
	ClusterID uint64
	// PeerCredentials secure the connections to other members; they must
	// match the peer listener's (peer.Config.Credentials).
	// Nil: plain text.
	PeerCredentials credentials.TransportCredentials
	// Boot identifies this run of the process, as gossip publishes it (the
	// serf tag "boot"); backups keep copies from different runs apart.
	// Empty: unknown, and a restart under the same name is only noticed
	// when serf reports the member failed.
	Boot string
	// ReconcileInterval is how often queues are checked against their
	// dispatcher records: handing messages to a new dispatcher, binding
	// consumers, claiming queues whose dispatcher is gone. Zero: 100ms.
	ReconcileInterval time.Duration
	// Prefetch is how many unacknowledged messages a consumer holds at
	// most. Zero: 64.
	Prefetch int
	// Visibility is how long a delivered message may stay unacknowledged
	// before it is delivered again. Zero: 30s.
	Visibility time.Duration
	// MaxQueueBytes caps the bytes (values and keys) a queue holds; a put
	// over it waits for room up to FullWait, then is ResourceExhausted.
	// Zero: 64 MiB.
	MaxQueueBytes int64
	// FullWait is how long a put to a full queue waits in all for room
	// (the queue's inserts or acks freeing bytes) before it is refused
	// ResourceExhausted, never past shortly before its deadline: a
	// producer faster than ClickHouse is slowed to its pace rather than
	// refused. Zero: refused at once (cmd/chute uses DefaultFullWait).
	FullWait time.Duration
	// MaxKeyBytes and MaxRequestBytes are the client limits of kv
	// (kv.Config), which messages from other members are held to as well:
	// a producer key, a value. Zero: kv.DefaultMaxKeyBytes and
	// kv.DefaultMaxRequestBytes.
	MaxKeyBytes     int
	MaxRequestBytes int
	// ClickHouse returns the ClickHouse URL and default database, read at
	// every batch so that a reloaded configuration takes effect at the next
	// one. Nil or an empty URL: rows of ClickHouse queues stay queued.
	ClickHouse func() (url, db string)
	// ClickHouseTables returns the tables puts to ClickHouse queues may
	// reach (--clickhouse-allow-tables) and the database of names
	// without one, read at every such put so that a reload applies to the
	// next one; a put to another table is InvalidArgument. The answer is
	// remembered per queue name while both results stay the same (the
	// same *sink.AllowList): return a new list only when it changed. Nil:
	// the default list (every table outside ClickHouse's system
	// databases) and ClickHouse's database; a nil list is the default.
	ClickHouseTables func() (allow *sink.AllowList, db string)
	// ClickHouseTLS returns the TLS configuration for an https
	// clickhouse_url (CA, client certificate, server name), read with
	// the URL at every batch; the sink clones it and never changes it.
	// Nil, or a nil result: the system's roots and no client certificate.
	ClickHouseTLS func() *tls.Config
	// ClickHouseOptions returns the cluster's insert settings, which a
	// queue's own ("settings" in /config/queues/{name}) override by name,
	// and the compression of insert bodies; read with the URL at every
	// batch. Nil: no settings, no compression.
	ClickHouseOptions func() (sink.Settings, sink.Compression)
	// ServerDownMin and ServerDownMax bound how long a ClickHouse server
	// of the URL list that failed a batch with a transient error is
	// passed over: ServerDownMin, doubling with each failure in a row,
	// up to ServerDownMax (sink.Servers). Zero or negative: 1s and 30s.
	ServerDownMin, ServerDownMax time.Duration
	// BatchRows and BatchBytes cap one insert. Zero: 100000 rows, 8 MiB
	// (below ClickHouse's default block of 1048576 rows and its max insert
	// block size).
	BatchRows  int
	BatchBytes int
	// BatchInterval is the least time between two inserts into one table:
	// every insert makes a part, and a trickle of one-row inserts would
	// make too many. Zero: 50ms.
	BatchInterval time.Duration
	// MaxInsertsPerSecond bounds the insert starts of one busy queue, a
	// queue's max_inserts_per_second unless its settings say otherwise
	// (drain.go). Zero: 2.
	MaxInsertsPerSecond float64
	// MaxInflightInserts bounds the batches of one queue in ClickHouse at
	// once, 1 to 16, a queue's max_inflight_inserts unless its settings
	// say otherwise. Zero: 2.
	MaxInflightInserts int
	// InsertTimeout bounds one insert request. A queue whose request
	// timed out waits twice as long for the next, up to 8 times this
	// (drainer.timed). Zero: 30s.
	InsertTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between failed inserts.
	// Zero: 100ms and 30s.
	RetryMin, RetryMax time.Duration
	// DeadLetterMaxRows and DeadLetterTTL bound each ClickHouse queue's
	// dead letters unless its settings say otherwise (dlq_max_rows,
	// dlq_ttl): past DeadLetterMaxRows the oldest are deleted, and
	// letters older than DeadLetterTTL are deleted. Zero: 10000 rows and
	// 168h (7 days); only a queue's settings can keep letters forever
	// (dlq_ttl "0s").
	DeadLetterMaxRows int
	DeadLetterTTL     time.Duration
	// MetricsMaxTables bounds the table label values of the ClickHouse
	// metrics (rows, bytes, batches, dead letters, insert duration,
	// retries): the first tables inserted into get their own, later
	// ones share "_other"; and the queue label values of
	// chute.queue.puts alike. Zero: 1000.
	MetricsMaxTables int
	// Meter exports queue and ClickHouse metrics. Nil: none.
	Meter metric.MeterProvider
	// Tracer traces forwards to other members and every ClickHouse batch
	// (one clickhouse.insert span each, continuing the puts' traces). Nil:
	// no spans and no tracing work.
	Tracer trace.TracerProvider
	// Logger receives the manager's logs. Nil: discarded.
	Logger *slog.Logger
	// DataDir is where the member keeps the messages in its custody: the
	// queue log lives in <DataDir>/queues, and New recovers what it
	// holds. Empty: memory only, every message is lost with the process;
	// for unit tests only (cmd/chute always gives one).
	DataDir string
	// NoSync writes the queue log but never fsyncs it (etcd's
	// --unsafe-no-fsync): a put survives the process being killed, not
	// the machine crashing. False: a put returns after the fsync that
	// covers it.
	NoSync bool
	// QuotaBytes bounds the queue log's size; a put that would pass it
	// fails with etcd's "database space exceeded" (as does one on a full
	// file system). Zero: no quota.
	QuotaBytes int64
	// OnNoSpace is called when a put fails for lack of space in the
	// queue log (QuotaBytes or a full file system). Nil: nothing.
	OnNoSpace func()
	// OnLogFailed is called once when the queue log fails for good (a
	// failed fsync: qlog.ErrFailed): every later put is refused until the
	// process starts again, which recovers what reached the disk, as etcd
	// exits when its WAL cannot be synced. Nil: nothing.
	OnLogFailed func(error)
	// QueueLogSegmentBytes is the size of the queue log's segment files
	// (qlog.Config.SegmentBytes; at least 1 KiB). Zero: 64 MiB.
	QueueLogSegmentBytes int64
	// Clock drives every timer of the manager: visibility timeouts,
	// batch intervals, retry backoff, the reconcile loop, forward
	// deadlines, passing over a silent backup. Deadlines of calls that
	// cross the network (to other members, to ClickHouse) are the
	// kernel's and stay on the real clock, and message ids start from
	// the wall clock. Nil: the real clock.
	Clock clockwork.Clock
}

func (c Config) withDefaults() Config {
	if c.Prefetch == 0 {
		c.Prefetch = 64
	}
	if c.Visibility == 0 {
		c.Visibility = 30 * time.Second
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = 64 << 20
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = kv.DefaultMaxKeyBytes
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = kv.DefaultMaxRequestBytes
	}
	if c.BatchRows == 0 {
		c.BatchRows = 100000
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = 8 << 20
	}
	if c.BatchInterval == 0 {
		c.BatchInterval = 50 * time.Millisecond
	}
	if c.MaxInsertsPerSecond == 0 {
		c.MaxInsertsPerSecond = 2
	}
	if c.MaxInflightInserts == 0 {
		c.MaxInflightInserts = 2
	}
	if c.InsertTimeout == 0 {
		c.InsertTimeout = 30 * time.Second
	}
	if c.RetryMin == 0 {
		c.RetryMin = 100 * time.Millisecond
	}
	if c.RetryMax == 0 {
		c.RetryMax = 30 * time.Second
	}
	if c.DeadLetterMaxRows == 0 {
		c.DeadLetterMaxRows = defaultDeadLetterMaxRows
	}
	if c.DeadLetterTTL == 0 {
		c.DeadLetterTTL = defaultDeadLetterTTL
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 100 * time.Millisecond
	}
	if c.MetricsMaxTables == 0 {
		c.MetricsMaxTables = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	return c
}

// RecordStore is the KV as the manager reads and writes dispatcher and
// consumer records; kv.Server implements it. Reads are of this member's
// copy of the key space and never block. Writes are writes of the whole
// cluster: they block until committed or ctx ends, and fail when they
// cannot be committed (no leader, as in a minority partition; a
// timeout), in which case they may still be committed later. Methods
// are safe for concurrent use.
type RecordStore interface {
	Get(key string) []byte
	// Changes returns a count that grows with every change of the key
	// space: what Get returned after it returned n is still current
	// while it returns n. It never blocks.
	Changes() uint64
	// CompareAndPut sets key to value when its value is old (nil: the
	// key does not exist), and reports whether it did.
	CompareAndPut(ctx context.Context, key string, old, value []byte) (bool, error)
	// CompareAndDelete deletes key when its value is old, and reports
	// whether it did.
	CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error)
	Put(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string) error
	// Apply deletes deletes and puts puts as one write (one raft
	// entry), all or nothing; a NOSPACE alarm refuses it whole when it
	// puts anything (kv.ErrNoSpace). Callers keep a write well under the
	// size of one raft command (dlq.go).
	Apply(ctx context.Context, puts []kv.KeyValue, deletes []string) error
	Prefix(prefix string) map[string][]byte
	// Page returns the keys and values from from to end (excluded), in
	// key order, at most limit of them.
	Page(from, end string, limit int) []kv.KeyValue
	// Writable reports whether a write can commit now: a leader is
	// known. Claims are not tried without one.
	Writable() bool
	// Synced reports whether this member's copy of the key space caught
	// up with the cluster once since it started. Before, a record it
	// misses or has old may only be late: the reconcile loop claims no
	// queue from it (a member restarted with recovered messages tried,
	// and waited out a refused write per queue, for seconds).
	Synced() bool
	// Linearize returns once Get holds every write committed before the
	// call, or fails when the cluster could not be asked within ctx.
	Linearize(ctx context.Context) error
}

var _ RecordStore = (*kv.Server)(nil)

// Manager serves the queue namespace for kv (it implements kv.Queues): it
// holds the queues this member dispatches and their consumers.
type Manager struct {
	cfg Config
	log *slog.Logger

	records RecordStore // set by Start
	cluster Cluster     // set by Start; nil: this member alone

	mu         sync.RWMutex // guards queues, forwarders, locals, drainers, tokenSupport; every put reads queues and drainers
	queues     map[string]*queue
	sorted     []*queue // queues by name (snapshot), nil when to be sorted again
	forwarders map[uint64]*forwarder
	locals     map[*localConsumer]struct{}
	drainers   map[string]*drainer // by queue, for ClickHouse queues dispatched here

	dialOpts     []grpc.DialOption // for connections to other members: message buffers and codec
	conns        *peer.Conns       // shared connections to other members' listeners, by address
	sink         *sink.Client
	servers      *sink.Servers       // health of the ClickHouse servers, shared by the drainers
	tokenSupport map[string]bool     // by ClickHouse address: knows insert_deduplication_token
	fences       fences              // the drainers' reads before each attempt (fence.go)
	warns        warnLimiter         // per-put warnings, once a second per queue
	unreachable  map[uint64]passOver // members passed over (markUnreachable)
	settings     settingsCache
	views        viewCache // what puts read of each queue's keys
	tables       tableGate // which ClickHouse queue names puts may use

	backupMu sync.Mutex // guards backups; never held with m.mu or a queue's mu
	backups  map[backupKey]*backupSet

	metrics counters
	inserts insertMetrics
	letters letterMetrics
	tracer  trace.Tracer // nil when tracing is off

	// counter numbers the messages this member accepts (MsgID.N). It
	// starts at the wall clock in nanoseconds, so a member restarted under
	// the same name never reuses an id of its earlier run, which other
	// members may remember as acknowledged (and drop as a duplicate).
	counter atomic.Uint64
	clock   clockwork.Clock
	// dropped counts the acknowledged messages this run dropped (each
	// logged at ERROR with its queue); Shutdown fails when it is not 0.
	dropped atomic.Uint64

	// qlog is the queue log (custody.go); nil without a DataDir.
	// recovered are the messages it replayed, by queue, until Start
	// hands them to their queues.
	qlog      *qlog.Log
	appends   sync.Pool // *appendBufs: persistGroups' record buffers
	qlogLock  *os.File  // held while qlog is open
	recovered map[string][]incoming
	// rehomed is the queue log's deleted segments at the last
	// rehomeValues; the reconcile loop's alone.
	rehomed uint64
	// tick is the start of the last reconcile round (m.clock, unix
	// nanoseconds), which queues are stamped with when looked up
	// (queue.lastUse): a clock read per put would cost more. A use counts
	// from the start of the round it came in, at most ReconcileInterval
	// early.
	tick atomic.Int64
	// rounds counts the reconcile rounds (quietRounds); the loop's alone.
	rounds uint64
	// adoptAt is when the reconcile loop next looks for records to
	// adopt, from adoptFrom on ("": from the first); the loop's alone
	// (adopt.go).
	adoptAt   time.Time
	adoptFrom string
	unhosted  map[string]map[string]bool // by queue, the consumer records a look found stale, to delete at the next
	// sweptAt is when the reconcile loop last woke the drainers to sweep
	// their dead letters, and putsSweptAt when it last dropped the idle
	// series of the puts counter; the loop's alone.
	sweptAt, putsSweptAt time.Time

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	closeOnce sync.Once
	closeErr  error // of closeLog

	logFailedOnce sync.Once // calls cfg.OnLogFailed

	// departing is set when the member begins to leave (Handoff): its
	// claims name another member (claimant).
	departing atomic.Bool

	// entered holds, by queue name, the epoch of the last record naming
	// this member that this run of its process wrote: it numbers messages
	// only in such an epoch (mayNumber). entering holds the names whose
	// record a goroutine is writing for that (enterSoon).
	entered, entering sync.Map
	// ownRun marks the copies a backup kept for this run of the process
	// that it hands back (incoming.owner, dropLeftLocked).
	ownRun *copyOwner
	// failedOver holds, by queue name, the epoch this member claimed from
	// a dispatcher gossip called gone, until it enters it: it then awaits
	// the copies every other member may hold (dispatchLocked).
	failedOver sync.Map
	// pause holds deliveries back after this process did not run for a
	// while (pause.go).
	pause *pauseFence

	// flushing is closed when the member leaves (Handoff): drainers
	// insert without waiting for their batch interval.
	flushing  chan struct{}
	flushOnce sync.Once

	// txnBatches are the *txnBatch of Produce calls that kept nothing of
	// them (ProduceDetached), for the next.
	txnBatches sync.Pool
}

var (
	_ kv.Queues          = (*Manager)(nil)
	_ kv.QueueRecords    = (*Manager)(nil)
	_ kv.ConsumerChecker = (*Manager)(nil)
)

// New builds a manager; Start gives it the KV and starts its timers.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := &Manager{
		pause:        newPauseFence(),
		cfg:          cfg,
		log:          cfg.Logger,
		queues:       make(map[string]*queue),
		forwarders:   make(map[uint64]*forwarder),
		locals:       make(map[*localConsumer]struct{}),
		drainers:     make(map[string]*drainer),
		tokenSupport: make(map[string]bool),
		unreachable:  make(map[uint64]passOver),
		backups:      make(map[backupKey]*backupSet),
		sink:         sink.NewClient(sink.ClientConfig{Timeout: maxTimeoutFactor * cfg.InsertTimeout, Logger: cfg.Logger}),
		servers:      sink.NewServers(sink.ServersConfig{DownMin: cfg.ServerDownMin, DownMax: cfg.ServerDownMax, Now: cfg.Clock.Now}),
		dialOpts:     peerDialOptions(cfg.PeerCredentials),
		clock:        cfg.Clock,
		stop:         make(chan struct{}),
		flushing:     make(chan struct{}),
		ownRun:       &copyOwner{member: cfg.MemberID, boot: cfg.Boot},
	}
	m.conns = peer.NewConns(m.dialOpts...)
	if cfg.Tracer != nil {
		m.tracer = cfg.Tracer.Tracer("chute/dispatch")
	}
	m.counter.Store(uint64(time.Now().UnixNano())) // the wall clock, even under a fake one: see counter
	m.tick.Store(m.clock.Now().UnixNano())
	var err error
	if m.inserts, err = newInsertMetrics(cfg.Meter, cfg.MetricsMaxTables); err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	if m.letters, err = newLetterMetrics(cfg.Meter); err != nil {
		return nil, fmt.Errorf("dispatch: metrics: %w", err)
	}
	// Before the metrics, whose callback reads it: closed if they fail.
	if m.qlog, m.qlogLock, m.recovered, err = openLog(cfg); err != nil {
		return nil, err
	}
	if cfg.Meter != nil {
		err := m.registerMetrics(cfg.Meter)
		if err == nil {
			err = m.registerServerMetrics(cfg.Meter)
		}
		if err != nil {
			if m.qlog != nil {
				_ = m.qlog.Close()
				_ = m.qlogLock.Close()
			}
			return nil, fmt.Errorf("dispatch: metrics: %w", err)
		}
	}
	if cfg.NoSync && m.qlog != nil {
		m.log.Warn("queue log never fsynced (--unsafe-no-fsync): a machine crash may lose acknowledged puts", "dir", cfg.DataDir)
	}
	return m, nil
}

// Start gives the manager the KV holding dispatcher records and the
// cluster (nil for a member alone), and starts its timers. Register
// PeerService on the peer listener before it serves.
func (m *Manager) Start(records RecordStore, cluster Cluster) {
	m.records = records
	m.cluster = cluster
	m.adoptAt = m.clock.Now().Add(adoptEvery)
	m.unhosted = make(map[string]map[string]bool)
	m.loadRecovered()
	m.wg.Add(3)
	go func() {
		defer m.wg.Done()
		m.runReconcile()
	}()
	go func() {
		defer m.wg.Done()
		m.runPauseFence()
	}()
	go func() {
		defer m.wg.Done()
		m.runTimers()
	}()
}

// Shutdown stops the timers, the forward streams and the remote
// consumers, and waits for the goroutines of the Manager to end, or for
// ctx: past it, it returns ctx's error and leaves them (the process is
// ending). Every one of them ends on stop or on its forwarder's context,
// which Shutdown closes and cancels first. Then it closes the queue log
// (even past ctx: its pending releases are written): what the queues
// still hold stays there for the next start (logged per queue at INFO),
// what those left goroutines carry too: past ctx it returns no error
// for them. Without a data dir it is lost, logged at ERROR, and the
// error says so.
// It is safe to call more than once.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.stopOnce.Do(func() {
		close(m.stop)
		m.mu.Lock()
		for id, f := range m.forwarders {
			f.close()
			delete(m.forwarders, id)
		}
		for lc := range m.locals {
			lc.unbindRemote()
		}
		m.mu.Unlock()
	})
	ended := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		if m.qlog == nil {
			m.log.Error("queues: shutdown deadline passed with work still running")
			m.closeOnce.Do(func() { m.closeErr = m.closeLog() }) // what still runs gets ErrClosed
			return errors.Join(fmt.Errorf("dispatch: shutdown: %w", context.Cause(ctx)), m.closeErr)
		}
		// An insert into a ClickHouse that does not answer, a hand-over
		// to a member that does not: what they carry is released from
		// the queue log only once answered, so it stays there for the
		// next start. Nothing is lost and the node exits 0; an insert
		// that lands meanwhile is sent again then, as after any
		// timeout.
		m.log.Warn("queues: shutdown deadline passed with inserts or hand-overs still waiting for an answer; their rows stay in the queue log and are sent again at the next start")
		m.closeOnce.Do(func() { m.closeErr = m.closeLog() }) // what still runs gets ErrClosed
		return m.closeErr
	}
	m.conns.Close()
	m.closeOnce.Do(func() { m.closeErr = m.closeLog() })
	return m.closeErr
}

func (m *Manager) runTimers() {
	tick := m.clock.NewTicker(max(m.cfg.Visibility/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.Chan():
			m.expireAll(m.clock.Now())
		}
	}
}

// expireAll delivers again what was delivered before now less the
// visibility timeout and is not acknowledged.
func (m *Manager) expireAll(now time.Time) {
	for _, q := range m.snapshot() {
		q.expire(now)
	}
}

// snapshot returns the queues, sorted by name. The slice is shared until
// a queue is added or forgotten: callers never modify it. Sorting the
// queues at every reconcile round was a fifth of the round of a member
// with 2000 idle queues.
func (m *Manager) snapshot() []*queue {
	m.mu.RLock()
	qs := m.sorted
	m.mu.RUnlock()
	if qs != nil {
		return qs
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sorted == nil {
		qs := make([]*queue, 0, len(m.queues))
		for _, q := range m.queues {
			qs = append(qs, q)
		}
		sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
		m.sorted = qs
	}
	return m.sorted
}

// Route implements kv.Queues.
func (m *Manager) Route(key []byte) kv.Route {
	if len(key) >= len(SettingsPrefix) && string(key[:len(SettingsPrefix)]) == SettingsPrefix { // no allocation
		return kv.RouteChecked
	}
	// ParseKey keeps nothing of the key and only the kind is returned,
	// so it reads the request's bytes as they are: kv routes every key
	// of every request, every put of a txn.
	switch ParseKey(unsafe.String(unsafe.SliceData(key), len(key))).Kind {
	case KindRecord:
		return kv.RouteChecked
	case KindProduce:
		return kv.RouteProduce
	case KindConsumer:
		return kv.RouteConsumer
	case KindDelivery:
		return kv.RouteDelivery
	case KindInvalid:
		return kv.RouteInvalid
	}
	return kv.RouteKV
}

// RecordKey implements kv.QueueRecords: the record /q/{name} of the
// queue a producer key puts to, so that with auth enabled creating a
// queue needs write on its record.
func (m *Manager) RecordKey(key []byte) ([]byte, bool) {
	k := ParseKey(string(key))
	if k.Kind != KindProduce || k.Queue == "" {
		return nil, false
	}
	return []byte(RecordKey(k.Queue)), true
}

// queueFor returns this member's state of the queue called name,
// creating it when needed.
func (m *Manager) queueFor(name string) *queue {
	m.mu.RLock()
	q, ok := m.queues[name]
	if ok {
		m.used(q)
	}
	m.mu.RUnlock()
	if ok {
		return q
	}
	set := m.settingsOf(name) // reads the KV: not under m.mu
	m.mu.Lock()
	defer m.mu.Unlock()
	if q, ok = m.queues[name]; !ok {
		q = newQueue(name, set)
		q.log, q.pause = m.qlog, m.pause
		m.queues[name] = q
		m.sorted = nil
	}
	m.used(q)
	return q
}

// lookup returns this member's state of a queue, or nil.
func (m *Manager) lookup(name string) *queue {
	m.mu.RLock()
	defer m.mu.RUnlock()
	q := m.queues[name]
	if q != nil {
		m.used(q)
	}
	return q
}

// used stamps q as looked up now. The caller holds mu, read or write, so
// that forget, which holds it to write, sees the stamp of every lookup
// that found q before it.
func (m *Manager) used(q *queue) {
	if t := m.tick.Load(); q.lastUse.Load() != t { // one write per round: puts share the cache line
		q.lastUse.Store(t)
	}
}

// lockCurrent locks q, looked up by the caller to add to it, and returns
// it; or, when the member forgot q since (forget.go), the queue that
// replaced it, locked. That one was just looked up: it cannot be
// forgotten before forgetAfter passes.
func (m *Manager) lockCurrent(q *queue) *queue {
	q.mu.Lock()
	if !q.forgotten {
		return q
	}
	q.mu.Unlock()
	q = m.queueFor(q.name)
	q.mu.Lock()
	return q
}

// errOverCap is etcd's "too many requests": the queue is at its byte cap.
var errOverCap = rpctypes.ErrGRPCRequestTooManyRequests

// Produce implements kv.Queues: the puts of each queue are enqueued on its
// dispatcher, in order, all or none. A txn spanning queues is all or none
// when this member dispatches them all, else atomic per queue only.
func (m *Manager) Produce(ctx context.Context, puts []*pb.PutRequest) error {
	_, err := m.ProduceDetached(ctx, puts)
	return err
}

// Detaches implements kv.DetachingQueues: only a member with a data dir
// moves what its queues keep into the queue log.
func (m *Manager) Detaches() bool { return m.qlog != nil }

// ProduceDetached implements kv.DetachingQueues: it is Produce, and
// reports detached when nothing refers to puts once it returns: every
// put went to a queue dispatched here whose record in the queue log now
// holds the value the queue keeps, or was forwarded and answered at the
// first try (its frame was encoded before the dispatcher could answer).
// A held put, a failed one, or a queue here without a data dir is never
// detached. The keys are copied in any case (joinKeys, the queue names).
func (m *Manager) ProduceDetached(ctx context.Context, puts []*pb.PutRequest) (detached bool, err error) {
	if len(puts) == 1 {
		return false, m.produceSingle(ctx, puts[0])
	}
	b := m.newTxnBatch(len(puts))
	defer func() {
		if detached {
			m.txnBatches.Put(b.reset())
		}
	}()
	keys, off := joinKeys(puts), 0
	var bad error
	var k Key
	prefix, ch := "", false // the last parsed producer key less its tail; its queue's kind
	rows := false           // puts to ClickHouse queues, their rows not checked yet
	for i, p := range puts {
		key := keys[off : off+len(p.Key)]
		off += len(p.Key)
		if tail, ok := sameProducer(key, prefix); ok {
			// The queue of the put before, checked already: most txns
			// name one queue 128 times.
			k.Tail = tail
			b.queue[i] = b.queue[i-1]
			if bad == nil && !utf8.ValidString(tail) {
				bad = errKeyNotUTF8(k.Queue, tail)
			}
		} else {
			k = ParseKey(key)
			k.Queue = b.name(i, k.Queue)
			prefix = ""
			if k.Kind == KindProduce {
				prefix = key[:len(key)-len(k.Tail)]
			}
			if bad == nil {
				ch, bad = m.checkProducer(p, k)
			}
		}
		rows = rows || ch
		b.msgs[i] = incoming{tail: k.Tail, value: p.Value}
	}
	// The rows of a txn to one queue are checked where they are kept
	// (produceOne): the dispatcher checks what a member forwards it, a
	// member's rows too, so a forwarding member leaves it that. A txn to
	// several queues is all or nothing: its rows are checked first.
	var checkRows func() error
	if bad == nil && rows {
		checkRows = func() error { return b.checkRows(puts) }
		if len(b.names) > 1 {
			bad, checkRows = checkRows(), nil
		}
	}
	tr := m.putTrace(ctx)
	for i := range b.msgs { // ids after the checks above: a put they refuse uses none
		if bad != nil {
			break
		}
		var n uint64
		n, bad = m.nextN()
		b.msgs[i].id, b.msgs[i].trace = MsgID{Origin: m.cfg.MemberID, N: n}, tr
	}
	err = bad
	detached = err == nil
	gs := b.byQueue()
	here := false // every queue's messages taken, or none, by produceAllHere
	if err == nil && len(gs) > 1 {
		var let bool
		if here, let, err = m.produceAllHere(ctx, gs); here {
			detached = detached && let
		}
	}
	for _, g := range gs {
		if err == nil && !here {
			var let bool
			let, err = m.produceOne(ctx, g.name, g.msgs, checkRows)
			detached = detached && let
		}
		// Queue by queue, queues before a failing one took their
		// messages; it and the ones after did not.
		m.inserts.countPuts(ctx, g.name, err, len(g.msgs))
	}
	return detached, err
}

// produceAllHere produces the groups of a txn naming several queues (gs,
// in name order) all or none when this member dispatches every one of
// them, claiming those nobody dispatches: a queue over its cap, or out
// of numbers, refused the txn after the queues before it had taken
// their messages, which a retry then put twice. It reports here false,
// having kept nothing, when a queue is dispatched elsewhere: the txn goes
// queue by queue then, atomic per queue only (each forwarded on its own).
// A full queue is waited for as produceOne waits.
func (m *Manager) produceAllHere(ctx context.Context, gs []queueMsgs) (here, let bool, err error) {
	for _, g := range gs {
		if rec := m.dispatcherOf(ctx, g.name, claimAsProducer); rec.Member != m.cfg.MemberID {
			return false, false, nil
		}
	}
	var since time.Time
	for try := 0; ; try++ {
		var full *queue
		let, full, err = m.enqueueAllHere(ctx, gs)
		if !isOverCap(err) || full == nil || m.cfg.FullWait <= 0 {
			break
		}
		if try == 0 {
			since = m.clock.Now()
			full.bump(&full.stats.Waited)
		}
		if !m.waitForRoom(ctx, full, since, try) {
			full.bump(&full.stats.Refused)
			break
		}
	}
	if errors.Is(err, errMoved) {
		return false, false, nil // nothing kept: queue by queue
	}
	return true, let, err
}

// enqueueAllHere is enqueueLocal for the groups of a txn, all or none:
// their messages appended in one write, then each queue's record, numbers
// and room checked under every queue's lock, taken in name order (gs's),
// before any takes its messages. It returns the queue over its cap when
// that refused them, and what each queue's ack mode waits for, waited.
func (m *Manager) enqueueAllHere(ctx context.Context, gs []queueMsgs) (let bool, full *queue, err error) {
	qs := make([]*queue, len(gs))
	groups := make([]custodyGroup, len(gs))
	for i, g := range gs {
		qs[i], groups[i] = m.queueFor(g.name), custodyGroup(g)
		if !qs[i].hasRoom(g.msgs) {
			return false, qs[i], errOverCap // before a write and an fsync
		}
	}
	if err := m.persistGroups(ctx, recMessage, groups); err != nil {
		return false, nil, err
	}
	unpersist := func() {
		for _, g := range gs {
			m.unpersist(g.msgs)
		}
	}
	if !m.lockAll(qs, gs) {
		unpersist()
		return false, nil, errMoved
	}
	now := m.clock.Now()
	recs := make([]Record, len(gs))
	for i, g := range gs {
		q := qs[i]
		recs[i], err = m.admitLocked(q, g.name, g.msgs)
		if err == nil && (recs[i].Member != m.cfg.MemberID || !m.mayNumber(g.name, recs[i])) {
			err = errMoved // none, or not an epoch of this run's
		}
		if err != nil {
			if err == errOverCap {
				full = q
			}
			for _, q := range qs {
				q.mu.Unlock()
			}
			unpersist()
			return false, full, err
		}
	}
	var waits []func(context.Context) error
	for i, g := range gs {
		q := qs[i]
		m.dispatchLocked(q, recs[i])
		added := q.enqueueLocked(g.msgs, now, arrivedLocal, q.set.Ack != AckQueued)
		if w := m.afterEnqueueLocked(q, added, len(g.msgs) > 0 && g.msgs[0].seq == 0); w != nil {
			waits = append(waits, w)
		}
	}
	for _, q := range qs {
		q.mu.Unlock()
	}
	let = true
	for i, g := range gs {
		m.ensureDrainer(qs[i])
		let = let && inLog(g.msgs)
	}
	for _, wait := range waits {
		if werr := wait(ctx); werr != nil && err == nil {
			err = werr
		}
	}
	return let && err == nil, nil, err
}

// lockAll locks the queues qs of groups gs, in their order, each the
// current queue of its name (lockCurrent): one forgotten meanwhile is
// looked up again with no lock held, a few times; false, with none
// held, when they kept changing.
func (m *Manager) lockAll(qs []*queue, gs []queueMsgs) bool {
	for range 3 {
		stale := -1
		for i, q := range qs {
			q.mu.Lock()
			if q.forgotten {
				stale = i
				for _, held := range qs[:i+1] {
					held.mu.Unlock()
				}
				break
			}
		}
		if stale < 0 {
			return true
		}
		for i, g := range gs {
			qs[i] = m.queueFor(g.name)
		}
	}
	return false
}

// checkRows refuses puts whose queue is a ClickHouse queue and whose
// value is not a row (checkRow), puts being the batch's puts.
func (b *txnBatch) checkRows(puts []*pb.PutRequest) error {
	last, ch := int32(-1), false // the queue of the put before, its kind
	for i, p := range puts {
		if q := b.queue[i]; q != last {
			last = q
			_, ch = sink.TableOf(b.names[q])
		}
		if ch {
			if err := checkRow(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// inLog reports whether every message's value is its record's bytes in
// the queue log's mapping (persistGroups), not the put's.
func inLog(msgs []incoming) bool {
	for i := range msgs {
		if msgs[i].region == nil {
			return false
		}
	}
	return true
}

// sameProducer reports whether key is prefix, a producer key less its
// tail, followed by a tail: what ParseKey would make of key is then that
// key's Key with this tail. It returns the tail.
func sameProducer(key, prefix string) (string, bool) {
	if prefix == "" || len(key) <= len(prefix) || key[:len(prefix)] != prefix {
		return "", false
	}
	tail := key[len(prefix):]
	return tail, strings.IndexByte(tail, '/') < 0
}

// joinKeys returns the keys of puts in one string. The tails of a txn's
// messages are cut from it, so it lives until the last of them is
// acknowledged (a txn's messages mostly leave together), for one
// allocation rather than a key and a tail per put.
func joinKeys(puts []*pb.PutRequest) string {
	n := 0
	for _, p := range puts {
		n += len(p.Key)
	}
	var all strings.Builder
	all.Grow(n)
	for _, p := range puts {
		all.Write(p.Key)
	}
	return all.String()
}

// txnBatch is a txn's messages by queue, for Produce. Queue names are
// cloned once per txn from the joined keys (queues, caches and metrics
// keep names), and grouped without a map.
type txnBatch struct {
	msgs  []incoming
	queue []int32  // msgs[i] goes to names[queue[i]]
	names []string // the distinct queue names
}

// newTxnBatch returns an empty batch for n messages: one Produce gave
// back, or a new one.
func (m *Manager) newTxnBatch(n int) *txnBatch {
	b, _ := m.txnBatches.Get().(*txnBatch)
	if b == nil || cap(b.msgs) < n {
		return &txnBatch{msgs: make([]incoming, n), queue: make([]int32, n)}
	}
	b.msgs, b.queue = b.msgs[:n], b.queue[:n]
	return b
}

// reset empties b for newTxnBatch, dropping what its messages referred
// to.
func (b *txnBatch) reset() *txnBatch {
	clear(b.msgs)
	clear(b.names)
	b.names = b.names[:0]
	return b
}

// name returns the batch's copy of q, the queue of message i.
func (b *txnBatch) name(i int, q string) string {
	for j, n := range b.names {
		if n == q {
			b.queue[i] = int32(j)
			return n
		}
	}
	n := strings.Clone(q)
	b.queue[i] = int32(len(b.names))
	b.names = append(b.names, n)
	return n
}

// queueMsgs are the messages of one queue of a txn, in put order.
type queueMsgs struct {
	name string
	msgs []incoming
}

// byQueue returns the messages by queue, in name order.
func (b *txnBatch) byQueue() []queueMsgs {
	if len(b.names) == 1 {
		return []queueMsgs{{b.names[0], b.msgs}}
	}
	order := make([]int, len(b.names)) // indexes of names, by name
	for j := range order {
		order[j] = j
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(b.names[x], b.names[y]) })
	at := make([]int, len(b.names)) // a name's place in order
	gs := make([]queueMsgs, len(b.names))
	for pos, j := range order {
		at[j] = pos
		gs[pos].name = b.names[j]
	}
	for i, j := range b.queue {
		g := &gs[at[j]]
		g.msgs = append(g.msgs, b.msgs[i])
	}
	return gs
}

// produceSingle is Produce for one put (a unary Put), without the maps
// and sorting that group a txn's puts by queue.
func (m *Manager) produceSingle(ctx context.Context, p *pb.PutRequest) error {
	k := ParseKey(string(p.Key))
	err := m.checkProduce(p, k)
	var in incoming
	if err == nil {
		in, err = m.newMessage(k, p, m.putTrace(ctx))
	}
	if err == nil {
		_, err = m.produceOne(ctx, k.Queue, []incoming{in}, nil)
	}
	m.inserts.countPuts(ctx, k.Queue, err, 1)
	return err
}

// newMessage is the message of a checked put, with the next id of this
// member. The tail is copied: a substring would keep the whole key alive
// as long as the message is queued.
func (m *Manager) newMessage(k Key, p *pb.PutRequest, tr *msgTrace) (incoming, error) {
	n, err := m.nextN()
	if err != nil {
		return incoming{}, err
	}
	return incoming{id: MsgID{Origin: m.cfg.MemberID, N: n}, tail: strings.Clone(k.Tail), value: p.Value, trace: tr}, nil
}

// errIDsExhausted: this member's message counter is at its largest value.
var errIDsExhausted = status.Error(codes.ResourceExhausted, "etcdserver: message ids of this member exhausted; restart it")

// nextN takes the next number of this member's message ids; it never
// wraps to an id given before.
func (m *Manager) nextN() (uint64, error) {
	for {
		n := m.counter.Load()
		if n == math.MaxUint64 {
			return 0, errIDsExhausted
		}
		if m.counter.CompareAndSwap(n, n+1) {
			return n + 1, nil
		}
	}
}

// produceOne puts msgs on their queue's dispatcher: here, or forwarded.
// It reports let when nothing refers to msgs' values any more: they went
// to this member's queue at the first try and are their records in the
// queue log (inLog), or were forwarded and answered (produceRemote).
// checkRows, when not nil, is the check of msgs' rows not made yet
// (ProduceDetached): left to the dispatcher they are forwarded to, which
// checks them too, when the queue's record names another member alive,
// and made here again when it refuses them, for the error to name the
// put's key as it would have here; made here first otherwise (before a
// claim of the queue) and before this member keeps them.
func (m *Manager) produceOne(ctx context.Context, name string, msgs []incoming, checkRows func() error) (let bool, err error) {
	let, err = m.produceNow(ctx, name, msgs, checkRows)
	if !isOverCap(err) {
		return let, err
	}
	// Counted once per put, by the member its client put it to: the
	// dispatcher sees every try, and cannot tell a put's last.
	q := m.queueFor(name)
	if m.cfg.FullWait > 0 {
		q.bump(&q.stats.Waited)
		since := m.clock.Now()
		for try := 0; isOverCap(err) && m.waitForRoom(ctx, q, since, try); try++ {
			// Refused before anything was kept of msgs, here or on the
			// dispatcher: they are put again whole.
			_, err = m.produceNow(ctx, name, msgs, checkRows)
		}
	}
	if isOverCap(err) {
		q.bump(&q.stats.Refused)
	}
	return false, err
}

// DefaultFullWait is the FullWait of chute's nodes: longer than a few
// inserts of a busy queue take, shorter than etcdctl's 5 s command
// timeout, so that a producer sees "too many requests" rather than a
// deadline when ClickHouse is down.
const DefaultFullWait = 2 * time.Second

// fullWaitStep bounds the steps of waitForRoom: the first, and the
// longest. fullWaitMargin is what a waiting put keeps of its deadline to
// be refused in.
const (
	fullWaitStepMin = 5 * time.Millisecond
	fullWaitStepMax = 100 * time.Millisecond
	fullWaitMargin  = 50 * time.Millisecond
)

// isOverCap reports whether err is errOverCap, from this member or, as a
// status, from the dispatcher: etcd's "too many requests", not another
// ResourceExhausted (a full disk is one).
func isOverCap(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errOverCap) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && st.Message() == status.Convert(errOverCap).Message()
}

// waitForRoom waits, after try+1 refusals since a put to q was first
// refused over the queue's byte cap, until this member's queue frees bytes
// or a step has passed (a dispatcher elsewhere sends no signal: the put
// asks again), and reports whether the put should try again: not once the
// next step would take it past FullWait since the first refusal or too
// near its deadline, nor when its context ends.
func (m *Manager) waitForRoom(ctx context.Context, q *queue, since time.Time, try int) bool {
	step := fullWaitStepMax
	if try < 5 {
		step = min(fullWaitStepMin<<try, fullWaitStepMax)
	}
	end := since.Add(m.cfg.FullWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-fullWaitMargin).Before(end) {
		end = d.Add(-fullWaitMargin)
	}
	if m.clock.Now().Add(step).After(end) {
		return false
	}
	select {
	case <-q.roomSignal():
	case <-m.clock.After(step):
	case <-ctx.Done():
		return false
	}
	return true
}

// produceNow is produceOne without waiting for room.
func (m *Manager) produceNow(ctx context.Context, name string, msgs []incoming, checkRows func() error) (let bool, err error) {
	if checkRows != nil {
		// Left to the dispatcher only when it is another member, alive:
		// rows refused here must not claim a queue nobody dispatches.
		if rec, ok := m.record(name); !ok || rec.Member == m.cfg.MemberID || !m.alive(rec.Member) {
			if err := checkRows(); err != nil {
				return false, err
			}
			checkRows = nil
		}
	}
	for try := range 3 {
		rec := m.dispatcherOf(ctx, name, claimAsProducer)
		if rec.Member != m.cfg.MemberID {
			if _, more := nextEpoch(rec); !more && !m.alive(rec.Member) {
				return false, errEpochExhausted(name) // not claimed: it would wrap
			}
			let, err := m.produceRemote(ctx, rec, name, msgs, checkRows)
			if checkRows != nil && status.Code(err) == codes.InvalidArgument {
				if bad := checkRows(); bad != nil {
					err = bad
				}
			}
			return let, err
		}
		if checkRows != nil {
			if err := checkRows(); err != nil {
				return false, err
			}
			checkRows = nil
		}
		// A put that has not left this member, or was refused elsewhere
		// before anything was kept of it.
		wait, err := m.enqueueLocal(ctx, name, msgs, arrivedLocal)
		if err == nil {
			m.ensureDrainer(m.queueFor(name))
			if wait != nil {
				err = wait(ctx)
			}
			return try == 0 && err == nil && inLog(msgs), err
		}
		if !errors.Is(err, errMoved) {
			return false, err
		}
	}
	return false, status.Error(codes.Unavailable, "dispatch: the dispatcher of "+name+" keeps moving; retry")
}

// errMoved is returned by enqueueLocal when the queue's record no longer
// names this member.
var errMoved = status.Error(codes.FailedPrecondition, "dispatch: not the dispatcher")

// enqueueLocal enqueues msgs on this member, the queue's dispatcher, all or
// none. The record is checked under the queue's lock, which a handover also
// takes, so a message is either handed over or forwarded after it, never
// left behind out of order. It returns what the put still waits for, by
// the queue's ack mode: nil for ack=queued. how is how msgs came.
func (m *Manager) enqueueLocal(ctx context.Context, name string, msgs []incoming, how arrival) (func(context.Context) error, error) {
	q := m.queueFor(name)
	if !q.hasRoom(msgs) {
		// Refused before it costs a write and an fsync: a full queue is
		// asked again and again while its puts wait for room.
		return nil, errOverCap
	}
	// On disk before the queue takes them, outside its lock: the fsync
	// of one queue's put must not hold up the others'. What is refused
	// below is released again.
	if err := m.persist(ctx, name, msgs); err != nil {
		return nil, err
	}
	wait, err := m.enqueuePersisted(q, name, msgs, how)
	if err != nil {
		m.unpersist(msgs)
	}
	return wait, err
}

// enqueuePersisted is enqueueLocal once msgs are in the queue log.
func (m *Manager) enqueuePersisted(q *queue, name string, msgs []incoming, how arrival) (func(context.Context) error, error) {
	q = m.lockCurrent(q) // the fsync may have outlasted q
	defer q.mu.Unlock()
	if how == arrivedHanded {
		// Before the room is checked: copies dropped take none. Under the
		// record dispatchLocked admits by.
		if v := m.view(name); v.ok && v.rec.Member == m.cfg.MemberID && m.mayNumber(name, v.rec) {
			msgs = m.dropLeftLocked(q, v.rec.Epoch, msgs)
		}
	}
	rec, err := m.admitLocked(q, name, msgs)
	if err != nil {
		return nil, err
	}
	if !m.dispatchLocked(q, rec) {
		m.enterSoon(name)
		return nil, errMoved // asked again once this member claimed its own epoch
	}
	added := q.enqueueLocked(msgs, m.clock.Now(), how, q.set.Ack != AckQueued)
	if q.set.Ack == AckReplicated && len(added) < len(msgs) {
		added = q.queuedAlreadyLocked(msgs, added)
	}
	return m.afterEnqueueLocked(q, added, len(msgs) > 0 && msgs[0].seq == 0), nil
}

// dropLeftLocked returns msgs, copies handed to q's dispatcher, without
// those a backup kept for this run of the process (incoming.owner is
// ownRun) that are numbered in epoch, the one it dispatches q in, and
// that q no longer holds; their records are released, and their lseq
// and batchRec in msgs cleared (a failed enqueue releases the rest of
// msgs). The count joins q.droppedOwn, logged at the DONE that ends the
// hand-over (takeDone). This run entered the epoch (the record names
// this member and mayNumber), so it gave every number of it and has
// dispatched q since: a message it numbered then and holds no more left
// its custody, acknowledged. The backup, restarted on its data dir, read
// such copies back from its log; taken as other copies, those whose ids
// the queue no longer remembered (recent acknowledgements only) were
// numbered again and delivered twice. Copies it still holds go on, to
// be dropped as duplicates once the backup holds them again. While q's
// messages are out for a hand-over (q.handing: a record read before a
// claim of this member's named another), they are held though not in
// q: nothing is dropped then. The caller holds q.mu.
func (m *Manager) dropLeftLocked(q *queue, epoch uint64, msgs []incoming) []incoming {
	if q.handing != 0 {
		return msgs
	}
	var out []incoming
	dropped := 0
	for i, in := range msgs {
		left := in.owner == m.ownRun && epochOfSeq(in.seq) == epoch
		if left {
			q.indexLocked()
			left = !q.ids.has(in.id)
		}
		switch {
		case left && out == nil:
			out = append(make([]incoming, 0, len(msgs)-1), msgs[:i]...)
			fallthrough
		case left:
			releaseLog(q.log, in.lseq, in.batchRec)
			msgs[i].lseq, msgs[i].batchRec = 0, 0
			dropped++
		case out != nil:
			out = append(out, in)
		}
	}
	if dropped == 0 {
		return msgs
	}
	q.droppedOwn += dropped
	m.log.Debug("dropped copies its backup kept from before it restarted: they were acknowledged meanwhile", "queue", q.name, "copies", dropped)
	return out
}

// queuedAlreadyLocked returns added, the messages of msgs the queue took,
// with the queued messages that have the ids of the others: msgs sent
// again (a hand-over chunk or a forwarded put retried after its answer
// was late) whose first copies wait for a backup, or were passed over
// with it. Under ack=replicated the answer to msgs waits for the backup to
// hold these too: answered at once, the member that sent them would let
// them go while this one alone held them. A message no longer queued (its
// id done) needs no copy, nor a scan. The caller holds mu.
func (q *queue) queuedAlreadyLocked(msgs, added []incoming) []incoming {
	if !q.indexed {
		return added // seenBeforeLocked found no id queued: none is
	}
	again := make(map[MsgID]bool, len(msgs)-len(added))
	for _, in := range msgs {
		if q.ids.has(in.id) {
			again[in.id] = true
		}
	}
	for _, in := range added {
		delete(again, in.id)
	}
	// The index holds no numbers: the queue is scanned, under mu, only
	// when some message sent again is still queued.
	for seq, m := range q.msgs.all() {
		if len(again) == 0 {
			break
		}
		if again[m.id] {
			delete(again, m.id)
			added = append(added, incoming{id: m.id, tail: m.tail, value: m.value, region: m.region, seq: seq})
		}
	}
	return added
}

// admitLocked checks that msgs may join q, queue name, on this member and
// returns the queue's record: read under the lock a handover takes, its
// settings key applied first (a change applies to this put), the record
// naming this member or none, numbers left and room for them. The caller
// holds q.mu.
func (m *Manager) admitLocked(q *queue, name string, msgs []incoming) (Record, error) {
	v := m.view(name)
	q.applySettingsLocked(v.set, m.clock.Now())
	switch {
	case v.ok && v.rec.Member != m.cfg.MemberID:
		return v.rec, errMoved
	case !q.numbersLeftLocked(len(msgs)):
		return v.rec, errNumbersExhausted(name)
	case !q.roomLocked(msgs):
		return v.rec, errOverCap
	}
	return v.rec, nil
}

// epochOf returns the epoch of the queue's record, 0 when none.
func (m *Manager) epochOf(name string) uint64 {
	rec, _ := m.record(name)
	return rec.Epoch
}

// replicatedForwardTimeout is how long a forwarded put of an
// ack=replicated queue waits for the dispatcher: long enough for it to
// pass over backups that do not answer (replicate) and answer itself.
const replicatedForwardTimeout = 30 * time.Second

// produceRemote forwards msgs to the queue's dispatcher, after handing it
// whatever this member still holds of the queue, so order is kept. When the
// dispatcher cannot be reached, every alive member keeps a copy until a
// dispatcher is elected, so the put still succeeds and nothing is lost.
// It reports let when the first forward was answered OK: the frame that
// carried msgs was encoded before the dispatcher could answer, and
// nothing else took them. checkRows is produceOne's: made before msgs
// are kept here.
func (m *Manager) produceRemote(ctx context.Context, rec Record, name string, msgs []incoming, checkRows func() error) (let bool, err error) {
	ack := m.view(name).set.Ack
	timeout := forwardTimeout
	switch ack {
	case AckInserted:
		timeout = ackWaitTimeout // the dispatcher answers once the rows are in ClickHouse
	case AckReplicated:
		timeout = replicatedForwardTimeout // it may pass backups over first
	}
	b := backoff.Backoff{Min: 10 * time.Millisecond, Max: 320 * time.Millisecond}
	for attempt := 0; ; attempt++ {
		err = nil
		if m.passedOver(rec.Member) {
			err = errNotAnswering(name) // held at once: the reconcile round pings it (readmit)
		} else if q := m.lookup(name); q != nil {
			// Older messages first: hand over what is held, or wait for a
			// handover under way to be answered.
			q.handoverMu.Lock()
			if q.holding() {
				err = m.handoverLocked(q, rec.Member)
			}
			q.handoverMu.Unlock()
		}
		if err == nil {
			err = m.forward(ctx, rec.Member, name, msgs, true, timeout)
		}
		switch status.Code(err) {
		case codes.OK:
			m.metrics.forwards.Add(uint64(len(msgs)))
			return attempt == 0, nil
		case codes.ResourceExhausted, codes.InvalidArgument:
			return false, err
		case codes.FailedPrecondition:
			// The dispatcher moved, or a claim is settling between members:
			// read the record again after a moment. Holding copies here
			// would let later puts overtake these.
			if attempt < 50 { // about 11 s
				select {
				case <-m.clock.After(b.Next()):
				case <-ctx.Done():
					return false, status.FromContextError(ctx.Err()).Err()
				}
				rec = m.dispatcherOf(ctx, name, claimAsProducer)
				if rec.Member == m.cfg.MemberID {
					_, err := m.produceOne(ctx, name, msgs, checkRows)
					return false, err
				}
				continue
			}
			return false, status.Error(codes.Unavailable, "dispatch: the dispatcher of "+name+" did not settle; retry")
		}
		m.noteIfUnreachable(ctx, rec.Member, err)
		if ack == AckInserted || ack == AckReplicated {
			// Copies held here would return before the rows are in
			// ClickHouse, or with no backup holding them (the
			// dispatcher may even have queued them and answered that no
			// member could keep a copy): the producer retries instead.
			return false, err
		}
		if checkRows != nil {
			if err := checkRows(); err != nil {
				return false, err
			}
		}
		m.log.Log(ctx, m.warns.level("unreachable "+name, m.clock.Now()), "dispatcher unreachable; holding copies on every member", "queue", name, "dispatcher", gossip.ID(rec.Member), "err", err)
		return false, m.hold(ctx, name, msgs)
	}
}

// Ack implements kv.Queues: the acknowledgement goes to the queue's
// dispatcher, wherever the consumer is. A ClickHouse queue's rows are
// acknowledged by their insert alone: a delete of a delivery key of one
// is InvalidArgument, or any client that may write the key dropped a
// row before it landed.
func (m *Manager) Ack(ctx context.Context, key []byte) (bool, error) {
	k := ParseKey(string(key))
	if err := checkAckable(k.Queue); err != nil {
		return false, err
	}
	if from, ok := m.deliveredBy(k.Queue, string(key)); ok && from != m.cfg.MemberID && m.alive(from) {
		// To the dispatcher that delivered it; one serf reports gone
		// handed nothing over, and the record names who has the queue.
		return m.ackRemote(ctx, from, k)
	}
	rec, ok := m.record(k.Queue)
	if !ok || rec.Member == m.cfg.MemberID || m.cluster == nil {
		return m.ackHere(k.Queue, k.Seq, k.Tail, k.Consumer), nil
	}
	return m.ackRemote(ctx, rec.Member, k)
}

// checkAckable refuses an acknowledgement of a ClickHouse queue's row.
func checkAckable(queue string) error {
	if _, ch := sink.TableOf(queue); ch {
		return status.Error(codes.InvalidArgument, "etcdserver: "+queue+" is drained into ClickHouse by the cluster; its rows are acknowledged by their insert, not by a delete")
	}
	return nil
}

// ackHere acknowledges a message of a queue held here. A queue this member
// holds no state of has no message to acknowledge: the ack is not acked.
// When the record names this member, the messages may be on their way (a
// takeover from a backup's copies, a handover): the queue is made, so
// that it remembers the ack and drops the message when it arrives
// (queue.early), rather than deliver it again. Otherwise it makes no
// queue: a client or a peer naming queues at random must not grow the
// manager.
func (m *Manager) ackHere(queue string, seq uint64, tail, consumer string) bool {
	q := m.lookup(queue)
	if q == nil {
		if m.records == nil {
			return false // no key space: no record names it
		}
		if rec, ok := m.record(queue); !ok || rec.Member != m.cfg.MemberID {
			return false
		}
		q = m.queueFor(queue)
	}
	return q.ack(seq, tail, consumer, m.clock.Now())
}

// Consume implements kv.Queues: the consumer is recorded in the KV, and
// bound to the queue here when this member dispatches it, or to the
// dispatcher's stream otherwise; the reconcile loop rebinds it when the
// dispatcher changes.
func (m *Manager) Consume(key []byte, d kv.Deliveries) (func(), error) {
	k, err := checkConsumer(key)
	if err != nil {
		return nil, err
	}
	lc := &localConsumer{m: m, queue: k.Queue, c: &consumer{id: k.Consumer, prefix: k.Prefix, out: d, unacked: make(map[uint64]*message)}}
	m.putConsumer(k)
	// Claimed before the reconcile loop sees the consumer: while the claim
	// is being committed, the loop would bind it to the dispatcher it
	// replaces, and what that one delivered to it would be delivered again
	// once it handed its messages over.
	why := claimAsConsumer
	if q := m.lookup(k.Queue); q != nil {
		if cur, ok := m.record(k.Queue); ok && cur.Member != m.cfg.MemberID && m.alive(cur.Member) && !m.handedOverFirst(q, cur) {
			why = claimAsProducer // the reconcile round claims once they are over
		}
	}
	rec := m.dispatcherOf(context.Background(), k.Queue, why)
	m.mu.Lock()
	m.locals[lc] = struct{}{}
	m.mu.Unlock()
	m.bind(lc, rec)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.locals, lc)
			m.mu.Unlock()
			lc.stop()
			m.deleteConsumer(k)
		})
	}, nil
}

// putConsumer writes the record of a consumer this member hosts, within
// recordWriteTimeout. The watch goes on without it: other members then
// do not know the consumer is here, may dispatch the queue themselves,
// and the consumer streams from them.
func (m *Manager) putConsumer(k Key) {
	ctx, cancel := context.WithTimeout(context.Background(), recordWriteTimeout)
	defer cancel()
	if err := m.records.Put(ctx, consumerPrefix(k.Queue)+k.Consumer, []byte(strconv.FormatUint(m.cfg.MemberID, 10))); err != nil {
		m.log.Warn("consumer record not written", "queue", k.Queue, "consumer", k.Consumer, "err", err)
	}
}

// CheckConsumer returns the error Consume refuses key with, if any
// (kv.ConsumerChecker).
func (m *Manager) CheckConsumer(key []byte) error {
	_, err := checkConsumer(key)
	return err
}

// checkConsumer parses a consumer key, refusing one that is not, whose
// queue name or consumer id is not UTF-8 (members pass them as UTF-8),
// or of a ClickHouse queue.
func checkConsumer(key []byte) (Key, error) {
	k := ParseKey(string(key))
	switch {
	case k.Kind != KindConsumer:
		return k, status.Error(codes.InvalidArgument, "etcdserver: not a consumer key: "+string(key))
	case !utf8.ValidString(k.Queue):
		return k, errQueueNotUTF8(k.Queue)
	case !utf8.ValidString(k.Consumer):
		return k, status.Errorf(codes.InvalidArgument, "etcdserver: consumer id %q is not UTF-8: members pass queue keys as UTF-8", k.Consumer)
	}
	if _, ch := sink.TableOf(k.Queue); ch {
		return k, status.Error(codes.InvalidArgument, "etcdserver: "+k.Queue+" is drained into ClickHouse by the cluster; it takes no consumers")
	}
	return k, nil
}

// deleteConsumer deletes the record of a consumer that left, within
// recordWriteTimeout. Not deleted, it tells other members the consumer
// is still here, which only sways where the queue is dispatched.
func (m *Manager) deleteConsumer(k Key) {
	ctx, cancel := context.WithTimeout(context.Background(), recordWriteTimeout)
	defer cancel()
	if err := m.records.Delete(ctx, consumerPrefix(k.Queue)+k.Consumer); err != nil {
		m.log.Warn("consumer record not deleted", "queue", k.Queue, "consumer", k.Consumer, "err", err)
	}
}

// Status is what /status shows of the queues this member holds.
type Status struct {
	Queues []QueueStatus `json:"queues"`
	// Backups are the copies this member keeps of queues other members
	// dispatch with ack=replicated.
	Backups []BackupStatus `json:"backups"`
	// Omitted counts the queues and backups a member's answer to
	// PeerStatus left out, over its bounds; 0 for a local Status.
	Omitted int `json:"omitted,omitempty"`
	// ClickHouseServers are the servers of the clickhouse_url list as
	// this member sees them; a PeerStatus answer does not carry them.
	ClickHouseServers []sink.ServerState `json:"clickhouse_servers,omitempty"`
}

// Status returns the queues this member holds, by name.
func (m *Manager) Status() Status {
	var st Status
	for _, q := range m.snapshot() {
		qs := q.status()
		qs.LocalConsumers = m.localConsumers(q.name)
		if m.records != nil {
			if rec, ok := ParseRecord(string(m.records.Get(RecordKey(q.name)))); ok {
				qs.Dispatcher = gossip.ID(rec.Member).String()
				qs.Epoch = rec.Epoch
			}
		}
		st.Queues = append(st.Queues, qs)
	}
	st.Backups = m.backupStatus()
	st.ClickHouseServers = m.servers.State()
	return st
}

// peerDialOptions are the options of connections to other members:
// message buffers and codec, and the peer link's credentials.
func peerDialOptions(creds credentials.TransportCredentials) []grpc.DialOption {
	opts := kv.MessageBufferDialOptions()
	if creds != nil {
		opts = append(opts, grpc.WithTransportCredentials(creds))
	}
	return opts
}
