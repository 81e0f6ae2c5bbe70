package dispatch

import (
	"context"
	"sync/atomic"
	"time"
)

// A pause fence: a process stopped for a while (SIGSTOP, a paused VM, a
// long stall) may have lost its queues meanwhile, gossip calling it
// failed and another member claiming them. Woken, its goroutines ran on
// what it knew: a consumer's stream that had ended gave its messages
// back, and they went at once to a consumer on this member, numbered in
// the old epoch, while the member that took the queue over had
// delivered the copies of the same puts and seen them acknowledged. A
// soak froze the dispatcher for 3-10 s: in 5 of 18 runs up to 70
// acknowledged messages came again, some acknowledged twice.
//
// A heartbeat every pauseBeat marks the process alive; no queue delivers
// while the last one is older than pauseLimit, nor until the heartbeat
// that finds the gap read the key space as the cluster has it
// (Linearize) and marked the queues another member dispatches now
// (queue.lost): the reconcile round hands them over. When the cluster
// cannot be asked the fence lifts anyway, as the drainers' does
// (fence.go): a member cut off may hold the only copies.

// pauseBeat is how often the heartbeat marks the process alive, and
// pauseLimit how old its mark may be before deliveries wait: far below
// the time gossip takes to call a member failed, far above a busy
// machine's scheduling delays.
const (
	pauseBeat  = 100 * time.Millisecond
	pauseLimit = time.Second
)

// pauseFence is the heartbeat's state (Manager.pause).
type pauseFence struct {
	start  time.Time    // the origin of beat, read with its monotonic clock
	beat   atomic.Int64 // when the heartbeat last ran, ns since start; 0: it does not run (no Start)
	fenced atomic.Bool  // a gap was found and the queues are being checked
}

func newPauseFence() *pauseFence {
	return &pauseFence{start: time.Now()}
}

// holds reports whether deliveries wait: a gap since the last heartbeat,
// or one found and not yet checked. False for nil (a queue of a unit
// test, no manager) and before the heartbeat runs.
func (p *pauseFence) holds() bool {
	if p == nil {
		return false
	}
	beat := p.beat.Load()
	return p.fenced.Load() || beat != 0 && time.Since(p.start).Nanoseconds()-beat > int64(pauseLimit)
}

// runPauseFence is the heartbeat, until stop.
func (m *Manager) runPauseFence() {
	t := time.NewTicker(pauseBeat)
	defer t.Stop()
	m.pause.beat.Store(max(time.Since(m.pause.start).Nanoseconds(), 1))
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		now := time.Since(m.pause.start).Nanoseconds()
		if gap := time.Duration(now - m.pause.beat.Swap(now)); gap > pauseLimit {
			m.afterPause(gap)
		}
	}
}

// afterPause checks, after a gap of the heartbeat, which queues another
// member dispatches now (queue.lost), with the key space read once it
// holds what the cluster committed meanwhile, and then lets the others
// deliver what waited.
func (m *Manager) afterPause(gap time.Duration) {
	m.pause.fenced.Store(true)
	if m.records == nil {
		m.pause.fenced.Store(false) // a member alone, with no key space: nothing moved
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*fenceTimeout)
	err := m.records.Linearize(ctx)
	cancel()
	m.log.Warn("this process did not run for a while; delivering again only what it still dispatches", "paused", gap.Round(time.Millisecond), "key_space_read", err == nil)
	qs := m.snapshot()
	for _, q := range qs {
		rec, ok := m.record(q.name)
		q.mu.Lock()
		q.lost = ok && rec.Member != m.cfg.MemberID
		q.mu.Unlock()
	}
	m.pause.fenced.Store(false)
	now := m.clock.Now()
	for _, q := range qs {
		q.mu.Lock()
		q.deliverLocked(now)
		q.mu.Unlock()
	}
}
