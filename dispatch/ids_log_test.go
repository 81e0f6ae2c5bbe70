package dispatch

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"chute/gossip"

	"chute/internal/testutil"
)

// TestLogs_memberIDsInHex checks that the logs and /status name members
// the one way, 16 hex digits: a queue claimed on a and handed to b
// before a leaves logs both ids, and neither may show in decimal.
func TestLogs_memberIDsInHex(t *testing.T) {
	var logs testutil.Buffer
	withLog := func(name string) func(*Config) {
		return func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("member", name)
		}
	}
	cl := newCluster(t)
	a, b := cl.start("a", withLog("a")), cl.start("b", withLog("b"))
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 3)
	if st := a.mgr.Status(); len(st.Queues) != 1 || st.Queues[0].Dispatcher != gossip.ID(a.id).String() {
		t.Fatalf("/status of a: %+v, want jobs dispatched by %s", st.Queues, gossip.ID(a.id))
	}
	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{"to=" + gossip.ID(b.id).String(), "dispatcher=" + gossip.ID(b.id).String()} {
		if !strings.Contains(out, want) {
			t.Errorf("no log line with %s in:\n%s", want, out)
		}
	}
	for _, m := range []*member{a, b} {
		if dec := strconv.FormatUint(m.id, 10); strings.Contains(out, dec) {
			t.Errorf("member %s logged in decimal (%s):\n%s", m.name, dec, out)
		}
	}
}
