package bench

import (
	"bytes"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"chute/internal/testutil"
)

func TestProgress_line(t *testing.T) {
	p := &progress{label: "chute put", total: 1000, unit: "puts"}
	if got, want := p.line(250, 2*time.Second), "chute put [######..................]  25% 250/1000 puts 125/s 2s"; got != want {
		t.Errorf("line: got %q, want %q", got, want)
	}
	p.budget = 4 * time.Second // time is further along than the count
	if got := p.line(250, 3*time.Second); !strings.Contains(got, "[##################......]  75% 250/1000") {
		t.Errorf("line with a budget: got %q", got)
	}
	if got := p.line(5000, time.Second); !strings.Contains(got, "100% 5000/1000") {
		t.Errorf("line past total: got %q", got)
	}
}

func TestStartProgress_drawsAndErases(t *testing.T) {
	var w testutil.Buffer
	var n atomic.Int64
	p := startProgress(&w, "run", 100, 0, "puts", n.Load)
	n.Store(40)
	time.Sleep(3 * progressPeriod / 2)
	p.end()
	p.end() // idempotent
	out := w.String()
	if !strings.HasPrefix(out, "\rrun [") || !strings.Contains(out, "40/100 puts") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("output: got %q, want redrawn lines showing 40/100, erased at the end", out)
	}
}

// TestRun_progress: a run with Progress draws on it; without, Run writes
// nowhere (the rest of the package's tests show that).
func TestRun_progress(t *testing.T) {
	var w testutil.Buffer
	cfg := smallConfig(startNoop(t))
	cfg.Progress = &w
	cfg.Label = "noop test"
	if _, err := Run(testContext(t), cfg); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out := w.String(); !strings.Contains(out, "\rnoop test [") || !strings.Contains(out, "noop test warmup [") {
		t.Errorf("progress: got %q, want lines for the warmup and the run", out)
	}
}

func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Errorf("isTerminal(buffer): got true")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Errorf("isTerminal(regular file): got true")
	}
}
