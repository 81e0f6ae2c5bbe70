package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reliability.md")
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	one := Figures{Scenario: "1", Title: "1. kill -9", Mode: "short", Date: day, Machine: "2 CPUs, linux/amd64",
		Faults: 3, Puts: 900, Acked: 890, Lost: 0, Duplicates: 12, Indeterminate: 4, Drain: 1234 * time.Millisecond, MaxRSS: 40 << 20,
		Notes: "a | b"}
	if err := WriteReport(path, one); err != nil {
		t.Fatal(err)
	}
	wantOne := "| short | 2026-11-30 | 2 CPUs, linux/amd64 | 3 | 900 | 890 | 0 | 12 | 4 | 1.2s | 40 MiB | a \\| b |"
	requireFile(t, path, "### 1. kill -9\n\n<!-- faults:begin 1 -->\n", wantOne, "<!-- faults:end 1 -->\n")

	// Prose around the tables stays; a second scenario goes at the end.
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append([]byte("# Title\n\nprose before\n\n"), append(b, "\nprose after\n"...)...), 0o644); err != nil {
		t.Fatal(err)
	}
	two := Figures{Scenario: "2", Title: "2. outage", Mode: "full", Date: day, Faults: 1, Puts: 5}
	if err := WriteReport(path, two); err != nil {
		t.Fatal(err)
	}
	requireFile(t, path, "# Title\n\nprose before\n\n### 1. kill -9", wantOne, "prose after\n\n### 2. outage\n\n<!-- faults:begin 2 -->",
		"| full | 2026-11-30 | "+Machine()+" | 1 | 5 | 0 | 0 | 0 | 0 | - | - |  |")

	// A run of another mode adds a row; one of the same mode replaces it.
	full := one
	full.Mode, full.Faults = "full", 20
	if err := WriteReport(path, full); err != nil {
		t.Fatal(err)
	}
	again := one
	again.Faults, again.Notes = 2, "rerun"
	if err := WriteReport(path, again); err != nil {
		t.Fatal(err)
	}
	got := requireFile(t, path, "| full | 2026-11-30 | 2 CPUs, linux/amd64 | 20 |", "| short | 2026-11-30 | 2 CPUs, linux/amd64 | 2 |")
	if strings.Contains(got, wantOne) {
		t.Errorf("the replaced short row is still there:\n%s", got)
	}
	if n := strings.Count(got, "| mode |"); n != 2 {
		t.Errorf("%d table headers, want 2:\n%s", n, got)
	}
	if full, short := strings.Index(got, "| full | 2026-11-30 | 2 CPUs"), strings.Index(got, "| short |"); full > short {
		t.Errorf("rows not in mode order:\n%s", got)
	}

	if err := WriteReport(path, Figures{Scenario: "3"}); err == nil {
		t.Error("WriteReport without a mode: got nil error")
	}
	if err := os.WriteFile(path, []byte("<!-- faults:begin 1 -->\n| short |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(path, one); err == nil || !strings.Contains(err.Error(), "without") {
		t.Errorf("WriteReport into a table without its end marker: got %v, want an error", err)
	}
}

// requireFile fails the test unless the file holds each of parts, in
// order, and returns its text.
func requireFile(t *testing.T, path string, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text, rest := string(b), string(b)
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Fatalf("%s: %q missing (or out of order) in\n%s", path, p, text)
		}
		rest = rest[i+len(p):]
	}
	return text
}
