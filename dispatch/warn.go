package dispatch

import (
	"log/slog"
	"sync"
	"time"
)

// Warnings that every put of a queue may meet (its dispatcher unreachable,
// a claim not written while the key space has no leader) are logged at
// WARN once per warnEvery per queue and kind, the others at DEBUG: a
// partition under load must not write a log line per put.

// warnEvery is how often one kind of warning about one queue reaches
// WARN.
const warnEvery = time.Second

// maxWarnKeys bounds the queue and kind pairs remembered; past it the
// memory starts over (queue names come from clients).
const maxWarnKeys = 1024

// warnLimiter remembers when each kind of warning about each queue was
// last logged at WARN.
type warnLimiter struct {
	mu   sync.Mutex // guards last
	last map[string]time.Time
}

// level returns WARN for the first warning of key in warnEvery, DEBUG for
// the others.
func (w *warnLimiter) level(key string, now time.Time) slog.Level {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.last[key]; ok && now.Sub(t) < warnEvery {
		return slog.LevelDebug
	}
	if w.last == nil || len(w.last) >= maxWarnKeys {
		w.last = make(map[string]time.Time)
	}
	w.last[key] = now
	return slog.LevelWarn
}
