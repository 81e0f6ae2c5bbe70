package gossip

import (
	"errors"
	"slices"
	"testing"
	"time"

	"chute/internal/testutil"
)

func TestNameGuard_yields(t *testing.T) {
	g := &nameGuard{name: "x", boot: "m", started: 1000}
	for _, tc := range []struct {
		name string
		tags map[string]string
		want bool
	}{
		{"other started earlier", map[string]string{tagStarted: "999", tagBoot: "z"}, true},
		{"other started later", map[string]string{tagStarted: "1001", tagBoot: "a"}, false},
		{"same start, smaller boot", map[string]string{tagStarted: "1000", tagBoot: "a"}, true},
		{"same start, greater boot", map[string]string{tagStarted: "1000", tagBoot: "z"}, false},
		{"no started tag", map[string]string{tagBoot: "z"}, true},
	} {
		if got := g.yields(tc.tags); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// waitStopped waits for m's Stopped and returns Err.
func waitStopped(t *testing.T, m *testMember) error {
	t.Helper()
	select {
	case <-m.Stopped():
		return m.Err()
	case <-time.After(settle):
		t.Fatalf("%s at %s: Stopped not closed", m.cfg.Name, m.cfg.BindAddr)
		return nil
	}
}

// stillRunning checks for refusedFor that m has not stopped and that
// every node of view lists m's name alive at m's address.
func stillRunning(t *testing.T, m *testMember, view ...*testMember) {
	t.Helper()
	deadline := time.Now().Add(refusedFor)
	notAlive := make(map[string]time.Time) // viewer -> since when it has not seen m alive
	for time.Now().Before(deadline) {
		if isClosed(m.Stopped()) {
			t.Fatalf("%s at %s stopped: %v", m.cfg.Name, m.cfg.BindAddr, m.Err())
		}
		for _, v := range view {
			i := slices.IndexFunc(v.Members(), func(mb Member) bool { return mb.Name == m.cfg.Name })
			if i < 0 || v.Members()[i].Addr != m.cfg.BindAddr {
				t.Fatalf("%s sees %v, want %s at %s", v.cfg.Name, v.Members(), m.cfg.Name, m.cfg.BindAddr)
			}
			// A probe that timed out on a loaded machine may mark m failed
			// for a moment until it refutes it; a conflict would not pass.
			if v.Members()[i].Status == StatusAlive {
				delete(notAlive, v.cfg.Name)
			} else if since, ok := notAlive[v.cfg.Name]; !ok {
				notAlive[v.cfg.Name] = time.Now()
			} else if time.Since(since) > notAliveFor {
				t.Fatalf("%s sees %v for %v, want %s alive at %s", v.cfg.Name, v.Members(), time.Since(since), m.cfg.Name, m.cfg.BindAddr)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	testutil.EventuallyTrue(t, notAliveFor, m.cfg.Name+" alive in every view", func() bool {
		for _, v := range view {
			if !slices.Contains(aliveNames(v), m.cfg.Name) {
				return false
			}
		}
		return true
	})
}

// notAliveFor bounds how long stillRunning lets a viewer see the member
// not alive: the fast profile refutes a false suspicion within a few
// probe rounds.
const notAliveFor = 2 * time.Second

func started(at time.Time) func(*Config) {
	return func(c *Config) { c.Started = at }
}

// Alone, serf's own vote has nobody to ask and both nodes lose; the guard
// stops the newer one only.
func TestMembership_Join_sameNameNewerStops(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a := newTestMember(t, "x", gossipTestAddr(t, "127.0.13.1"), started(now.Add(-time.Minute)))
	a.Start()
	b := newTestMember(t, "x", gossipTestAddr(t, "127.0.13.2"), func(c *Config) {
		c.Started = now
		c.Join = []string{a.cfg.BindAddr}
	})
	b.Start()
	err := waitStopped(t, b)
	if !errors.Is(err, ErrNameConflict) || !errors.Is(err, ErrSerfStopped) {
		t.Fatalf("b.Err() = %v, want ErrNameConflict and ErrSerfStopped", err)
	}
	if isClosed(b.Joined()) {
		t.Error("b: Joined closed")
	}
	stillRunning(t, a, a)
}

// In a cluster, the newcomer that takes b's name stops and b stays.
func TestMembership_Join_sameNameInClusterNewerStops(t *testing.T) {
	t.Parallel()
	a, b, c := startTrio(t, 14, nil)
	x := newTestMember(t, "b", gossipTestAddr(t, "127.0.14.9"), joining(c.cfg.BindAddr))
	x.Start()
	if err := waitStopped(t, x); !errors.Is(err, ErrNameConflict) {
		t.Fatalf("x.Err() = %v, want ErrNameConflict", err)
	}
	stillRunning(t, b, a, b, c)
	for _, n := range []*testMember{a, c} {
		if isClosed(n.Stopped()) {
			t.Errorf("%s stopped: %v", n.cfg.Name, n.Err())
		}
	}
}

// A node restarted at its address under its name (new boot, later start)
// is its own previous run, not a conflict.
func TestMembership_Join_restartAtSameAddressIsNoConflict(t *testing.T) {
	t.Parallel()
	a, b, c := startTrio(t, 15, nil)
	if err := b.Shutdown(); err != nil { // as kill -9
		t.Fatalf("b.Shutdown: %v", err)
	}
	b2 := newTestMember(t, "b", b.cfg.BindAddr, joining(a.cfg.BindAddr))
	b2.Start()
	waitAlive(t, []string{"a", "b", "c"}, a, b2, c)
	stillRunning(t, b2, a, c)
}
