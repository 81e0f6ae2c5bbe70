package gossip

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
)

// newSerfLogger adapts logger for serf and memberlist, which take a
// *log.Logger: see serfLogWriter.
func newSerfLogger(logger *slog.Logger) *log.Logger {
	if logger.Handler() == slog.DiscardHandler {
		return log.New(io.Discard, "", 0)
	}
	return log.New(&serfLogWriter{log: logger}, "", 0)
}

// serfLogWriter turns the lines serf and memberlist print, such as
// "[WARN] memberlist: Refuting a suspect message (from: b)", into slog
// records: the "[LEVEL]" prefix gives the level (TRACE and DEBUG: debug,
// INFO: info, WARN: warn, ERR and ERROR: error, none or unknown: info), the
// "component:" that follows gives the message ("serf", "memberlist"), and
// the rest goes in the "detail" attribute.
type serfLogWriter struct {
	log *slog.Logger
}

func (w *serfLogWriter) Write(p []byte) (int, error) {
	level, component, detail := parseSerfLog(string(p))
	ctx := context.Background()
	if w.log.Enabled(ctx, level) {
		w.log.Log(ctx, level, component, "detail", detail)
	}
	return len(p), nil
}

// parseSerfLog splits one line of serf's or memberlist's log.
func parseSerfLog(line string) (level slog.Level, component, detail string) {
	line = strings.TrimSpace(line)
	level = slog.LevelInfo
	if rest, ok := strings.CutPrefix(line, "["); ok {
		if tag, after, ok := strings.Cut(rest, "]"); ok {
			switch tag {
			case "TRACE", "DEBUG":
				level, line = slog.LevelDebug, after
			case "INFO":
				level, line = slog.LevelInfo, after
			case "WARN":
				level, line = slog.LevelWarn, after
			case "ERR", "ERROR":
				level, line = slog.LevelError, after
			}
		}
	}
	line = strings.TrimSpace(line)
	component = "serf"
	if name, after, ok := strings.Cut(line, ": "); ok && isComponent(name) {
		component, line = name, after
	}
	return level, component, line
}

// isComponent reports whether s looks like the "memberlist" of
// "memberlist: ...": one short lower-case word.
func isComponent(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '-' && r != '_' {
			return false
		}
	}
	return true
}
