package gossip

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The metrics tests run on 127.0.9.x.

// metricsReader registers m's metrics on a meter provider of its own and
// returns the reader that collects them.
func metricsReader(t *testing.T, m *Membership) *sdkmetric.ManualReader {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	if err := m.RegisterMetrics(mp); err != nil {
		t.Fatalf("RegisterMetrics: %v", err)
	}
	return r
}

// series is one instrument's collection: its values by attribute set,
// encoded as "key=value" ("" for none).
type series map[string]int64

// collected is one collection of the chute/gossip scope by instrument name,
// with each instrument's description and unit.
type collected struct {
	values map[string]series
	desc   map[string]string
}

// collect reads r once. It fails the test on an instrument of another type
// than an int64 gauge or monotonic sum.
func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	c := collected{values: make(map[string]series), desc: make(map[string]string)}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "chute/gossip" {
			t.Errorf("scope %q, want chute/gossip", sm.Scope.Name)
			continue
		}
		for _, mt := range sm.Metrics {
			s := make(series)
			var points []metricdata.DataPoint[int64]
			switch d := mt.Data.(type) {
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					t.Errorf("%s: a sum that is not monotonic", mt.Name)
				}
				points = d.DataPoints
			default:
				t.Fatalf("%s: data %T, want an int64 gauge or sum", mt.Name, mt.Data)
			}
			for _, p := range points {
				s[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
			}
			c.values[mt.Name] = s
			c.desc[mt.Name] = mt.Description
		}
	}
	return c
}

// waitMembersMetric polls r until chute.gossip.members is exactly want.
func waitMembersMetric(t *testing.T, r *sdkmetric.ManualReader, want series) {
	t.Helper()
	var got series
	deadline := time.Now().Add(settle)
	for {
		got = collect(t, r).values["chute.gossip.members"]
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chute.gossip.members: got %v, want %v within %v", got, want, settle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func membersByState(alive, leaving, left, failed int64) series {
	return series{"state=alive": alive, "state=leaving": leaving, "state=left": left, "state=failed": failed}
}

func TestMembership_RegisterMetrics_membersByState(t *testing.T) {
	a, b, c := startTrio(t, 9, nil)
	r := metricsReader(t, a.Membership)
	a.Subscribe(1) // never read: its second event is dropped

	waitMembersMetric(t, r, membersByState(3, 0, 0, 0))
	got := collect(t, r)
	for _, name := range []string{"chute.gossip.members", "chute.gossip.health_score", "chute.gossip.queue.depth", "chute.gossip.events.dropped"} {
		if got.desc[name] == "" {
			t.Errorf("%s: no description (or not reported: %v)", name, got.values[name])
		}
	}
	if h, ok := got.values["chute.gossip.health_score"][""]; !ok || h < 0 || h > 7 {
		t.Errorf("chute.gossip.health_score: got %v, want one value in [0, 7]", got.values["chute.gossip.health_score"])
	}
	depth := got.values["chute.gossip.queue.depth"]
	if len(depth) != 3 {
		t.Errorf("chute.gossip.queue.depth: got %v, want the queues intent, event and query", depth)
	}
	for _, q := range []string{"intent", "event", "query"} {
		if n, ok := depth["queue="+q]; !ok || n < 0 {
			t.Errorf("chute.gossip.queue.depth{queue=%s}: got %d (reported %v), want a depth", q, n, ok)
		}
	}
	if d := got.values["chute.gossip.events.dropped"]; !maps.Equal(d, series{"": 0}) {
		t.Errorf("chute.gossip.events.dropped before any event: got %v, want 0", d)
	}

	// c stops as with kill -9: failed.
	if err := c.Shutdown(); err != nil {
		t.Fatalf("c.Shutdown: %v", err)
	}
	waitMembersMetric(t, r, membersByState(2, 0, 0, 1))

	// b leaves gracefully: left. c stays failed until serf reaps it, 10s
	// after its failure with Fast timings.
	leaveAndShutdown(t, b)
	waitMembersMetric(t, r, membersByState(1, 0, 1, 1))

	// The stuck subscriber took the failure of c and lost the leave of b.
	before := a.Dropped()
	d := collect(t, r).values["chute.gossip.events.dropped"][""]
	after := a.Dropped()
	if before < 1 || d < int64(before) || d > int64(after) {
		t.Errorf("chute.gossip.events.dropped: got %d, want Dropped() (%d, then %d), at least 1", d, before, after)
	}
}

func TestMembership_RegisterMetrics_queueDepth(t *testing.T) {
	// A lone member gossips to nobody, so what serf queues stays queued.
	a := newTestMember(t, "a", gossipTestAddr(t, "127.0.9.10"), nil)
	a.Start()
	r := metricsReader(t, a.Membership)
	const events = 3
	for i := range events {
		if err := a.serf.UserEvent(fmt.Sprintf("e%d", i), nil, false); err != nil {
			t.Fatalf("UserEvent: %v", err)
		}
	}
	const queries = 2
	for i := range queries {
		resp, err := a.serf.Query(fmt.Sprintf("q%d", i), nil, a.serf.DefaultQueryParams())
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		defer resp.Close()
	}
	want := series{"queue=intent": 0, "queue=event": events, "queue=query": queries}
	if got := collect(t, r).values["chute.gossip.queue.depth"]; !maps.Equal(got, want) {
		t.Errorf("chute.gossip.queue.depth: got %v, want %v", got, want)
	}
	waitMembersMetric(t, r, membersByState(1, 0, 0, 0))
}

func TestMembership_RegisterMetrics_nilProvider(t *testing.T) {
	a := newTestMember(t, "a", gossipTestAddr(t, "127.0.9.20"), nil)
	if err := a.RegisterMetrics(nil); err != nil {
		t.Errorf("RegisterMetrics(nil): got %v, want nil", err)
	}
}
