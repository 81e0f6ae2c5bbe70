package gossip

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestParseSerfLog(t *testing.T) {
	for _, tc := range []struct {
		line      string
		level     slog.Level
		component string
		detail    string
	}{
		{"[INFO] serf: EventMemberJoin: a 127.0.0.1\n", slog.LevelInfo, "serf", "EventMemberJoin: a 127.0.0.1"},
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5\n", slog.LevelDebug, "memberlist", "Stream connection from=127.0.0.1:5"},
		{"[TRACE] memberlist: x", slog.LevelDebug, "memberlist", "x"},
		{"[WARN] serf: Shutdown without a Leave", slog.LevelWarn, "serf", "Shutdown without a Leave"},
		{"[ERR] memberlist: Failed to send ping: timeout", slog.LevelError, "memberlist", "Failed to send ping: timeout"},
		{"[ERROR] serf: boom", slog.LevelError, "serf", "boom"},
		{"no prefix at all", slog.LevelInfo, "serf", "no prefix at all"},
		{"[NOTICE] Odd Thing: happened", slog.LevelInfo, "serf", "[NOTICE] Odd Thing: happened"},
		{"", slog.LevelInfo, "serf", ""},
	} {
		level, component, detail := parseSerfLog(tc.line)
		if level != tc.level || component != tc.component || detail != tc.detail {
			t.Errorf("parseSerfLog(%q) = %v, %q, %q; want %v, %q, %q",
				tc.line, level, component, detail, tc.level, tc.component, tc.detail)
		}
	}
}

func TestNewSerfLogger_levels(t *testing.T) {
	var buf bytes.Buffer
	l := newSerfLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Printf("[DEBUG] memberlist: hidden")
	l.Printf("[WARN] memberlist: Refuting a suspect message (from: b)")
	out := buf.String()
	if strings.Contains(out, "hidden") {
		t.Errorf("debug line logged at info level: %q", out)
	}
	if !strings.Contains(out, "level=WARN msg=memberlist") || !strings.Contains(out, `detail="Refuting a suspect message (from: b)"`) {
		t.Errorf("got %q, want a WARN record from memberlist", out)
	}
}
