package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv"
)

// Config configures a Manager. New never reads flags, files or the
// environment.
type Config struct {
	// MemberID is this member's id, written in the dispatcher records it
	// claims. Required.
	MemberID uint64
	// Prefetch is how many unacknowledged messages a consumer holds at
	// most. Zero: 64.
	Prefetch int
	// Visibility is how long a delivered message may stay unacknowledged
	// before it is delivered again. Zero: 30s.
	Visibility time.Duration
	// MaxQueueBytes caps the bytes (values and keys) a queue holds; a put
	// over it is ResourceExhausted. Zero: 64 MiB.
	MaxQueueBytes int64
	// Logger receives the manager's logs. Nil: discarded.
	Logger *slog.Logger
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// RecordStore is the KV as the manager reads and writes dispatcher records;
// kv.Server implements it.
type RecordStore interface {
	Get(key string) []byte
	CompareAndPut(key string, old, value []byte) bool
}

// Manager serves the queue namespace for kv (it implements kv.Queues): it
// holds the queues this member dispatches and their consumers.
type Manager struct {
	cfg Config
	log *slog.Logger

	records RecordStore // set by Start

	mu     sync.Mutex // guards queues
	queues map[string]*queue

	counter atomic.Uint64 // message ids of this member
	now     func() time.Time

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var _ kv.Queues = (*Manager)(nil)

// New builds a manager; Start gives it the KV and starts its timers.
func New(cfg Config) (*Manager, error) {
	if cfg.MemberID == 0 {
		return nil, fmt.Errorf("dispatch: member id is required")
	}
	cfg = cfg.withDefaults()
	return &Manager{
		cfg:    cfg,
		log:    cfg.Logger,
		queues: make(map[string]*queue),
		now:    time.Now,
		stop:   make(chan struct{}),
	}, nil
}

// Start gives the manager the KV holding dispatcher records and starts the
// visibility timer.
func (m *Manager) Start(records RecordStore) {
	m.records = records
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.runTimers()
	}()
}

// Shutdown stops the timers. Queued messages are in memory and are lost
// with the process. It is safe to call more than once.
func (m *Manager) Shutdown(context.Context) error {
	m.stopOnce.Do(func() { close(m.stop) })
	m.wg.Wait()
	return nil
}

func (m *Manager) runTimers() {
	tick := time.NewTicker(max(m.cfg.Visibility/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
			now := m.now()
			for _, q := range m.snapshot() {
				q.expire(now)
			}
		}
	}
}

// snapshot returns the queues, sorted by name.
func (m *Manager) snapshot() []*queue {
	m.mu.Lock()
	defer m.mu.Unlock()
	qs := make([]*queue, 0, len(m.queues))
	for _, q := range m.queues {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	return qs
}

// Route implements kv.Queues.
func (m *Manager) Route(key []byte) kv.Route {
	switch ParseKey(string(key)).Kind {
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

// queueFor returns the queue called name, creating it and claiming its
// dispatcher record when needed.
func (m *Manager) queueFor(name string) *queue {
	m.mu.Lock()
	q, ok := m.queues[name]
	if !ok {
		q = newQueue(name, limits{maxBytes: m.cfg.MaxQueueBytes, prefetch: m.cfg.Prefetch, visibility: m.cfg.Visibility})
		m.queues[name] = q
	}
	m.mu.Unlock()
	if !ok {
		m.claim(name)
	}
	return q
}

// claim writes this member as the queue's dispatcher if nobody is.
func (m *Manager) claim(name string) {
	if m.records == nil {
		return
	}
	rec := Record{Member: m.cfg.MemberID, Epoch: 1}
	if m.records.CompareAndPut(RecordKey(name), nil, []byte(rec.String())) {
		m.log.Info("dispatcher claimed", "queue", name, "epoch", rec.Epoch)
	}
}

// errOverCap is etcd's "too many requests": the queue is at its byte cap.
var errOverCap = rpctypes.ErrGRPCRequestTooManyRequests

// Produce implements kv.Queues: all puts are enqueued, in order, or none.
func (m *Manager) Produce(_ context.Context, puts []*pb.PutRequest) error {
	byQueue := make(map[string][]incoming)
	var names []string
	for _, p := range puts {
		k := ParseKey(string(p.Key))
		if k.Kind != KindProduce {
			return status.Error(codes.InvalidArgument, "etcdserver: not a producer key: "+string(p.Key))
		}
		if _, seen := byQueue[k.Queue]; !seen {
			names = append(names, k.Queue)
		}
		id := MsgID{Origin: m.cfg.MemberID, N: m.counter.Add(1)}
		byQueue[k.Queue] = append(byQueue[k.Queue], incoming{id: id, tail: k.Tail, value: p.Value})
	}
	sort.Strings(names) // lock order
	qs := make([]*queue, len(names))
	for i, name := range names {
		qs[i] = m.queueFor(name)
	}
	for _, q := range qs {
		q.mu.Lock()
		defer q.mu.Unlock()
	}
	for _, q := range qs {
		if !q.roomLocked(byQueue[q.name]) {
			q.stats.Refused++
			return errOverCap
		}
	}
	now := m.now()
	for _, q := range qs {
		q.enqueueLocked(byQueue[q.name], now)
	}
	return nil
}

// Ack implements kv.Queues.
func (m *Manager) Ack(_ context.Context, key []byte) (bool, error) {
	k := ParseKey(string(key))
	m.mu.Lock()
	q := m.queues[k.Queue]
	m.mu.Unlock()
	if q == nil {
		return false, nil
	}
	return q.ack(k.Seq, k.Tail, m.now()), nil
}

// Consume implements kv.Queues.
func (m *Manager) Consume(key []byte, d kv.Deliveries) (func(), error) {
	k := ParseKey(string(key))
	if k.Kind != KindConsumer {
		return nil, status.Error(codes.InvalidArgument, "etcdserver: not a consumer key: "+string(key))
	}
	q := m.queueFor(k.Queue)
	c := &consumer{id: k.Consumer, prefix: k.Prefix, out: d, unacked: make(map[uint64]*message)}
	q.addConsumer(c, m.now())
	var once sync.Once
	return func() {
		once.Do(func() { q.removeConsumer(c, m.now()) })
	}, nil
}

// Status is what /status shows of the queues this member holds.
type Status struct {
	Queues []QueueStatus `json:"queues"`
}

// Status returns the queues this member holds, by name.
func (m *Manager) Status() Status {
	var st Status
	for _, q := range m.snapshot() {
		qs := q.status()
		if m.records != nil {
			if rec, ok := ParseRecord(string(m.records.Get(RecordKey(q.name)))); ok {
				qs.Dispatcher = strconv.FormatUint(rec.Member, 16)
				qs.Epoch = rec.Epoch
			}
		}
		st.Queues = append(st.Queues, qs)
	}
	return st
}
