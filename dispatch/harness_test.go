package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"

	"chute/kv"
)

// testNode is one in-process node: a kv server with a queue manager.
type testNode struct {
	kv  *kv.Server
	mgr *Manager
}

// startNode starts a kv server on a free loopback port with a manager whose
// config mutate may change.
func startNode(t *testing.T, mutate func(*Config)) *testNode {
	t.Helper()
	return startNodeOn(t, mutate, nil)
}

// startNodeOn is startNode with the manager reading and writing the key
// space through records(srv) (nil: srv itself), which may fail some
// writes as a cluster would.
func startNodeOn(t *testing.T, mutate func(*Config), records func(*kv.Server) RecordStore) *testNode {
	t.Helper()
	cfg := Config{MemberID: 7, Visibility: time.Minute} // no redelivery in a loaded test run unless a test asks
	if mutate != nil {
		mutate(&cfg)
	}
	mgr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kcfg := kv.DefaultConfig()
	kcfg.MemberID = cfg.MemberID
	kcfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	kcfg.Queues = mgr
	if cfg.Tracer != nil {
		kcfg.Tracer, kcfg.Propagator = cfg.Tracer, propagation.TraceContext{}
	}
	srv, err := kv.New(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var rs RecordStore = srv
	if records != nil {
		rs = records(srv)
	}
	mgr.Start(rs, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = mgr.Shutdown(ctx)
	})
	if clk, ok := cfg.Clock.(*clockwork.FakeClock); ok {
		// Advancing the clock before the tickers exist would skip them.
		if err := clk.BlockUntilContext(testCtx(t, 10*time.Second), managerTickers); err != nil {
			t.Fatalf("waiting for the manager's tickers: %v", err)
		}
	}
	return &testNode{kv: srv, mgr: mgr}
}

// managerTickers is how many tickers a started manager keeps on its
// clock: the visibility sweep and the reconcile loop.
const managerTickers = 2

// client returns a new clientv3 client of n, closed with the test.
func (n *testNode) client(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.kv.ClientAddrs()[0].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// next returns the next delivered events of wc, failing after d.
func next(t *testing.T, wc clientv3.WatchChan, d time.Duration) []*clientv3.Event {
	t.Helper()
	select {
	case resp, ok := <-wc:
		if !ok {
			t.Fatal("watch closed")
		}
		if err := resp.Err(); err != nil {
			t.Fatalf("watch: %v", err)
		}
		return resp.Events
	case <-time.After(d):
		t.Fatalf("no delivery within %v", d)
	}
	return nil
}

// putAndAck puts value at key, then acknowledges (deletes) what wc, a
// consumer's watch of the same queue, delivers next.
func putAndAck(t *testing.T, ctx context.Context, cli *clientv3.Client, wc clientv3.WatchChan, key, value string) {
	t.Helper()
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatal(err)
	}
	for _, ev := range next(t, wc, 10*time.Second) {
		if _, err := cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
			t.Fatal(err)
		}
	}
}

// collectN reads n events from wc.
func collectN(t *testing.T, wc clientv3.WatchChan, n int, d time.Duration) []*clientv3.Event {
	t.Helper()
	var evs []*clientv3.Event
	deadline := time.Now().Add(d)
	for len(evs) < n {
		evs = append(evs, next(t, wc, time.Until(deadline))...)
	}
	return evs
}

// waitFor polls cond for what happens at once in another goroutine, such
// as a loop acting on a fake clock's tick: it fails only when a loaded
// machine took 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, 10*time.Second, what, cond)
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// attempts returns the delivery attempts of the queue's messages, in
// number order.
func (n *testNode) attempts(name string) []int {
	q := n.mgr.lookup(name)
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []int
	for _, m := range q.msgs.all() {
		out = append(out, int(m.attempts))
	}
	return out
}

// depth returns the queue's rows as Status shows them.
// refusedOn returns the puts m counted as refused over the byte cap for
// its queue name, and as having waited for room; 0s when it has no such
// queue.
func refusedOn(m *Manager, name string) (refused, waited uint64) {
	for _, q := range m.Status().Queues {
		if q.Name == name {
			return q.Stats.Refused, q.Stats.Waited
		}
	}
	return 0, 0
}

func (n *testNode) depth(name string) int {
	for _, q := range n.mgr.Status().Queues {
		if q.Name == name {
			return q.Rows
		}
	}
	return -1
}
