package bench

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7, 7, 1}, 7},
	}
	for _, tt := range tests {
		if got := median(append([]float64(nil), tt.in...)); got != tt.want {
			t.Errorf("median(%v): got %v, want %v", tt.in, got, tt.want)
		}
	}
}

// runOf is a run of a cell with puts/s, p99 and, when rowsPerSec is
// positive, rows.
func runOf(putsPerSec float64, p99 time.Duration, rowsPerSec float64, cpu float64) Result {
	r := Result{Server: ServerChute, Clients: 100, Puts: int64(putsPerSec) * 20, PutsPerSec: putsPerSec,
		P50: p99 / 4, P99: p99, P999: 2 * p99, CPU: []NodeCPU{{Node: "a", Seconds: cpu, MicrosPerPut: cpu}}}
	if rowsPerSec > 0 {
		r.Rows = &RowsResult{Rows: int64(rowsPerSec) * 20, RowsPerSec: rowsPerSec, P99: 10 * p99}
	}
	return r
}

func TestMedianResult_unary(t *testing.T) {
	runs := []Result{
		runOf(1000, 9*time.Millisecond, 0, 30),
		runOf(3000, 3*time.Millisecond, 0, 10),
		runOf(2000, 5*time.Millisecond, 0, 20),
	}
	got := medianResult(runs)
	if got.PutsPerSec != 2000 || got.Puts != 40000 || got.P99 != 5*time.Millisecond || got.P50 != 1250*time.Microsecond {
		t.Errorf("median: got %.0f puts/s, %d puts, p50 %v, p99 %v; want 2000, 40000, 1.25ms, 5ms", got.PutsPerSec, got.Puts, got.P50, got.P99)
	}
	if got.CPU[0].MicrosPerPut != 20 {
		t.Errorf("median CPU: got %+v, want 20 µs a put", got.CPU)
	}
	want := Spread{Runs: 3, MinPutsPerSec: 1000, MaxPutsPerSec: 3000}
	if got.Spread == nil || *got.Spread != want {
		t.Errorf("spread: got %+v, want %+v", got.Spread, want)
	}
	if runs[0].PutsPerSec != 1000 || runs[1].Spread != nil {
		t.Errorf("medianResult changed its input: %+v", runs)
	}
}

// TestMedianResult_rows picks the median run by rows/s and takes every
// figure's median on its own.
func TestMedianResult_rows(t *testing.T) {
	runs := []Result{
		runOf(1000, 9*time.Millisecond, 900, 1),
		runOf(3000, 3*time.Millisecond, 950, 2),
		runOf(2000, 5*time.Millisecond, 2000, 3),
		runOf(2500, 4*time.Millisecond, 2400, 4),
	}
	got := medianResult(runs)
	if got.Puts != 60000 { // the lower middle by rows/s: 950
		t.Errorf("median run: got %d puts, want the 950 rows/s run's 60000", got.Puts)
	}
	if got.PutsPerSec != 2250 || got.Rows.RowsPerSec != 1475 || got.Rows.P99 != 45*time.Millisecond {
		t.Errorf("medians: got %.0f puts/s, %.0f rows/s, row p99 %v; want 2250, 1475, 45ms", got.PutsPerSec, got.Rows.RowsPerSec, got.Rows.P99)
	}
	if runs[1].Rows.RowsPerSec != 950 {
		t.Errorf("medianResult changed a run's rows: %+v", runs[1].Rows)
	}
	want := Spread{Runs: 4, MinPutsPerSec: 1000, MaxPutsPerSec: 3000, MinRowsPerSec: 900, MaxRowsPerSec: 2400}
	if *got.Spread != want {
		t.Errorf("spread: got %+v, want %+v", *got.Spread, want)
	}
}

func TestMedianResult_oneOrNone(t *testing.T) {
	one := runOf(1000, time.Millisecond, 0, 1)
	if got := medianResult([]Result{one}); got.Spread != nil || got.PutsPerSec != 1000 {
		t.Errorf("one run: got %+v, want it unchanged", got)
	}
	if got := medianResult(nil); got.Server != "" || got.Spread != nil {
		t.Errorf("no run: got %+v, want a zero Result", got)
	}
}

func TestMedianResult_cpuOfOtherNodes(t *testing.T) {
	a, b := runOf(1000, time.Millisecond, 0, 1), runOf(2000, time.Millisecond, 0, 5)
	b.CPU = []NodeCPU{{Node: "b", MicrosPerPut: 5}}
	got := medianResult([]Result{a, b, runOf(3000, time.Millisecond, 0, 9)})
	if len(got.CPU) != 1 || got.CPU[0].Node != "b" || got.CPU[0].MicrosPerPut != 5 {
		t.Errorf("cpu: got %+v, want the median run's own", got.CPU)
	}
}

func TestReport_WriteMarkdown_spread(t *testing.T) {
	r := medianResult([]Result{runOf(1000, time.Millisecond, 900, 1), runOf(3000, time.Millisecond, 2900, 1), runOf(2000, time.Millisecond, 1900, 1)})
	var b bytes.Buffer
	if err := NewReport(Measured{Results: []Result{r}}).WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if want := "| chute | put | 3 | 2000 | 1000 | 3000 | 1900 | 900 | 2900 |"; !strings.Contains(b.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, b.String())
	}
}

func TestMedianResult_queueLog(t *testing.T) {
	runs := []Result{
		runOf(1000, 9*time.Millisecond, 0, 30),
		runOf(3000, 3*time.Millisecond, 0, 10),
		runOf(2000, 5*time.Millisecond, 0, 20),
	}
	runs[0].QueueLog = &QueueLogCount{Fsyncs: 500, Records: 20000, FsyncsPerSec: 25, RecordsPerFsync: 40}
	runs[1].QueueLog = &QueueLogCount{Fsyncs: 3000, Records: 60000, FsyncsPerSec: 150, RecordsPerFsync: 20}
	runs[2].QueueLog = &QueueLogCount{Fsyncs: 4000, Records: 40000, FsyncsPerSec: 200, RecordsPerFsync: 10}
	got := medianResult(runs).QueueLog
	want := QueueLogCount{Fsyncs: 4000, Records: 40000, FsyncsPerSec: 150, RecordsPerFsync: 20}
	if got == nil || *got != want {
		t.Errorf("median queue log: got %+v, want the median run's counts and the medians of the rates %+v", got, want)
	}
	if runs[2].QueueLog.FsyncsPerSec != 200 {
		t.Errorf("medianResult changed its input: %+v", runs[2].QueueLog)
	}
	runs[1].QueueLog = nil
	if got := medianResult(runs).QueueLog; got != runs[2].QueueLog {
		t.Errorf("a run without the log: got %+v, want the median run's as it is", got)
	}
}

func TestMedianResult_cpuPerRow(t *testing.T) {
	run := func(rowsPerSec, node, ch, client float64, errs int64) Result {
		r := runOf(rowsPerSec, time.Millisecond, rowsPerSec, node)
		r.CPU[0].MicrosPerRow = node
		r.CPU[0].SyscallsPerRow, r.CPU[0].SwitchesPerRow = node/10, node/100
		r.ClickHouseCPU = &NodeCPU{Node: procClickHouse, Seconds: ch, MicrosPerRow: ch}
		r.ClientCPU = &NodeCPU{Node: procClient, Seconds: client, MicrosPerRow: client}
		r.Errors = errs
		return r
	}
	got := medianResult([]Result{run(1000, 5, 3, 9, 0), run(3000, 4, 1, 7, 128), run(2000, 6, 2, 8, 256)})
	if got.CPU[0].MicrosPerRow != 5 || got.ClickHouseCPU.MicrosPerRow != 2 || got.ClientCPU.MicrosPerRow != 8 {
		t.Errorf("medians: got node %v, ClickHouse %v, client %v µs/row; want 5, 2, 8",
			got.CPU[0].MicrosPerRow, got.ClickHouseCPU.MicrosPerRow, got.ClientCPU.MicrosPerRow)
	}
	if c := got.CPU[0]; c.SyscallsPerRow != 0.5 || c.SwitchesPerRow != 0.05 {
		t.Errorf("medians: got %v syscalls and %v switches a row, want 0.5 and 0.05", c.SyscallsPerRow, c.SwitchesPerRow)
	}
	sp := got.Spread
	if sp.Errors != 384 || sp.MinMicrosPerRow != 4 || sp.MaxMicrosPerRow != 6 || sp.MinClickHouseMicrosPerRow != 1 || sp.MaxClickHouseMicrosPerRow != 3 {
		t.Errorf("spread: got %+v, want 384 failed puts, node 4-6, ClickHouse 1-3 µs/row", *sp)
	}
	if got.Errors != 256 {
		t.Errorf("errors: got %d, want the median run's 256", got.Errors)
	}
	// A run without ClickHouse's figures leaves the median run's.
	runs := []Result{run(1000, 5, 3, 9, 0), run(2000, 6, 2, 8, 0), run(3000, 4, 1, 7, 0)}
	runs[0].ClickHouseCPU = nil
	if got := medianResult(runs); got.ClickHouseCPU == nil || got.ClickHouseCPU.MicrosPerRow != 2 {
		t.Errorf("ClickHouse with a run missing: got %+v, want the median run's 2", got.ClickHouseCPU)
	}
}

func TestMedianRaw(t *testing.T) {
	run := func(ch float64, rows int64) RawResult {
		return RawResult{Rows: rows, ClickHouseCPU: &NodeCPU{Node: procClickHouse, MicrosPerRow: ch}}
	}
	got := medianRaw([]RawResult{run(3, 1), run(1, 2), run(2, 3)})
	if got.Rows != 3 || got.Runs != 3 || got.MinClickHouseMicrosPerRow != 1 || got.MaxClickHouseMicrosPerRow != 3 {
		t.Errorf("medianRaw: got %+v, want the run of 2 µs/row, 3 runs, 1-3", got)
	}
	if got := medianRaw([]RawResult{run(3, 1), run(1, 2)}); got.Rows != 2 {
		t.Errorf("medianRaw of two: got %+v, want the lower middle", got)
	}
	if got := medianRaw([]RawResult{run(3, 1)}); got.Runs != 0 || got.Rows != 1 {
		t.Errorf("medianRaw of one: got %+v, want it as it is", got)
	}
	if got := medianRaw(nil); got.Rows != 0 {
		t.Errorf("medianRaw of none: got %+v, want zero", got)
	}
}

// TestRunRounds runs two cells in three rounds: they alternate, a cell's
// check follows each of its runs, each gets the median of its own runs,
// and a failed check ends the rounds there.
func TestRunRounds(t *testing.T) {
	var order []string
	rate := map[string][]float64{"a": {10, 30, 20}, "b": {5, 1, 3}}
	run := func(c cell) (Result, error) {
		order = append(order, c.server)
		n := 0
		for _, s := range order {
			if s == c.server {
				n++
			}
		}
		return Result{Server: c.server, PutsPerSec: rate[c.server][n-1]}, nil
	}
	mk := func(name string) roundCell {
		return roundCell{
			mk:    func() cell { return cell{server: name} },
			check: func(c cell) error { order = append(order, "check "+c.server); return nil },
		}
	}
	rs, err := runRounds(3, []roundCell{mk("a"), mk("b")}, run)
	if err != nil {
		t.Fatalf("runRounds: %v", err)
	}
	want := []string{"a", "check a", "b", "check b", "a", "check a", "b", "check b", "a", "check a", "b", "check b"}
	if !slices.Equal(order, want) {
		t.Errorf("runs: got %q, want %q", order, want)
	}
	if len(rs) != 2 || rs[0].Server != "a" || rs[0].PutsPerSec != 20 || rs[1].Server != "b" || rs[1].PutsPerSec != 3 {
		t.Errorf("medians: got %+v, want a at 20 puts/s, then b at 3", rs)
	}
	if len(rs) == 2 && (rs[0].Spread == nil || rs[0].Spread.Runs != 3) {
		t.Errorf("a's spread: got %+v, want 3 runs", rs[0].Spread)
	}

	order = nil
	failing := mk("b")
	failing.check = func(cell) error { return errors.New("not the dispatcher") }
	if _, err := runRounds(3, []roundCell{mk("a"), failing}, run); err == nil || err.Error() != "not the dispatcher" {
		t.Errorf("failed check: got %v, want its error", err)
	}
	if want := []string{"a", "check a", "b"}; !slices.Equal(order, want) {
		t.Errorf("runs after a failed check: got %q, want %q", order, want)
	}
}
