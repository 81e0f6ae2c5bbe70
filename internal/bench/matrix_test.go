package bench

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// testMatrix runs the test binary itself as both children (see TestMain).
func testMatrix(t *testing.T, nodeArgs ...string) matrixConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	t.Setenv(fakeChildEnv, "1")
	base := smallConfig("unused")
	base.Puts, base.Warmup = 300, 10
	return matrixConfig{
		exe:          exe,
		base:         base,
		clients:      []int{1, 4},
		nodeArgs:     nodeArgs,
		readyTimeout: 15 * time.Second,
		childOutput:  io.Discard,
	}
}

func TestRunMatrix_fakeChildren(t *testing.T) {
	mc := testMatrix(t)
	results, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("runMatrix: %v", err)
	}
	want := []struct {
		server  string
		clients int
	}{{ServerNoop, 1}, {ServerChute, 1}, {ServerNoop, 4}, {ServerChute, 4}}
	if len(results) != len(want) {
		t.Fatalf("results: got %d, want %d: %+v", len(results), len(want), results)
	}
	for i, w := range want {
		r := results[i]
		if r.Server != w.server || r.Clients != w.clients || r.Puts != 300 || r.Errors != 0 {
			t.Errorf("result %d: got %s/%d clients/%d puts/%d errors, want %s/%d/300/0",
				i, r.Server, r.Clients, r.Puts, r.Errors, w.server, w.clients)
		}
	}
	if got := NewReport(results).Ratios; len(got) != 2 {
		t.Errorf("ratios: got %+v, want two", got)
	}
}

func TestRunMatrix_childExits(t *testing.T) {
	mc := testMatrix(t, "--fail")
	start := time.Now()
	_, err := runMatrix(testContext(t), mc, slog.New(slog.DiscardHandler))
	if !errors.Is(err, errChildExited) || !strings.Contains(err.Error(), "chute: exit status 3") {
		t.Fatalf("runMatrix: got %v, want a child-exited error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("runMatrix took %v, want an early failure", d)
	}
}

func TestChuteCommand(t *testing.T) {
	got := strings.Join(chuteCommand([]int{1, 2, 3, 4}), " ")
	want := "--name bench --listen-client-urls http://127.0.0.1:1 --listen-peer-urls http://127.0.0.1:2" +
		" --gossip-listen 127.0.0.1:3 --metrics-listen 127.0.0.1:4 --log-level warn"
	if got != want {
		t.Errorf("chuteCommand: got %q, want %q", got, want)
	}
}

func TestFreePorts_distinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatalf("freePorts: %v", err)
	}
	seen := make(map[int]bool)
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports: got %v, want 5 distinct positive", ports)
		}
		seen[p] = true
	}
}
