package main

import (
	"strings"
	"testing"
	"time"

	"chute/internal/nodestatus"
	"chute/sink"
)

// TestPrintClusterStatus_clickhouseServers checks the servers table of
// chute status: each server with its state, down period and counts, and
// no table when no server is configured.
func TestPrintClusterStatus_clickhouseServers(t *testing.T) {
	until := time.Date(2025, 6, 1, 12, 0, 30, 0, time.UTC)
	st := nodestatus.Cluster{Name: "n1", ClickHouseServers: []sink.ServerState{
		{Server: "10.0.0.1:8123", Up: true, Batches: map[string]uint64{"ok": 12, "data": 1}, WireBytes: 4096},
		{Server: "10.0.0.2:8123", Up: false, DownUntil: until, Failures: 3, Batches: map[string]uint64{"ok": 5, "transient": 3}},
	}}
	var b strings.Builder
	printClusterStatus(&b, "127.0.0.1:9379", st)
	out := b.String()
	if !strings.Contains(out, "CLICKHOUSE SERVER (seen by n1)") {
		t.Errorf("output lacks the servers table:\n%s", out)
	}
	rows := map[string]bool{}
	for line := range strings.SplitSeq(out, "\n") {
		rows[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, want := range []string{
		"10.0.0.1:8123 up - 0 12 0 1 0 4096",
		"10.0.0.2:8123 down 2025-06-01T12:00:30Z 3 5 3 0 0 0",
	} {
		if !rows[want] {
			t.Errorf("output lacks the row %q:\n%s", want, out)
		}
	}
	b.Reset()
	printClusterStatus(&b, "127.0.0.1:9379", nodestatus.Cluster{Name: "n1"})
	if strings.Contains(b.String(), "CLICKHOUSE SERVER") {
		t.Errorf("no servers: got a servers table:\n%s", b.String())
	}
}
