package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Figures are one run of one scenario, as a row of its table in the
// report.
type Figures struct {
	// Scenario keys the scenario's table in the report, such as "1";
	// Title heads it when the table is new. Required.
	Scenario string
	Title    string
	// Mode is the form of the run, "short" or "full": a run replaces the
	// row of its scenario and mode. Required.
	Mode string
	// Date is when the run ended. Zero: now.
	Date time.Time
	// Machine describes the machine. Empty: Machine().
	Machine string
	// Faults counts what the run did to the cluster: kills, freezes,
	// outages or restarts.
	Faults int
	// Puts, Acked, Lost, Duplicates (extra copies) and Indeterminate are
	// the oracle's figures (Verdict).
	Puts, Acked, Lost, Duplicates, Indeterminate int
	// Drain is how long the backlog took to reach ClickHouse after the
	// last fault ended. Zero: not measured.
	Drain time.Duration
	// MaxRSS is the largest resident memory of the node measured, in
	// bytes. Zero: not measured.
	MaxRSS int64
	// Notes are the scenario's own figures, in words.
	Notes string
}

// FromVerdict fills the oracle's figures from v.
func (f *Figures) FromVerdict(v Verdict) {
	f.Puts, f.Acked, f.Lost, f.Duplicates, f.Indeterminate = v.Puts, v.Acked, len(v.Lost), v.Extra, v.Indeterminate
}

// Machine describes this machine: CPUs usable by the process, OS and
// architecture.
func Machine() string {
	return fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}

// Report markers: a scenario's table sits between them, so the rest of the
// file is free prose that WriteReport leaves alone.
const (
	beginMarker = "<!-- faults:begin %s -->"
	endMarker   = "<!-- faults:end %s -->"
)

var tableHeader = []string{
	"| mode | date | machine | faults | puts | acked | lost | duplicates | indeterminate | drain | max RSS | notes |",
	"|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
}

// reportMu serializes WriteReport in this process.
var reportMu sync.Mutex

// WriteReport puts f's row into the scenario's table of the markdown file
// at path, replacing the row of the same mode; a scenario without a table
// gets one, under a heading of its title, at the end of the file, and a
// missing file is created. The file is replaced atomically.
func WriteReport(path string, f Figures) error {
	if f.Scenario == "" || strings.ContainsAny(f.Scenario, "\n>") || f.Mode == "" || strings.ContainsAny(f.Mode, "|\n") {
		return fmt.Errorf("faults: report: scenario %q, mode %q: want both, on one line", f.Scenario, f.Mode)
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("faults: report: %w", err)
	}
	text, err := putRow(string(old), f)
	if err != nil {
		return fmt.Errorf("faults: report %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".reliability-*.md")
	if err != nil {
		return fmt.Errorf("faults: report: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails once renamed
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return fmt.Errorf("faults: report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("faults: report: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("faults: report: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("faults: report: %w", err)
	}
	return nil
}

// putRow returns text with f's row in its scenario's table.
func putRow(text string, f Figures) (string, error) {
	begin, end := fmt.Sprintf(beginMarker, f.Scenario), fmt.Sprintf(endMarker, f.Scenario)
	row := f.row()
	bi := strings.Index(text, begin)
	if bi < 0 {
		var b strings.Builder
		b.WriteString(text)
		if text != "" && !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
		if text != "" {
			b.WriteString("\n")
		}
		title := f.Title
		if title == "" {
			title = "Scenario " + f.Scenario
		}
		fmt.Fprintf(&b, "### %s\n\n%s\n", title, block(begin, end, []string{row}))
		return b.String(), nil
	}
	ei := strings.Index(text[bi:], end)
	if ei < 0 {
		return "", fmt.Errorf("%q without %q", begin, end)
	}
	ei += bi
	var rows []string
	for line := range strings.Lines(text[bi+len(begin) : ei]) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || slices.Contains(tableHeader, line) {
			continue
		}
		if mode, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|"); strings.TrimSpace(mode) == f.Mode {
			continue
		}
		rows = append(rows, line)
	}
	rows = append(rows, row)
	slices.Sort(rows)
	return text[:bi] + block(begin, end, rows) + text[ei+len(end):], nil
}

func block(begin, end string, rows []string) string {
	return begin + "\n" + strings.Join(tableHeader, "\n") + "\n" + strings.Join(rows, "\n") + "\n" + end
}

// row is f as a table row.
func (f Figures) row() string {
	date := f.Date
	if date.IsZero() {
		date = time.Now()
	}
	machine := f.Machine
	if machine == "" {
		machine = Machine()
	}
	drain, rss := "-", "-"
	switch {
	case f.Drain >= time.Second:
		drain = f.Drain.Round(100 * time.Millisecond).String()
	case f.Drain > 0:
		drain = f.Drain.Round(time.Millisecond).String()
	}
	if f.MaxRSS > 0 {
		rss = fmt.Sprintf("%d MiB", (f.MaxRSS+(1<<19))>>20)
	}
	cells := []string{f.Mode, date.UTC().Format("2006-01-02"), machine,
		fmt.Sprint(f.Faults), fmt.Sprint(f.Puts), fmt.Sprint(f.Acked), fmt.Sprint(f.Lost),
		fmt.Sprint(f.Duplicates), fmt.Sprint(f.Indeterminate), drain, rss, f.Notes}
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(strings.ReplaceAll(c, "\n", " "), "|", `\|`)
	}
	return "| " + strings.Join(cells, " | ") + " |"
}
