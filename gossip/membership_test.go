package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"chute/internal/testutil"
)

// Every test runs its nodes on its own 127.0.N.x addresses (Linux routes
// all of 127/8 to loopback), on ports probed free for TCP and UDP, with
// Fast timings. Waits are polled with deadlines.

const (
	// settle bounds every wait for the cluster to converge.
	settle = 10 * time.Second
	// refusedFor is how long a refused node is watched not to get in.
	refusedFor = time.Second
)

// gossipTestAddr returns ip:port with the port free for TCP and UDP on ip.
func gossipTestAddr(t *testing.T, ip string) string {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatalf("listen on %s: %v", ip, err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, port))
		_ = ln.Close()
		if err != nil {
			continue
		}
		_ = pc.Close()
		return net.JoinHostPort(ip, port)
	}
	t.Fatalf("no port free for TCP and UDP on %s", ip)
	return ""
}

// logRecorder is a slog.Handler that keeps info and above records, so a
// test can wait for a log line and dump the logs when it fails.
type logRecorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *logRecorder) WithGroup(string) slog.Handler                { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", rec.Time.Format("15:04:05.000"), rec.Level, rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, b.String())
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.recs {
		if strings.Contains(s, msg) {
			n++
		}
	}
	return n
}

func (r *logRecorder) dump(t *testing.T, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.recs[max(0, len(r.recs)-100):] {
		t.Logf("%s: %s", name, s)
	}
}

type testMember struct {
	*Membership
	cfg  Config
	logs *logRecorder
}

// newTestMember creates (not starts) a node called name on addr with Fast
// timings and cluster "test"; mutate adjusts the config. Cleanup shuts it
// down and, if the test failed, dumps its logs.
func newTestMember(t *testing.T, name, addr string, mutate func(*Config)) *testMember {
	t.Helper()
	logs := &logRecorder{}
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.Cluster = "test"
	cfg.BindAddr = addr
	cfg.Fast = true
	cfg.JoinBackoffMin = 50 * time.Millisecond
	cfg.JoinBackoffMax = 200 * time.Millisecond
	cfg.PeerURLs = []string{"http://" + name + ":2380"}
	cfg.ClientURLs = []string{"http://" + name + ":2379", "http://" + name + ":12379"}
	cfg.Version = "test-1"
	cfg.Logger = slog.New(logs)
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("Shutdown(%s): %v", name, err)
		}
		if t.Failed() {
			logs.dump(t, name)
		}
	})
	return &testMember{Membership: m, cfg: cfg, logs: logs}
}

func joining(seeds ...string) func(*Config) {
	return func(c *Config) { c.Join = seeds }
}

func names(ms []Member) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func aliveNames(m *testMember) []string { return names(m.Alive()) }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// statusOf returns name's status in m's view, 0 when m does not know it.
func statusOf(m *testMember, name string) Status {
	for _, mb := range m.Members() {
		if mb.Name == name {
			return mb.Status
		}
	}
	return 0
}

// eventTape records the events of one subscription.
type eventTape struct {
	mu     sync.Mutex
	events []Event
}

func tapeEvents(t *testing.T, m *testMember) *eventTape {
	t.Helper()
	tape := &eventTape{}
	ch, cancel := m.Subscribe(256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			tape.mu.Lock()
			tape.events = append(tape.events, ev)
			tape.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return tape
}

// last returns the type of the last event about name, 0 if none.
func (e *eventTape) last(name string) EventType {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.events) - 1; i >= 0; i-- {
		if e.events[i].Member.Name == name {
			return e.events[i].Type
		}
	}
	return 0
}

func (e *eventTape) has(typ EventType, name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.events, func(ev Event) bool { return ev.Type == typ && ev.Member.Name == name })
}

// startTrio starts a, b and c on 127.0.<net>.1-3; b and c join a.
func startTrio(t *testing.T, net int, mutate func(*Config)) (a, b, c *testMember) {
	t.Helper()
	addr := func(i int) string { return gossipTestAddr(t, fmt.Sprintf("127.0.%d.%d", net, i)) }
	a = newTestMember(t, "a", addr(1), mutate)
	seed := func(cfg *Config) {
		if mutate != nil {
			mutate(cfg)
		}
		cfg.Join = []string{a.cfg.BindAddr}
	}
	b = newTestMember(t, "b", addr(2), seed)
	c = newTestMember(t, "c", addr(3), seed)
	for _, m := range []*testMember{a, b, c} {
		m.Start()
	}
	waitAlive(t, []string{"a", "b", "c"}, a, b, c)
	return a, b, c
}

// leaveAndShutdown makes m leave the cluster gracefully, then shuts it
// down.
func leaveAndShutdown(t *testing.T, m *testMember) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Leave(ctx); err != nil {
		t.Fatalf("%s.Leave: %v", m.cfg.Name, err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatalf("%s.Shutdown: %v", m.cfg.Name, err)
	}
}

// waitAlive waits until every node's Alive() is exactly want.
func waitAlive(t *testing.T, want []string, nodes ...*testMember) {
	t.Helper()
	testutil.EventuallyTrue(t, settle, fmt.Sprintf("alive members %v everywhere", want), func() bool {
		for _, n := range nodes {
			if !slices.Equal(aliveNames(n), want) {
				return false
			}
		}
		return true
	})
}

func TestMembership_Start_anyOrder(t *testing.T) {
	addrA := gossipTestAddr(t, "127.0.1.1")
	addrB := gossipTestAddr(t, "127.0.1.2")
	addrC := gossipTestAddr(t, "127.0.0.1") // reached by the name "localhost"

	// C starts first and joins A, which does not exist yet.
	c := newTestMember(t, "c", addrC, joining(addrA))
	c.Start()
	testutil.EventuallyTrue(t, settle, "c to fail joining a", func() bool { return c.logs.count("join failed") >= 2 })
	if isClosed(c.Joined()) {
		t.Fatal("c: Joined closed before its seed exists")
	}

	// A has no seed; B joins C by DNS name.
	a := newTestMember(t, "a", addrA, nil)
	if !isClosed(a.Joined()) {
		t.Fatal("a: Joined not closed for a node without seeds")
	}
	a.Start()
	_, portC, _ := net.SplitHostPort(addrC)
	b := newTestMember(t, "b", addrB, joining("localhost:"+portC))
	b.Start()

	waitAlive(t, []string{"a", "b", "c"}, a, b, c)
	for _, n := range []*testMember{b, c} {
		select {
		case <-n.Joined():
		case <-time.After(settle):
			t.Fatalf("%s: Joined not closed", n.cfg.Name)
		}
	}

	want := map[string]*testMember{"a": a, "b": b, "c": c}
	for _, viewer := range []*testMember{a, b, c} {
		for _, got := range viewer.Members() {
			src := want[got.Name]
			wantAddr := src.Local().Addr
			switch {
			case got.ID != MemberID(got.Name):
				t.Errorf("%s sees %s with id %x, want %x", viewer.cfg.Name, got.Name, got.ID, MemberID(got.Name))
			case got.Addr != src.cfg.BindAddr || got.Addr != wantAddr:
				t.Errorf("%s sees %s at %s, want %s", viewer.cfg.Name, got.Name, got.Addr, src.cfg.BindAddr)
			case !slices.Equal(got.PeerURLs, src.cfg.PeerURLs):
				t.Errorf("%s sees %s peer urls %v, want %v", viewer.cfg.Name, got.Name, got.PeerURLs, src.cfg.PeerURLs)
			case !slices.Equal(got.ClientURLs, src.cfg.ClientURLs):
				t.Errorf("%s sees %s client urls %v, want %v", viewer.cfg.Name, got.Name, got.ClientURLs, src.cfg.ClientURLs)
			case got.Version != "test-1":
				t.Errorf("%s sees %s version %q, want test-1", viewer.cfg.Name, got.Name, got.Version)
			}
		}
		mb, ok := viewer.Member(MemberID("b"))
		if !ok || mb.Name != "b" {
			t.Errorf("%s: Member(id of b) = %+v, %v; want b", viewer.cfg.Name, mb, ok)
		}
		if _, ok := viewer.Member(MemberID("nobody")); ok {
			t.Errorf("%s: Member(id of nobody) found", viewer.cfg.Name)
		}
	}
	if got := a.Local(); got.Name != "a" || got.ID != MemberID("a") || got.Status != StatusAlive {
		t.Errorf("a.Local() = %+v", got)
	}
}

func TestMembership_Leave_othersSeeLeft(t *testing.T) {
	a, b, c := startTrio(t, 2, nil)
	tapeA, tapeC := tapeEvents(t, a), tapeEvents(t, c)

	leaveAndShutdown(t, b)
	testutil.EventuallyTrue(t, settle, "a and c to see b left", func() bool {
		return statusOf(a, "b") == StatusLeft && statusOf(c, "b") == StatusLeft
	})
	waitAlive(t, []string{"a", "c"}, a, c)
	testutil.EventuallyTrue(t, settle, "leave events for b", func() bool {
		return tapeA.has(EventLeave, "b") && tapeC.has(EventLeave, "b")
	})
	// On a starved machine Fast timings may declare b failed for a moment
	// before its leave arrives; its last event must still be the leave.
	for name, tape := range map[string]*eventTape{"a": tapeA, "c": tapeC} {
		if got := tape.last("b"); got != EventLeave {
			t.Errorf("%s: last event about b is %v, want leave", name, got)
		}
	}
	if err := b.Leave(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Errorf("Leave after Shutdown: got %v, want ErrShutdown", err)
	}
}

func TestMembership_Shutdown_withoutLeaveIsFailure(t *testing.T) {
	// Fast: 200ms suspicion plus probing, about 0.5s; the bound leaves
	// room for a loaded machine, where memberlist slows its probes down.
	checkFailureDetected(t, 3, true, 5*time.Second)
}

func TestMembership_Shutdown_withoutLeaveIsFailureLANTimings(t *testing.T) {
	t.Parallel()
	// LAN: 4s suspicion (3 nodes) plus probing, about 5-7s.
	checkFailureDetected(t, 8, false, 12*time.Second)
}

// checkFailureDetected stops b of a trio without Leave and checks that a
// and c report it failed within d, and logs how long they took.
func checkFailureDetected(t *testing.T, net int, fast bool, within time.Duration) {
	t.Helper()
	a, b, c := startTrio(t, net, func(cfg *Config) { cfg.Fast = fast })
	tapeA, tapeC := tapeEvents(t, a), tapeEvents(t, c)

	start := time.Now()
	if err := b.Shutdown(); err != nil { // sockets close as with kill -9
		t.Fatalf("b.Shutdown: %v", err)
	}
	testutil.EventuallyTrue(t, within, "a and c to report b failed", func() bool {
		return tapeA.last("b") == EventFailed && tapeC.last("b") == EventFailed
	})
	detected := time.Since(start)
	waitAlive(t, []string{"a", "c"}, a, c)
	for _, n := range []*testMember{a, c} {
		if got := statusOf(n, "b"); got != StatusFailed {
			t.Errorf("%s sees b %v, want failed", n.cfg.Name, got)
		}
	}
	t.Logf("failure of b reported by a and c %v after it stopped (fast timings: %v)", detected.Round(time.Millisecond), fast)
}

// refused checks for refusedFor that x never joins and the cluster nodes
// never list it.
func refused(t *testing.T, x *testMember, cluster ...*testMember) {
	t.Helper()
	x.Start()
	testutil.EventuallyTrue(t, settle, x.cfg.Name+" to try and fail", func() bool { return x.logs.count("join failed") >= 2 })
	deadline := time.Now().Add(refusedFor)
	for time.Now().Before(deadline) {
		if isClosed(x.Joined()) {
			t.Fatalf("%s joined", x.cfg.Name)
		}
		if got := aliveNames(x); len(got) != 1 {
			t.Fatalf("%s sees %v", x.cfg.Name, got)
		}
		for _, n := range cluster {
			if got := names(n.Members()); slices.Contains(got, x.cfg.Name) {
				t.Fatalf("%s lists %s: %v", n.cfg.Name, x.cfg.Name, got)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMembership_Join_wrongKeyRefused(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef")
	a, b, c := startTrio(t, 4, func(c *Config) { c.Key = key })
	seed := joining(a.cfg.BindAddr)

	t.Run("other key", func(t *testing.T) {
		x := newTestMember(t, "x", gossipTestAddr(t, "127.0.4.10"), func(c *Config) {
			seed(c)
			c.Key = []byte("fedcba9876543210")
		})
		refused(t, x, a, b, c)
	})
	t.Run("no key", func(t *testing.T) {
		y := newTestMember(t, "y", gossipTestAddr(t, "127.0.4.11"), seed)
		refused(t, y, a, b, c)
	})
	waitAlive(t, []string{"a", "b", "c"}, a, b, c)
}

func TestMembership_Join_otherClusterRefused(t *testing.T) {
	t.Parallel()
	a, b, c := startTrio(t, 5, nil)

	t.Run("other cluster joins ours", func(t *testing.T) {
		x := newTestMember(t, "x", gossipTestAddr(t, "127.0.5.10"), func(cfg *Config) {
			cfg.Cluster = "other"
			cfg.Join = []string{a.cfg.BindAddr}
		})
		refused(t, x, a, b, c)
	})
	t.Run("ours joins other cluster", func(t *testing.T) {
		o := newTestMember(t, "o", gossipTestAddr(t, "127.0.5.11"), func(cfg *Config) { cfg.Cluster = "other" })
		o.Start()
		y := newTestMember(t, "y", gossipTestAddr(t, "127.0.5.12"), joining(o.cfg.BindAddr))
		refused(t, y, o)
		if got := aliveNames(o); !slices.Equal(got, []string{"o"}) {
			t.Errorf("o sees %v, want [o]", got)
		}
	})
	waitAlive(t, []string{"a", "b", "c"}, a, b, c)
}

func TestClusterMerge_NotifyMerge(t *testing.T) {
	// Labels keep other clusters out before serf sees them; the merge
	// delegate is the second line, checked here alone.
	d := clusterMerge{cluster: "one"}
	if err := d.NotifyMerge(nil); err != nil {
		t.Errorf("no members: %v", err)
	}
	ok := serfTestMember("a", "one")
	if err := d.NotifyMerge(ok); err != nil {
		t.Errorf("same cluster: %v", err)
	}
	for _, members := range [][]string{{"two"}, {""}, {"one", "two"}} {
		var ms = serfTestMember("x", members...)
		if err := d.NotifyMerge(ms); err == nil {
			t.Errorf("clusters %q: got nil, want an error", members)
		}
	}
}

func TestMembership_Subscribe_fullSubscriberDoesNotBlock(t *testing.T) {
	a := newTestMember(t, "a", gossipTestAddr(t, "127.0.6.1"), nil)
	stuck, _ := a.Subscribe(1) // never read
	tape := tapeEvents(t, a)
	gone, unsubscribe := a.Subscribe(8)
	unsubscribe()
	unsubscribe()
	if _, open := <-gone; open {
		t.Fatal("unsubscribed channel still open")
	}
	a.Start()

	b := newTestMember(t, "b", gossipTestAddr(t, "127.0.6.2"), joining(a.cfg.BindAddr))
	c := newTestMember(t, "c", gossipTestAddr(t, "127.0.6.3"), joining(a.cfg.BindAddr))
	b.Start()
	c.Start()
	testutil.EventuallyTrue(t, settle, "join events for a, b and c", func() bool {
		return tape.has(EventJoin, "a") && tape.has(EventJoin, "b") && tape.has(EventJoin, "c")
	})
	if got := len(stuck); got != 1 {
		t.Errorf("stuck subscriber holds %d events, want 1", got)
	}
	if got := a.Dropped(); got < 2 {
		t.Errorf("Dropped() = %d, want at least 2", got)
	}
	tape.mu.Lock()
	for _, ev := range tape.events {
		if ev.Type == EventJoin && ev.Member.Name == "b" {
			if ev.Member.ID != MemberID("b") || ev.Member.Status != StatusAlive || len(ev.Member.PeerURLs) != 1 {
				t.Errorf("join event of b: %+v", ev.Member)
			}
		}
	}
	tape.mu.Unlock()

	if err := a.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := a.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	for range stuck { // drains the one event, then ends: Shutdown closed it
	}
	late, _ := a.Subscribe(1)
	if _, open := <-late; open {
		t.Error("Subscribe after Shutdown: channel open")
	}
	a.Start() // no-op
}

func TestMembership_Shutdown_beforeStart(t *testing.T) {
	a := newTestMember(t, "a", gossipTestAddr(t, "127.0.7.1"), joining("127.0.7.2:1"))
	if isClosed(a.Joined()) {
		t.Fatal("Joined closed for a node with a seed")
	}
	if err := a.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := a.Leave(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Errorf("Leave after Shutdown: got %v, want ErrShutdown", err)
	}
}

func TestMembership_Leave_stopsJoinLoop(t *testing.T) {
	// The seed never answers; Leave must stop the retries and return
	// quickly (no other member to tell), and Shutdown must not hang.
	a := newTestMember(t, "a", gossipTestAddr(t, "127.0.7.3"), joining(gossipTestAddr(t, "127.0.7.4")))
	a.Start()
	testutil.EventuallyTrue(t, settle, "a to fail joining", func() bool { return a.logs.count("join failed") >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if got := a.Local().Status; got != StatusLeft {
		t.Errorf("local status after Leave: %v, want left", got)
	}
	if err := a.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// serfTestMember returns one serf member per cluster tag, named name.
func serfTestMember(name string, clusters ...string) []*serf.Member {
	var out []*serf.Member
	for _, c := range clusters {
		out = append(out, &serf.Member{Name: name, Tags: map[string]string{tagCluster: c}})
	}
	return out
}
