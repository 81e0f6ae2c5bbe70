package backoff

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBackoff_Next_doublesWithinJitterUpToMax checks the steps 10, 20,
// 40, 80, 100, 100 ms: each pause within [step/2, step].
func TestBackoff_Next_doublesWithinJitterUpToMax(t *testing.T) {
	const ms = time.Millisecond
	for range 100 { // the jitter is random: look at many draws
		b := Backoff{Min: 10 * ms, Max: 100 * ms}
		for i, step := range []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms} {
			if got := b.Next(); got < step/2 || got > step {
				t.Fatalf("pause %d: got %v, want within [%v, %v]", i, got, step/2, step)
			}
		}
	}
}

func TestBackoff_Reset_startsFromMin(t *testing.T) {
	b := Backoff{Min: 8 * time.Second, Max: time.Minute}
	for range 5 {
		b.Next()
	}
	b.Reset()
	if got := b.Next(); got < 4*time.Second || got > 8*time.Second {
		t.Fatalf("after Reset: got %v, want within [4s, 8s]", got)
	}
}

// TestBackoff_Next_boundsChanged checks that bounds changed between calls
// apply to the next step, as when a queue's retry settings change.
func TestBackoff_Next_boundsChanged(t *testing.T) {
	b := Backoff{Min: time.Second, Max: time.Minute}
	for range 6 {
		b.Next() // step 32s
	}
	b.Max = 2 * time.Second
	if got := b.Next(); got > 2*time.Second {
		t.Fatalf("after lowering Max: got %v, want at most 2s", got)
	}
	b.Min, b.Max = 10*time.Second, 20*time.Second
	if got := b.Next(); got < 5*time.Second || got > 10*time.Second {
		t.Fatalf("after raising Min: got %v, want within [5s, 10s]", got)
	}
}

func TestBackoff_Next_edges(t *testing.T) {
	tests := []struct {
		name     string
		b        Backoff
		lo, hi   time.Duration
		attempts int
	}{
		{name: "zero value", b: Backoff{}, lo: 0, hi: 0, attempts: 3},
		{name: "max below min", b: Backoff{Min: time.Second, Max: time.Millisecond}, lo: time.Second / 2, hi: time.Second, attempts: 3},
		{name: "huge max", b: Backoff{Min: time.Hour, Max: 1<<63 - 1}, lo: time.Hour / 2, hi: 1<<63 - 1, attempts: 80},
	}
	for _, tt := range tests {
		for i := range tt.attempts {
			if got := tt.b.Next(); got < tt.lo || got > tt.hi {
				t.Errorf("%s: pause %d: got %v, want within [%v, %v]", tt.name, i, got, tt.lo, tt.hi)
			}
		}
	}
}
