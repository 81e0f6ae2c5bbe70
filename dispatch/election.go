package dispatch

import (
	"context"
	"iter"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"chute/gossip"
	"chute/gossip/peer/peerpb"
)

// Cluster is what queues need to know of the other members. gossip's
// Membership implements it. Peers must be safe for concurrent use.
type Cluster interface {
	// Peers returns the alive members other than this one.
	Peers() []gossip.Peer
	// Lookup returns the member of that id, alive or not, as long as
	// the membership knows it.
	Lookup(id uint64) (gossip.Peer, bool)
}

// claimReason says why a member may claim a queue.
type claimReason int

const (
	// claimNever reads the record and claims nothing.
	claimNever claimReason = iota
	// claimAsProducer claims a queue nobody alive dispatches.
	claimAsProducer
	// claimAsConsumer also claims a queue whose dispatcher hosts no
	// consumer, so that deliveries stay on the consumer's member.
	claimAsConsumer
)

// peerAddr returns the peer address of an alive member other than this one.
func (m *Manager) peerAddr(id uint64) (string, bool) {
	if m.cluster == nil {
		return "", false
	}
	for _, p := range m.cluster.Peers() {
		if p.ID == id {
			return p.Addr, true
		}
	}
	return "", false
}

// alive reports whether member is this one or an alive peer.
func (m *Manager) alive(member uint64) bool {
	if member == m.cfg.MemberID {
		return true
	}
	_, ok := m.peerAddr(member)
	return ok
}

// record returns the queue's dispatcher record, ok false when there is
// none (or it does not parse).
func (m *Manager) record(name string) (Record, bool) {
	return m.recordAt(RecordKey(name))
}

// recordAt is record for the key of the record, which a queue keeps so a
// put builds no key.
func (m *Manager) recordAt(key string) (Record, bool) {
	if m.records == nil {
		return Record{Member: m.cfg.MemberID}, true
	}
	return ParseRecord(string(m.records.Get(key)))
}

// keysView is what a put reads of a queue's keys: its dispatcher record
// and its settings, as the KV held them when RecordStore.Changes was
// changes. A view is never modified; a newer one replaces it.
type keysView struct {
	changes uint64
	raw     []byte // the record's value, the KV's (never modified); nil: none
	rec     Record
	ok      bool // the record exists and parses
	set     Settings
}

// viewCache keeps the last keysView of each queue a put read, so that a
// put reads its queue's record and settings with an atomic load and a
// map lookup while the key space does not change, rather than looking
// both up (and allocating) several times.
type viewCache struct {
	mu     sync.RWMutex // guards byName; every put reads it
	byName map[string]*keysView
}

// maxCachedNames bounds the queue names the views and the settings
// caches each keep; past it, the cache starts again. A member forgets
// the entries of the queues it forgets, and keeps others for queues it
// only forwards to.
const maxCachedNames = 1 << 14

// forget drops name's view.
func (c *viewCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byName, name)
}

// view returns the queue's record and settings as the KV holds them now.
func (m *Manager) view(name string) *keysView {
	if m.records == nil {
		return &keysView{rec: Record{Member: m.cfg.MemberID}, ok: true, set: m.cfg.defaults()}
	}
	n := m.records.Changes()
	c := &m.views
	c.mu.RLock()
	v := c.byName[name]
	c.mu.RUnlock()
	if v != nil && v.changes == n {
		return v
	}
	// Read after n: at least as new as n, so kept under n.
	raw := m.records.Get(RecordKey(name))
	rec, ok := ParseRecord(string(raw))
	v = &keysView{changes: n, raw: raw, rec: rec, ok: ok, set: m.settingsOf(name)}
	c.mu.Lock()
	if c.byName == nil || len(c.byName) >= maxCachedNames {
		c.byName = make(map[string]*keysView) // names come from clients: a cache, never a memory of them all
	}
	if old := c.byName[name]; old == nil || old.changes <= n {
		c.byName[name] = v
	}
	c.mu.Unlock()
	return v
}

// pingTimeout bounds the question to a dispatcher gossip calls gone
// before a claim: longer than a loaded member takes to answer, short
// enough for a put to wait.
const pingTimeout = 500 * time.Millisecond

// answers reports whether member, which gossip calls gone, answers a
// Ping on the peer link within pingTimeout (and ctx): its queues still
// serve.
func (m *Manager) answers(ctx context.Context, member uint64) bool {
	if m.cluster == nil || member == m.cfg.MemberID || !m.answersPing(ctx, member) {
		return false
	}
	m.log.Info("dispatcher gossip calls gone answers; not claiming", "dispatcher", gossip.ID(member))
	return true
}

// ping asks the member at peer address addr whether its queues serve,
// and, queue given, whether it holds anything of that queue, within
// pingTimeout and ctx.
func (m *Manager) ping(ctx context.Context, addr, queue string) (*peerpb.PingResponse, error) {
	conn, err := m.conn(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	return peerpb.NewQueuesClient(conn).Ping(m.outgoing(ctx), &peerpb.PingRequest{Queue: queue})
}

// recordWriteTimeout bounds a write of a record (a claim, a consumer
// record, a dead letter) within the caller's own deadline. A producer's
// put waits at most this long for a claim: past it, its messages are
// held as copies, and the next put or reconcile round claims again.
const recordWriteTimeout = 2 * time.Second

// dispatcherOf returns the queue's dispatcher, first claiming the queue for
// this member when why allows it. A claim writes the record with the next
// epoch, compared against the record read, so of two members claiming from
// the same record one wins; the other hands over what it holds. A claim
// that cannot be written (no leader, a timeout) returns the record read:
// the caller treats the queue as not dispatched here, and what holds its
// messages claims again later.
func (m *Manager) dispatcherOf(ctx context.Context, name string, why claimReason) Record {
	for range 3 {
		v := m.view(name)
		raw, rec, ok := v.raw, v.rec, v.ok
		failover := false // claimed from a member gossip called gone
		if ok && rec.Member == m.cfg.MemberID {
			if m.mayNumber(name, rec) {
				return rec
			}
			// Not written by this run of the member: an earlier run may
			// have numbered messages in its epoch. The next one, so that
			// no number is given twice (mayNumber).
		} else if claim, gone := m.shouldClaim(ctx, name, rec, ok, why); !claim {
			return rec
		} else {
			failover = gone
		}
		epoch, more := nextEpoch(rec)
		if !more {
			m.log.Warn("dispatcher record at its last epoch; not claiming", "queue", name, "epoch", rec.Epoch)
			return rec
		}
		next := rec.movedTo(m.claimant(), epoch)
		if !ok {
			raw = nil
		}
		noted := failover && next.Member == m.cfg.MemberID
		if noted {
			// Before the write, as entered (writeRecord): once it is
			// applied, another goroutine (a consumer's watch) may enter
			// the epoch before the write's answer comes back here.
			m.failedOver.Store(name, next.Epoch)
		}
		written, err := m.writeRecord(ctx, name, raw, next)
		if noted && err == nil && !written {
			// Lost to another claim. A write that failed may have been
			// applied: the note stays, and costs at most an await.
			m.failedOver.CompareAndDelete(name, next.Epoch)
		}
		if err != nil {
			return rec
		}
		if written {
			msg, level := "dispatcher claimed", slog.LevelInfo
			switch {
			case next.Member != m.cfg.MemberID:
				msg = "dispatcher claimed for another member: this one is leaving"
			case !failover:
				// A new queue, this member's own after a restart, or one
				// moving to a consumer's member: routine, a line per
				// request with a queue per request. A failover is told
				// by what gossip said before the ping and the write,
				// after which it may call the member alive again (a
				// partition healed).
				level = slog.LevelDebug
			}
			m.log.Log(ctx, level, msg, "queue", name, "epoch", next.Epoch, "dispatcher", gossip.ID(next.Member), "previous", gossip.ID(rec.Member))
			m.metrics.elections.Add(1)
			return next
		}
	}
	return m.view(name).rec
}

// claimant is the member a claim names: this one, or, once it is leaving
// (Handoff began), another alive member, as Handoff picks one, so that a
// put that comes while it leaves does not make it the dispatcher of a
// queue it takes away with it; this one when it is alone.
func (m *Manager) claimant() uint64 {
	if m.departing.Load() {
		if to := m.backupCandidate(); to != 0 {
			return to
		}
	}
	return m.cfg.MemberID
}

// claimFrom claims a queue whose record names member, alive or not (it
// restarted and lost the queue), and returns the record as it stands;
// an error when the claim could not be written.
func (m *Manager) claimFrom(ctx context.Context, name string, member uint64) (Record, error) {
	raw := m.records.Get(RecordKey(name))
	rec, ok := ParseRecord(string(raw))
	if !ok || rec.Member != member {
		return rec, nil
	}
	epoch, more := nextEpoch(rec)
	if !more {
		m.log.Warn("dispatcher record at its last epoch; not claiming", "queue", name, "epoch", rec.Epoch)
		return rec, nil
	}
	next := rec.movedTo(m.cfg.MemberID, epoch)
	written, err := m.writeRecord(ctx, name, raw, next)
	if err != nil {
		return rec, err
	}
	if written {
		m.log.Info("dispatcher claimed from a restarted member", "queue", name, "epoch", next.Epoch, "previous", gossip.ID(member).String())
		m.metrics.elections.Add(1)
		return next, nil
	}
	rec, _ = ParseRecord(string(m.records.Get(RecordKey(name))))
	return rec, nil
}

// mayNumber reports whether this member may number messages of queue
// name under rec, a record naming it: only in an epoch whose record this
// run of its process wrote (a claim). A member restarted on its data dir
// found its record at the epoch it had and numbered again from that
// epoch's first number: a consumer's late acknowledgement of a delivery
// from before the restart then named another message, never delivered,
// and removed it. A record another member wrote naming this one (a
// hand-off) is claimed again too, at the cost of an epoch: this run
// cannot tell it from its own earlier run's. True with no key space
// (unit tests) or no record.
func (m *Manager) mayNumber(name string, rec Record) bool {
	if m.records == nil || rec.Epoch == 0 {
		return true
	}
	e, ok := m.entered.Load(name)
	return ok && e.(uint64) == rec.Epoch
}

// enterSoon claims the next epoch of queue name, which this member
// dispatches under a record it did not write in this run (mayNumber), in
// a goroutine of its own, one per queue at a time: a put or a frame that
// needs numbers asks again meanwhile.
func (m *Manager) enterSoon(name string) {
	if _, busy := m.entering.LoadOrStore(name, true); busy {
		return
	}
	select {
	case <-m.stop:
		m.entering.Delete(name)
		return
	default:
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.entering.Delete(name)
		ctx, cancel := context.WithTimeout(context.Background(), recordWriteTimeout)
		defer cancel()
		// Only while the record still names this member: a queue
		// forgotten meanwhile (its record deleted) is not claimed again.
		v := m.view(name)
		if !v.ok || v.rec.Member != m.cfg.MemberID || m.mayNumber(name, v.rec) {
			return
		}
		if epoch, more := nextEpoch(v.rec); more {
			_, _ = m.writeRecord(ctx, name, v.raw, v.rec.movedTo(m.cfg.MemberID, epoch)) // refused: the next ask
		}
	}()
}

// writeRecord writes next as the queue's dispatcher record in place of
// raw (nil: none), within recordWriteTimeout, and reports whether it
// did. A write that fails is logged here with the record not written.
func (m *Manager) writeRecord(ctx context.Context, name string, raw []byte, next Record) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, recordWriteTimeout)
	defer cancel()
	if next.Member == m.cfg.MemberID {
		// Before the write: once applied, a put reads the record, and
		// found it not entered (mayNumber) it claimed the epoch after.
		// An epoch this run tried to write is one no earlier run gave
		// numbers in, written or not.
		m.entered.Store(name, next.Epoch)
	}
	written, err := m.records.CompareAndPut(ctx, RecordKey(name), raw, []byte(next.String()))
	if err != nil {
		m.log.Log(ctx, m.warns.level("claim "+name, m.clock.Now()), "dispatcher record not written", "queue", name, "dispatcher", gossip.ID(next.Member), "epoch", next.Epoch, "err", err)
	}
	return written, err
}

// shouldClaim reports whether this member claims the queue name, whose
// record is rec (ok false: none), for why, and gone whether it claims
// from a dispatcher gossip calls gone (a failover).
func (m *Manager) shouldClaim(ctx context.Context, name string, rec Record, ok bool, why claimReason) (claim, gone bool) {
	switch {
	case why == claimNever:
		return false, false
	case !ok:
		return true, false
	case !m.alive(rec.Member):
		// Gossip calls the dispatcher gone; a member that was cut off
		// (a partition just healed) may see it so for a moment after
		// the key space lets it write again. The dispatcher is asked:
		// one that answers keeps the queue.
		return !m.records.Writable() || !m.answers(ctx, rec.Member), true
	case why == claimAsConsumer:
		// A member leaving keeps its consumers' watches until its etcd
		// API stops: claimed for them, the queue would go to another
		// member (claimant) at the next epoch every round.
		return !m.departing.Load() && !m.hostsConsumer(name, rec.Member), false
	}
	return false, false
}

// consumerPrefix is where consumer records of a queue live: one key per
// consumer, /q/{name}/c/{id}, whose value is the member hosting it.
func consumerPrefix(name string) string { return "/q/" + name + "/c/" }

// consumerRecords yields the consumer records of queue name, each key
// with its value, leaving out keys below a consumer's.
func (m *Manager) consumerRecords(name string) iter.Seq2[string, []byte] {
	prefix := consumerPrefix(name)
	return func(yield func(string, []byte) bool) {
		for key, v := range m.records.Prefix(prefix) {
			if !strings.Contains(key[len(prefix):], "/") && !yield(key, v) {
				return
			}
		}
	}
}

// hostsConsumer reports whether member hosts a consumer of the queue, by
// the replicated consumer records.
func (m *Manager) hostsConsumer(name string, member uint64) bool {
	for _, v := range m.consumerRecords(name) {
		if id, err := strconv.ParseUint(string(v), 10, 64); err == nil && id == member {
			return true
		}
	}
	return false
}
