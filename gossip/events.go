package gossip

import (
	"sync"

	"github.com/hashicorp/serf/serf"
)

// defaultSubscribeBuffer is the buffer Subscribe uses when asked for none.
const defaultSubscribeBuffer = 64

// EventType is what happened to a member. The zero EventType is not an
// event (String: "unknown").
type EventType int

// Event types, from serf's member events.
const (
	EventJoin   EventType = iota + 1 // a member appeared or came back
	EventLeave                       // a member left gracefully
	EventFailed                      // a member stopped answering
	EventUpdate                      // a member's tags changed
	EventReap                        // a failed or left member was forgotten
)

func (t EventType) String() string {
	switch t {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventFailed:
		return "failed"
	case EventUpdate:
		return "update"
	case EventReap:
		return "reap"
	default:
		return "unknown"
	}
}

func eventTypeFromSerf(t serf.EventType) (EventType, bool) {
	switch t {
	case serf.EventMemberJoin:
		return EventJoin, true
	case serf.EventMemberLeave:
		return EventLeave, true
	case serf.EventMemberFailed:
		return EventFailed, true
	case serf.EventMemberUpdate:
		return EventUpdate, true
	case serf.EventMemberReap:
		return EventReap, true
	default:
		return 0, false
	}
}

// Event is one change of one member; Member is the member as it was right
// after the change (a failed member has StatusFailed, and so on). Events
// about this node itself are delivered too, for example its own join when
// the Membership starts.
type Event struct {
	Type   EventType
	Member Member
}

// subscriber is one Subscribe call. Its channel is closed under
// Membership.mu, by the unsubscribe func or by Shutdown.
type subscriber struct {
	ch      chan Event
	overrun bool // the last offer was dropped; guarded by Membership.mu
}

// Subscribe returns a channel that receives every event from now on, in
// serf's order, and a func that unsubscribes and closes the channel
// (idempotent). Shutdown closes every subscriber's channel.
//
// Delivery never blocks serf: when the channel's buffer (buf; 64 when buf
// < 1) is full, the event is dropped for this subscriber and counted in
// Dropped. A subscriber that cannot afford to miss an event should re-read
// Members after it fell behind.
func (m *Membership) Subscribe(buf int) (<-chan Event, func()) {
	if buf < 1 {
		buf = defaultSubscribeBuffer
	}
	s := &subscriber{ch: make(chan Event, buf)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	m.subs[s] = struct{}{}
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if _, ok := m.subs[s]; ok {
				delete(m.subs, s)
				close(s.ch)
			}
		})
	}
}

// Dropped returns how many events were dropped because a subscriber's
// buffer was full, over all subscribers since New.
func (m *Membership) Dropped() uint64 {
	return m.dropped.Load()
}

// publish offers ev to every subscriber without blocking.
func (m *Membership) publish(ev Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs {
		select {
		case s.ch <- ev:
			s.overrun = false
		default:
			m.dropped.Add(1)
			if !s.overrun {
				s.overrun = true
				m.log.Warn("membership subscriber is full, dropping events",
					"event", ev.Type.String(), "member", ev.Member.Name, "buffer", cap(s.ch))
			}
		}
	}
}

func (m *Membership) closeSubscribers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs {
		delete(m.subs, s)
		close(s.ch)
	}
}

// eventLoop reads serf's events until Shutdown and publishes the member
// events. If serf shuts down without Shutdown asking, the loop reports it
// (Stopped) and keeps draining until Shutdown.
func (m *Membership) eventLoop() {
	defer m.wg.Done()
	serfDown := m.serf.ShutdownCh()
	for {
		select {
		case e := <-m.events:
			m.handleSerfEvent(e)
		case <-m.conflict:
			m.yieldName()
		case <-serfDown:
			serfDown = nil
			m.serfStopped()
		case <-m.stop:
			// Empty the channel so that serf's forwarding goroutine,
			// which sends without watching its shutdown, cannot block.
			for {
				select {
				case e := <-m.events:
					m.handleSerfEvent(e)
				default:
					return
				}
			}
		}
	}
}

// yieldName stops serf after nameGuard found that an older node holds our
// name. It does not leave: a leave in our name would tell the cluster that
// the other node left. joinMu keeps serf.Leave from running meanwhile
// (memberlist panics on a leave during its shutdown).
func (m *Membership) yieldName() {
	m.mu.Lock()
	closed, cause := m.closed, m.nameErr
	m.mu.Unlock()
	if closed || m.serf.State() == serf.SerfShutdown {
		return
	}
	m.log.Error("another node uses this name, leaving it the cluster", "name", m.name, "err", cause)
	m.joinMu.Lock()
	defer m.joinMu.Unlock()
	if err := m.serf.Shutdown(); err != nil {
		m.log.Error("stop serf", "err", err)
	}
}

// serfStopped reports serf's shutdown unless Shutdown caused it.
func (m *Membership) serfStopped() {
	m.mu.Lock()
	closed, cause := m.closed, m.nameErr
	m.mu.Unlock()
	if closed {
		return
	}
	m.markStopped(cause)
	m.log.Error("serf stopped on its own, node is out of the cluster", "name", m.name, "err", m.Err())
}

func (m *Membership) handleSerfEvent(e serf.Event) {
	me, ok := e.(serf.MemberEvent)
	if !ok {
		return // user events and queries: chute sends none
	}
	m.peersGen.Add(1) // serf changed its member list before sending this
	typ, ok := eventTypeFromSerf(me.Type)
	if !ok {
		return
	}
	for _, sm := range me.Members {
		ev := Event{Type: typ, Member: memberFromSerf(sm)}
		m.log.Debug("member event", "event", typ.String(), "member", ev.Member.Name,
			"addr", ev.Member.Addr, "status", ev.Member.Status.String())
		m.publish(ev)
	}
}
