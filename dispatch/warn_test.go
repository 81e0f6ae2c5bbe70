package dispatch

import (
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// TestWarnLimiter_oncePerSecondPerKey checks a warning repeated at every
// put reaches WARN once per warnEvery per key, and the memory of keys
// stays bounded.
func TestWarnLimiter_oncePerSecondPerKey(t *testing.T) {
	var w warnLimiter
	t0 := time.Unix(1000, 0)
	steps := []struct {
		key  string
		at   time.Duration
		want slog.Level
	}{
		{"unreachable q", 0, slog.LevelWarn},
		{"unreachable q", 10 * time.Millisecond, slog.LevelDebug},
		{"claim q", 20 * time.Millisecond, slog.LevelWarn},
		{"unreachable r", 30 * time.Millisecond, slog.LevelWarn},
		{"unreachable q", 999 * time.Millisecond, slog.LevelDebug},
		{"unreachable q", time.Second, slog.LevelWarn},
	}
	for _, s := range steps {
		if got := w.level(s.key, t0.Add(s.at)); got != s.want {
			t.Fatalf("%s at +%v: %v, want %v", s.key, s.at, got, s.want)
		}
	}
	for i := range 3 * maxWarnKeys {
		w.level(fmt.Sprint("claim ", i), t0)
	}
	if n := len(w.last); n > maxWarnKeys {
		t.Fatalf("%d keys remembered, want at most %d", n, maxWarnKeys)
	}
}
