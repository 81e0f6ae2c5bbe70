package raftnode

import (
	"log/slog"
	"strings"
	"testing"

	"chute/internal/testutil"
)

// TestHCLog_unreachablePeerRepeats checks raft's complaint about a peer
// it cannot reach is logged at WARN once, its repeats at DEBUG, through
// loggers raft derives with With and Named too; other errors stay ERROR.
func TestHCLog_unreachablePeerRepeats(t *testing.T) {
	var out testutil.Buffer
	a := newHCLog(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft")
	a.Error("failed to make requestVote RPC", "target", "b")
	a.With("peer", "c").Error("failed to make requestVote RPC", "target", "c")
	a.Named("replication").Error("failed to make requestVote RPC", "target", "d")
	a.Error("failed to persist vote", "err", "disk full")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"level=WARN", "level=DEBUG", "level=DEBUG", "level=ERROR"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %q, want %s", i, lines[i], w)
		}
	}
}
