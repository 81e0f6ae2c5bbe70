package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/sink"
)

// AckMode says when a put to a queue returns.
type AckMode string

const (
	// AckQueued returns once the dispatcher holds the message in memory
	// (the default): a dispatcher killed with messages not yet delivered
	// or inserted loses them.
	AckQueued AckMode = "queued"
	// AckReplicated returns once a second member (the dispatcher's
	// backup) also holds it: one member killed loses nothing acknowledged.
	AckReplicated AckMode = "replicated"
	// AckInserted returns once the row's batch is in ClickHouse (ClickHouse
	// queues only).
	AckInserted AckMode = "inserted"
)

// SettingsPrefix is where queue settings live: /config/queues/{name} holds
// one queue's settings as JSON, read at runtime.
const SettingsPrefix = "/config/queues/"

// SettingsKey returns the key of a queue's settings.
func SettingsKey(name string) string { return SettingsPrefix + name }

// Settings are one queue's settings: the member's defaults (Config)
// overridden by the queue's /config/queues/{name} JSON. A changed key
// takes effect at the queue's next put, delivery or batch.
type Settings struct {
	Ack           AckMode
	MaxBytes      int64
	Prefetch      int
	Visibility    time.Duration
	BatchRows     int
	BatchBytes    int
	BatchInterval time.Duration
	// MaxInsertsPerSecond bounds the insert starts of a busy queue: a
	// batch that is not full starts at least 1/MaxInsertsPerSecond after
	// the queue's previous start (drain.go).
	MaxInsertsPerSecond float64
	// MaxInflightInserts bounds the queue's batches in ClickHouse at once.
	MaxInflightInserts int
	RetryMin           time.Duration
	RetryMax           time.Duration
	// Insert are the ClickHouse settings of the queue's INSERTs; they
	// override the cluster's (Config.ClickHouseOptions) by name.
	Insert sink.Settings
	// DeadLetterMaxRows bounds the queue's dead letters: past it the
	// oldest, by number, are deleted (dlq.go). 0 keeps none.
	DeadLetterMaxRows int
	// DeadLetterTTL is how long a dead letter is kept; 0 forever.
	DeadLetterTTL time.Duration
}

// settingsJSON is the JSON of /config/queues/{name}; absent fields keep
// the member's defaults.
type settingsJSON struct {
	Ack           *string `json:"ack"`
	MaxBytes      *int64  `json:"max_bytes"`
	Prefetch      *int    `json:"prefetch"`
	Visibility    *string `json:"visibility"`
	BatchRows     *int    `json:"batch_rows"`
	BatchBytes    *int    `json:"batch_bytes"`
	BatchInterval *string `json:"batch_interval"`
	// MaxInsertsPerSecond is a JSON number, fractions allowed.
	MaxInsertsPerSecond *float64 `json:"max_inserts_per_second"`
	MaxInflightInserts  *int     `json:"max_inflight_inserts"`
	RetryMin            *string  `json:"retry_min"`
	RetryMax            *string  `json:"retry_max"`
	// Settings are ClickHouse settings: numbers, strings or booleans.
	Settings   map[string]json.RawMessage `json:"settings"`
	DLQMaxRows *int                       `json:"dlq_max_rows"`
	DLQTTL     *string                    `json:"dlq_ttl"`
}

// The bounds of max_inserts_per_second and max_inflight_inserts: one
// insert start every 1000 s at the least, so the gap between starts is
// a sane duration; at most 16 batches of a queue in ClickHouse at once,
// each a part and a connection.
const (
	minInsertsPerSecond = 0.001
	maxInsertsPerSecond = 10000
	maxInflightInserts  = 16
)

// maxBatchBytes keeps a batch under what one insert request and the peer
// frames carry comfortably.
const maxBatchBytes = 256 << 20

// parseSettings applies the JSON raw (a queue's settings key) to def.
// Unknown fields, wrong types and values out of range are errors.
func parseSettings(name string, raw []byte, def Settings) (Settings, error) {
	s := def
	if len(bytes.TrimSpace(raw)) == 0 {
		return s, errors.New("settings must be a JSON object, e.g. {\"ack\":\"replicated\"}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var j settingsJSON
	if err := dec.Decode(&j); err != nil {
		return s, fmt.Errorf("settings: %w", err)
	}
	if dec.More() {
		return s, errors.New("settings: one JSON object only")
	}
	if j.Ack != nil {
		switch m := AckMode(*j.Ack); m {
		case AckQueued, AckReplicated:
			s.Ack = m
		case AckInserted:
			if _, ch := sink.TableOf(name); !ch {
				return s, fmt.Errorf("settings: ack %q applies to ClickHouse queues (ch:{table}) only", m)
			}
			s.Ack = m
		default:
			return s, fmt.Errorf("settings: ack %q: want queued, replicated or inserted", *j.Ack)
		}
	}
	ints := []struct {
		name     string
		v        *int
		min, max int
		dst      *int
	}{
		{"prefetch", j.Prefetch, 1, 1 << 20, &s.Prefetch},
		{"batch_rows", j.BatchRows, 1, maxBatchRows, &s.BatchRows},
		{"batch_bytes", j.BatchBytes, 1, maxBatchBytes, &s.BatchBytes},
		{"dlq_max_rows", j.DLQMaxRows, 0, maxDeadLetterRows, &s.DeadLetterMaxRows},
		{"max_inflight_inserts", j.MaxInflightInserts, 1, maxInflightInserts, &s.MaxInflightInserts},
	}
	for _, f := range ints {
		if f.v == nil {
			continue
		}
		if *f.v < f.min || *f.v > f.max {
			return s, fmt.Errorf("settings: %s %d: want %d to %d", f.name, *f.v, f.min, f.max)
		}
		*f.dst = *f.v
	}
	if r := j.MaxInsertsPerSecond; r != nil {
		if !(*r >= minInsertsPerSecond && *r <= maxInsertsPerSecond) {
			return s, fmt.Errorf("settings: max_inserts_per_second %v: want %v to %v", *r, minInsertsPerSecond, maxInsertsPerSecond)
		}
		s.MaxInsertsPerSecond = *r
	}
	if j.MaxBytes != nil {
		if *j.MaxBytes < 1 {
			return s, fmt.Errorf("settings: max_bytes %d: want at least 1", *j.MaxBytes)
		}
		s.MaxBytes = *j.MaxBytes
	}
	durs := []struct {
		name     string
		v        *string
		min, max time.Duration
		dst      *time.Duration
	}{
		{"visibility", j.Visibility, time.Second, 24 * time.Hour, &s.Visibility},
		{"batch_interval", j.BatchInterval, 0, time.Minute, &s.BatchInterval},
		{"retry_min", j.RetryMin, time.Millisecond, time.Hour, &s.RetryMin},
		{"retry_max", j.RetryMax, time.Millisecond, time.Hour, &s.RetryMax},
	}
	for _, f := range durs {
		if f.v == nil {
			continue
		}
		d, err := time.ParseDuration(*f.v)
		if err != nil {
			return s, fmt.Errorf("settings: %s %q: want a duration such as \"50ms\" or \"30s\"", f.name, *f.v)
		}
		if d < f.min || d > f.max {
			return s, fmt.Errorf("settings: %s %v: want %v to %v", f.name, d, f.min, f.max)
		}
		*f.dst = d
	}
	if j.DLQTTL != nil {
		d, err := parseLetterTTL(*j.DLQTTL)
		if err != nil {
			return s, fmt.Errorf("settings: %w", err)
		}
		s.DeadLetterTTL = d
	}
	if s.RetryMin > s.RetryMax {
		return s, fmt.Errorf("settings: retry_min %v is above retry_max %v", s.RetryMin, s.RetryMax)
	}
	if j.Settings != nil {
		ins, err := insertSettings(j.Settings)
		if err != nil {
			return s, err
		}
		s.Insert = ins
	}
	return s, nil
}

// insertSettings reads the "settings" object of a queue's settings: each
// value a JSON number (sent as written), string or boolean (sent as 1 or
// 0), each name and value as sink.CheckSetting allows.
func insertSettings(raw map[string]json.RawMessage) (sink.Settings, error) {
	m := make(map[string]string, len(raw))
	for name, v := range raw {
		if err := sink.CheckSetting(name, ""); err != nil {
			return sink.Settings{}, settingsError(err)
		}
		var value string
		switch v = bytes.TrimSpace(v); {
		case len(v) == 0:
		case v[0] == '"':
			if err := json.Unmarshal(v, &value); err != nil {
				return sink.Settings{}, fmt.Errorf("settings: settings: %q: %w", name, err)
			}
		case string(v) == "true":
			value = "1"
		case string(v) == "false":
			value = "0"
		case v[0] == '-' || '0' <= v[0] && v[0] <= '9':
			value = string(v) // a JSON number, as written: no float64 round trip
		default:
			return sink.Settings{}, fmt.Errorf("settings: settings: %q: want a number, a string or a boolean, not %.32s", name, v)
		}
		m[name] = value
	}
	ins, err := sink.ParseSettings(m)
	if err != nil {
		return sink.Settings{}, settingsError(err)
	}
	return ins, nil
}

// settingsError is a refused ClickHouse setting in the words of a
// settings key's error: settings: name "a&b": ....
func settingsError(err error) error {
	return fmt.Errorf("settings: %s", strings.TrimPrefix(err.Error(), sink.ErrBadSetting.Error()+": "))
}

// Check implements kv.Queues: a put to /config/queues/{name} must hold
// settings that parse, so a running queue never reads a bad value, and a
// put to a dispatcher record /q/{name} a record ("<member>;epoch=<n>").
func (m *Manager) Check(key, value []byte) error {
	if k := ParseKey(string(key)); k.Kind == KindRecord {
		if _, ok := ParseRecord(string(value)); !ok {
			return status.Error(codes.InvalidArgument, "etcdserver: "+string(key)+" is the queue's dispatcher record, written by chute: \"<member-id>;epoch=<n>\", n at most "+strconv.FormatUint(maxEpoch, 10))
		}
		return nil
	}
	name, ok := strings.CutPrefix(string(key), SettingsPrefix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return status.Error(codes.InvalidArgument, "etcdserver: "+string(key)+": queue settings live at "+SettingsPrefix+"{name}, one key per queue")
	}
	if _, err := parseSettings(name, value, m.cfg.defaults()); err != nil {
		return status.Error(codes.InvalidArgument, "etcdserver: "+string(key)+": "+err.Error())
	}
	return nil
}

// insertGap is the least time between the previous insert start of a
// busy queue and the start of a batch that is not full.
func (s Settings) insertGap() time.Duration {
	if s.MaxInsertsPerSecond <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / s.MaxInsertsPerSecond)
}

// limits are the settings a queue applies to its messages.
func (s Settings) limits() limits {
	return limits{maxBytes: s.MaxBytes, prefetch: s.Prefetch, visibility: s.Visibility}
}

// refreshSettings applies changed settings to a queue.
func (m *Manager) refreshSettings(q *queue) {
	s := m.settingsOf(q.name)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.applySettingsLocked(s, m.clock.Now())
}

// applySettingsLocked applies s if it changed. The caller holds q.mu.
func (q *queue) applySettingsLocked(s Settings, now time.Time) {
	if s != q.set {
		q.set, q.lim = s, s.limits()
		q.deliverLocked(now) // a larger prefetch may deliver more
	}
}

// defaults returns the settings of a queue with no settings key.
func (c Config) defaults() Settings {
	return Settings{
		Ack: AckQueued, MaxBytes: c.MaxQueueBytes, Prefetch: c.Prefetch, Visibility: c.Visibility,
		BatchRows: c.BatchRows, BatchBytes: c.BatchBytes, BatchInterval: c.BatchInterval,
		MaxInsertsPerSecond: c.MaxInsertsPerSecond, MaxInflightInserts: c.MaxInflightInserts,
		RetryMin: c.RetryMin, RetryMax: c.RetryMax,
		DeadLetterMaxRows: c.DeadLetterMaxRows, DeadLetterTTL: c.DeadLetterTTL,
	}
}

// settingsCache keeps each queue's parsed settings with the raw value they
// came from, so a read costs a KV lookup and a byte comparison.
type settingsCache struct {
	mu sync.RWMutex // guards byName; every put reads it
	// byName holds the last value read per queue.
	byName map[string]cachedSettings
}

type cachedSettings struct {
	raw []byte
	s   Settings
}

// forget drops name's settings.
func (c *settingsCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byName, name)
}

// settingsOf returns a queue's current settings. A stored value that does
// not parse (it was checked when put, so only a value written by an older
// version could) leaves the defaults, with a warning.
func (m *Manager) settingsOf(name string) Settings {
	return m.settingsAt(name, SettingsKey(name))
}

// settingsAt is settingsOf for the key of the settings, which a queue keeps
// so a put builds no key.
func (m *Manager) settingsAt(name, key string) Settings {
	def := m.cfg.defaults()
	if m.records == nil {
		return def
	}
	raw := m.records.Get(key)
	c := &m.settings
	c.mu.RLock()
	got, ok := c.byName[name]
	c.mu.RUnlock()
	if ok && bytes.Equal(got.raw, raw) {
		return got.s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := def
	if raw != nil {
		var err error
		if s, err = parseSettings(name, raw, def); err != nil {
			m.log.Warn("queue settings ignored", "queue", name, "key", SettingsKey(name), "err", err)
			s = def
		}
	}
	if c.byName == nil || len(c.byName) >= maxCachedNames {
		c.byName = make(map[string]cachedSettings) // as viewCache
	}
	c.byName[name] = cachedSettings{raw: bytes.Clone(raw), s: s}
	return s
}
