package sink

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// ServersConfig configures Servers.
type ServersConfig struct {
	// DownMin is how long a server that failed a batch with a transient
	// error is passed over; each further failure in a row doubles it, up
	// to DownMax. Zero: 1 s.
	DownMin time.Duration
	// DownMax caps the down period. Zero: 30 s. Below DownMin: DownMin.
	DownMax time.Duration
	// Now is the clock down periods are measured on. Nil: time.Now.
	Now func() time.Time
}

// DefaultServersConfig returns the configuration NewServers uses for
// zero fields: down for 1 s, doubling to 30 s, on the real clock.
func DefaultServersConfig() ServersConfig {
	return ServersConfig{DownMin: time.Second, DownMax: 30 * time.Second, Now: time.Now}
}

// Validate reports a configuration NewServers would not use as written.
func (c ServersConfig) Validate() error {
	if c.DownMin < 0 || c.DownMax < 0 {
		return fmt.Errorf("sink: down periods %s and %s: must not be negative", c.DownMin, c.DownMax)
	}
	return nil
}

// Servers is the health of the ClickHouse servers of a clickhouse_url
// list, as one member sees them. Batches go round-robin over the servers
// that are up; a server that fails a batch with a transient error (no
// answer, a timeout, an overloaded server) is down for a while, doubling
// with each failure in a row, and the caller sends the batch to another
// one at once. Data and config errors are the table's, not the server's:
// they leave it up. It is safe for concurrent use; the drainers of every
// queue share one.
type Servers struct {
	downMin, downMax time.Duration
	now              func() time.Time

	mu   sync.Mutex // guards list and next
	list []*server  // in the order of the list given to Set
	next int        // index in list of the next server round-robin
}

// server is one server's health and counts.
type server struct {
	ep        Endpoint
	downUntil time.Time // zero or past: up
	fails     int       // transient failures in a row
	batches   [4]uint64 // by Class of the answer
	wire      uint64    // bytes sent in batches
}

// NewServers returns a Servers with no server; Set gives it some.
func NewServers(cfg ServersConfig) *Servers {
	def := DefaultServersConfig()
	if cfg.DownMin <= 0 {
		cfg.DownMin = def.DownMin
	}
	if cfg.DownMax <= 0 {
		cfg.DownMax = def.DownMax
	}
	cfg.DownMax = max(cfg.DownMax, cfg.DownMin)
	if cfg.Now == nil {
		cfg.Now = def.Now
	}
	return &Servers{downMin: cfg.DownMin, downMax: cfg.DownMax, now: cfg.Now}
}

// Set makes eps the servers, in that order, as ParseURLs returns them.
// A server already known by its host:port keeps its health and counts
// (its user, password and other fields come from eps); the others are
// forgotten. Calling it at every batch with the same list is cheap.
func (s *Servers) Set(eps []Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(eps) == len(s.list) {
		same := true
		for i, ep := range eps {
			if s.list[i].ep.Addr != ep.Addr {
				same = false
				break
			}
		}
		if same {
			for i, ep := range eps {
				s.list[i].ep = ep
			}
			return
		}
	}
	list := make([]*server, 0, len(eps))
	for _, ep := range eps {
		i := slices.IndexFunc(s.list, func(sv *server) bool { return sv.ep.Addr == ep.Addr })
		if i >= 0 {
			sv := s.list[i]
			sv.ep = ep
			list = append(list, sv)
			continue
		}
		list = append(list, &server{ep: ep})
	}
	s.list = list
	if s.next >= len(list) {
		s.next = 0
	}
}

// Pick returns the next server that is up, round-robin, skipping the
// addresses in tried (those that already failed the batch at hand). When
// none is up it returns the one whose down period ends first and how long
// until then: the caller waits and sends the batch there. ok is false
// when no server is left, every one being in tried or none Set.
//
// A list of one server is never passed over: there is no other to send
// to, so Pick returns it with no wait, and the caller's own retry backoff
// paces the batches (a queue's retry_min and retry_max).
func (s *Servers) Pick(tried ...string) (ep Endpoint, wait time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) == 1 && !slices.Contains(tried, s.list[0].ep.Addr) {
		return s.list[0].ep, 0, true
	}
	now := s.now()
	var soonest *server
	for i := range s.list {
		k := (s.next + i) % len(s.list)
		sv := s.list[k]
		if slices.Contains(tried, sv.ep.Addr) {
			continue
		}
		if !sv.downUntil.After(now) {
			s.next = (k + 1) % len(s.list)
			return sv.ep, 0, true
		}
		if soonest == nil || sv.downUntil.Before(soonest.downUntil) {
			soonest = sv
		}
	}
	if soonest == nil {
		return Endpoint{}, 0, false
	}
	return soonest.ep, soonest.downUntil.Sub(now), true
}

// Record notes the answer res to a batch sent to the server at addr: a
// transient failure marks it down for its next down period, which Record
// returns; any answer of ClickHouse's (OK, data or config) marks it up
// and returns 0. A failure of a server already down (a batch sent before
// another's failure marked it) counts once: it returns the rest of the
// period and does not lengthen it. A transient failure of the query, not
// the server (Result.OverQueryLimit: its own time or memory limit), marks it up:
// every batch of every queue would wait out its down period for one
// batch too large for the limits. A server no longer Set is ignored.
func (s *Servers) Record(addr string, res Result) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.list, func(sv *server) bool { return sv.ep.Addr == addr })
	if i < 0 {
		return 0
	}
	sv := s.list[i]
	if c := int(res.Class); c >= 0 && c < len(sv.batches) {
		sv.batches[c]++
	}
	sv.wire += uint64(res.WireBytes)
	if res.Class != ClassTransient || res.OverQueryLimit() {
		sv.fails, sv.downUntil = 0, time.Time{}
		return 0
	}
	now := s.now()
	if sv.downUntil.After(now) {
		return sv.downUntil.Sub(now)
	}
	sv.fails++
	down := s.downMin
	for i := 1; i < sv.fails && down < s.downMax; i++ {
		down *= 2
	}
	down = min(down, s.downMax)
	sv.downUntil = now.Add(down)
	return down
}

// ServerState is one server as /status shows it.
type ServerState struct {
	// Server is host:port; it never holds a password.
	Server string `json:"server"`
	TLS    bool   `json:"tls,omitempty"`
	Up     bool   `json:"up"`
	// DownUntil is when a server that is down is tried again.
	DownUntil time.Time `json:"down_until,omitzero"`
	// Failures are the transient failures in a row.
	Failures int `json:"consecutive_failures"`
	// Batches counts the batches sent, by the class of the answer: ok,
	// transient, data, config.
	Batches map[string]uint64 `json:"batches"`
	// WireBytes are the bytes of the batches sent, compressed.
	WireBytes uint64 `json:"wire_bytes"`
}

// State returns every server in the order of the list.
func (s *Servers) State() []ServerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]ServerState, 0, len(s.list))
	for _, sv := range s.list {
		st := ServerState{Server: sv.ep.Addr, TLS: sv.ep.TLS, Up: !sv.downUntil.After(now), Failures: sv.fails,
			Batches: make(map[string]uint64, len(sv.batches)), WireBytes: sv.wire}
		if !st.Up {
			st.DownUntil = sv.downUntil.UTC()
		}
		for c, n := range sv.batches {
			st.Batches[Class(c).String()] = n
		}
		out = append(out, st)
	}
	return out
}
