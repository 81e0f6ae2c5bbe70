package raftnode

import (
	"context"
	"io"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// unreachableEvery is how often each of raft's complaints about a peer it
// cannot reach is logged (at WARN); the repeats go to DEBUG. While a
// member is down or cut off raft logs them at every try, several a
// second, at ERROR: a failure the cluster rides out is not an error of
// this node.
const unreachableEvery = 5 * time.Second

// unreachableMsgs are those complaints, by raft's own wording.
func unreachableMsgs() []string {
	return []string{
		"failed to make requestVote RPC",
		"failed to heartbeat to",
		"failed to pipeline appendEntries",
		"failed to start pipeline replication to",
		"failed to appendEntries to",
		"failed to contact",
	}
}

// repeats remembers when each complaint was last logged at WARN; shared
// by an adapter and the loggers made from it.
type repeats struct {
	mu   sync.Mutex // guards last
	last map[string]time.Time
}

// level returns the level of msg, raft's level raised or lowered: a
// complaint about an unreachable peer is WARN once per unreachableEvery,
// else DEBUG.
func (r *repeats) level(msg string, level slog.Level) slog.Level {
	for _, m := range unreachableMsgs() {
		if msg != m {
			continue
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		now := time.Now()
		if t, ok := r.last[msg]; ok && now.Sub(t) < unreachableEvery {
			return slog.LevelDebug
		}
		r.last[msg] = now
		return slog.LevelWarn
	}
	return level
}

// hclogAdapter is an hclog.Logger writing to a slog.Logger, so that raft
// logs through the node's one logger, with slog's levels (trace as debug).
// Its name becomes the "logger" field.
type hclogAdapter struct {
	base    *slog.Logger // the node's logger with the implied args
	l       *slog.Logger // base with the name
	name    string
	implied []any
	repeats *repeats
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(l *slog.Logger, name string) *hclogAdapter {
	return &hclogAdapter{base: l, l: l.With("logger", name), name: name, repeats: &repeats{last: make(map[string]time.Time)}}
}

func slogLevel(level hclog.Level) slog.Level {
	switch {
	case level <= hclog.Debug:
		return slog.LevelDebug
	case level == hclog.Info:
		return slog.LevelInfo
	case level == hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	a.l.Log(context.Background(), a.repeats.level(msg, slogLevel(level)), msg, args...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(level slog.Level) bool {
	return a.l.Enabled(context.Background(), level)
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(slog.LevelDebug) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(slog.LevelDebug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(slog.LevelInfo) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(slog.LevelWarn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(slog.LevelError) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	base := a.base.With(args...)
	implied := append(a.implied[:len(a.implied):len(a.implied)], args...)
	return &hclogAdapter{base: base, l: base.With("logger", a.name), name: a.name, implied: implied, repeats: a.repeats}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{base: a.base, l: a.base.With("logger", name), name: name, implied: a.implied, repeats: a.repeats}
}

// SetLevel does nothing: the slog handler decides.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case a.IsDebug():
		return hclog.Debug
	case a.IsInfo():
		return hclog.Info
	case a.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (a *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.l.Handler(), slog.LevelInfo)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(nil).Writer()
}
