package dispatch

import (
	"context"
	"strconv"
	"strings"

	"chute/kv/mvcc"
	"chute/sink"
)

// A member forgets an idle queue and deletes its record (forget.go), but
// only a queue it holds state of: the record of a queue it dispatched
// before a restart, and never used since, named it for ever. With a
// queue per request (request/reply), each restart left the records of
// the queues of the minute before it in the key space, on every member.
// So a member looks through the records now and then for ones naming it
// of queues it holds no state of, and adopts each: it makes the queue,
// as a put to it would, and forgets it like any other once it has been
// idle for forgetAfter. Records that are pinned or name a reply_to are
// kept by forget, and not adopted; nor are ClickHouse queues, whose
// drainer keeps them (one per table, not per request).

// The same look deletes the consumer records /q/{name}/c/{id} naming
// this member of consumers it does not host: a consumer's record is
// deleted when it leaves, not when its member crashes or restarts, and
// such records stayed for ever, swaying claims toward a member that hosts
// nothing. A record is deleted only once two looks a minute apart found
// it so: a consumer being registered writes its record before the
// member lists it.

// adoptEvery is how often a member looks for records to adopt; the first
// look is adoptEvery after Start, so that a restart's takeovers have
// rewritten the records of queues other members took meanwhile.
const adoptEvery = forgetAfter

// adoptScan bounds the keys one look reads, adoptPage at a time (one
// read lock of the key space each); the next look goes on from there.
// A page is cut at the first key below a record (a dead letter, a
// consumer), and the next starts after that queue's keys: pages are
// small, so little is read for nothing. adoptMax bounds the queues one
// look adopts.
const (
	adoptScan = 1 << 14
	adoptPage = 32
	adoptMax  = 1024
)

// queuesEnd is where the keys under /q/ end.
const queuesEnd = "/q0"

// adoptRecords adopts, when it is time, the queues whose record names
// this member and of which it holds nothing. The reconcile loop's alone.
func (m *Manager) adoptRecords() {
	now := m.clock.Now()
	if now.Before(m.adoptAt) || !m.records.Writable() {
		return
	}
	m.adoptAt = now.Add(adoptEvery)
	from := m.adoptFrom
	if from == "" {
		from = "/q/"
	}
	hosted := m.hostedConsumers()
	scanned, adopted, deletes := 0, 0, forgetDeletes
	for scanned < adoptScan && adopted < adoptMax {
		page := m.records.Page(from, queuesEnd, adoptPage)
		if len(page) == 0 {
			from = "" // the end: the next look starts again
			break
		}
		for _, kv := range page {
			scanned++
			from = kv.Key + "\x00"
			name, _, below := strings.Cut(strings.TrimPrefix(kv.Key, "/q/"), "/")
			if below {
				// Dead letters, consumers: none is a record. Go on
				// after the queue's keys, once its consumer records
				// are looked at.
				m.sweepConsumerRecords(name, hosted, &deletes)
				from = string(mvcc.PrefixEnd([]byte("/q/" + name + "/")))
				break
			}
			if ParseKey(kv.Key).Kind == KindRecord && m.adoptable(name, kv.Value) {
				m.queueFor(name)
				if adopted++; adopted == adoptMax {
					break
				}
			}
		}
	}
	m.adoptFrom = from
	if adopted > 0 {
		m.log.Info("adopted queues whose records name this member, to forget them once idle", "queues", adopted)
	}
}

// adoptable reports whether name, whose record is raw, is a queue to
// adopt: the record names this member and no more, and the member holds
// no state of the queue.
func (m *Manager) adoptable(name string, raw []byte) bool {
	if _, ok := sink.TableOf(name); ok {
		return false
	}
	rec, ok := ParseRecord(string(raw))
	if !ok || rec.Member != m.cfg.MemberID || rec.Pinned || rec.ReplyTo != "" {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, held := m.queues[name]
	return !held
}

// hostedConsumers returns the consumer record keys of the consumers this
// member hosts.
func (m *Manager) hostedConsumers() map[string]bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	hosted := make(map[string]bool, len(m.locals))
	for lc := range m.locals {
		hosted[consumerPrefix(lc.queue)+lc.c.id] = true
	}
	return hosted
}

// sweepConsumerRecords deletes the consumer records of queue name that
// name this member and none of whose consumers it hosts (hosted), found
// so by the look before too (m.unhosted), at most *deletes more.
func (m *Manager) sweepConsumerRecords(name string, hosted map[string]bool, deletes *int) {
	self := strconv.FormatUint(m.cfg.MemberID, 10)
	before := m.unhosted[name]
	var now map[string]bool // what this look finds stale and keeps for the next
	for key, v := range m.consumerRecords(name) {
		if string(v) != self || hosted[key] {
			continue
		}
		if !before[key] || *deletes == 0 {
			if now == nil {
				now = make(map[string]bool)
			}
			now[key] = true
			continue
		}
		*deletes--
		ctx, cancel := context.WithTimeout(context.Background(), recordWriteTimeout)
		deleted, err := m.records.CompareAndDelete(ctx, key, v)
		cancel()
		if err == nil && deleted {
			m.log.Info("deleted the record of a consumer this member no longer hosts", "queue", name, "key", key)
		}
	}
	switch {
	case now != nil && (before != nil || len(m.unhosted) < adoptMax):
		m.unhosted[name] = now
	default:
		delete(m.unhosted, name)
	}
}
