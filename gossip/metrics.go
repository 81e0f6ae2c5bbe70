package gossip

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// memberStates are the states chute.gossip.members reports, every one at
// every collection (0 when no member is in it), so that a state that
// empties shows 0 instead of vanishing from the scrape.
var memberStates = []Status{StatusAlive, StatusLeaving, StatusLeft, StatusFailed}

// broadcastQueues maps the attribute value of chute.gossip.queue.depth to
// the key of serf's Stats that holds that queue's length.
var broadcastQueues = []struct{ name, stat string }{
	{"intent", "intent_queue"}, // join and leave intents
	{"event", "event_queue"},   // user events
	{"query", "query_queue"},   // queries and their responses
}

// RegisterMetrics exports the membership on mp as OTel observable
// instruments, read from serf at every collection (a Prometheus scrape):
//
//   - chute.gossip.members{state}: members serf knows, by state (alive,
//     leaving, left, failed), this member included. Failed and left
//     members count until serf reaps them (see Members).
//   - chute.gossip.health_score: memberlist's awareness score. 0 is
//     healthy; each point is a missed ack or a refuted suspicion of this
//     member, and stretches its probe interval and timeout, up to
//     memberlist's AwarenessMaxMultiplier-1 (7).
//   - chute.gossip.queue.depth{queue}: broadcasts serf holds for gossip,
//     by queue (intent, event, query). A queue that keeps growing means
//     gossip cannot keep up.
//   - chute.gossip.events.dropped: membership events lost to full
//     subscribers (Dropped).
//
// A nil mp registers nothing. The callback takes none of the membership's
// locks, only serf's, and reads serf's final state after Shutdown.
func (m *Membership) RegisterMetrics(mp metric.MeterProvider) error {
	if mp == nil {
		return nil
	}
	meter := mp.Meter("chute/gossip")
	members, err := meter.Int64ObservableGauge("chute.gossip.members", metric.WithUnit("{member}"),
		metric.WithDescription("Members this member's serf knows, itself included, by state (alive, leaving, left, failed)."))
	if err != nil {
		return err
	}
	health, err := meter.Int64ObservableGauge("chute.gossip.health_score",
		metric.WithDescription("memberlist's awareness of this member's own slowness: 0 is healthy, up to 7; each point stretches its probe interval and timeout."))
	if err != nil {
		return err
	}
	depth, err := meter.Int64ObservableGauge("chute.gossip.queue.depth", metric.WithUnit("{broadcast}"),
		metric.WithDescription("Broadcasts serf holds for gossip, by queue (intent: join and leave intents, event: user events, query: queries)."))
	if err != nil {
		return err
	}
	dropped, err := meter.Int64ObservableCounter("chute.gossip.events.dropped", metric.WithUnit("{event}"),
		metric.WithDescription("Membership events lost because a subscriber's buffer was full."))
	if err != nil {
		return err
	}

	stateOpts := make(map[Status]metric.ObserveOption, len(memberStates))
	for _, s := range memberStates {
		stateOpts[s] = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", s.String())))
	}
	queueOpts := make([]metric.ObserveOption, len(broadcastQueues))
	for i, q := range broadcastQueues {
		queueOpts[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("queue", q.name)))
	}

	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		counts := make(map[Status]int64, len(memberStates))
		for _, sm := range m.serf.Members() {
			counts[statusFromSerf(sm.Status)]++ // serf.StatusNone counts as 0, never reported
		}
		for _, s := range memberStates {
			o.ObserveInt64(members, counts[s], stateOpts[s])
		}
		o.ObserveInt64(health, int64(m.serf.Memberlist().GetHealthScore()))
		stats := m.serf.Stats()
		for i, q := range broadcastQueues {
			if n, ok := statInt(stats, q.stat); ok {
				o.ObserveInt64(depth, n, queueOpts[i])
			}
		}
		o.ObserveInt64(dropped, int64(m.Dropped()))
		return nil
	}, members, health, depth, dropped)
	return err
}

// statInt reads a counter of serf's Stats; ok is false when serf does not
// report it.
func statInt(stats map[string]string, key string) (int64, bool) {
	v, ok := stats[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}
