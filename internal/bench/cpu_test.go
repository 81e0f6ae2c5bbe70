package bench

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want time.Duration
		err  bool
	}{
		{"plain", "4242 (chute) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 130 0 0 20 0 9 0 1 2 3", 3800 * time.Millisecond, false},
		{"command with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0", 30 * time.Millisecond, false},
		{"no command", "7 chute S 1", 0, true},
		{"short", "7 (chute) S 1 2 3", 0, true},
		{"not a number", "7 (chute) S 1 7 7 0 -1 0 0 0 0 0 x 2 0 0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.stat))
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("parseStatCPU: got %v, %v; want %v, error %v", got, err, tt.want, tt.err)
			}
			if err != nil && !errors.Is(err, errStat) {
				t.Errorf("parseStatCPU: got %v, want errStat", err)
			}
		})
	}
}

func TestNodeCPU(t *testing.T) {
	got := nodeCPU("a", 2*time.Second, 40000, 50000)
	if got.Node != "a" || got.Seconds != 2 || got.MicrosPerPut != 50 || got.MicrosPerRow != 40 {
		t.Errorf("nodeCPU: got %+v, want a, 2 s, 50 µs a put, 40 µs a row", got)
	}
	if none := nodeCPU("a", time.Second, 0, 0); none.MicrosPerPut != 0 || none.MicrosPerRow != 0 {
		t.Errorf("nodeCPU of no puts: got %+v, want 0 µs a put and a row", none)
	}
}

func TestCPUMeter_self(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Fatalf("the meter reads Linux's /proc; this test runs on Linux only (GOOS %s)", runtime.GOOS)
	}
	m := startCPU([]proc{{name: "self", pid: os.Getpid()}, {name: "gone", pid: 1 << 30}})
	deadline := time.Now().Add(5 * time.Second)
	for x := 0; time.Now().Before(deadline); x++ { // burn until a tick or more is counted
		if t, _ := readCPU(os.Getpid()); t-m.start[0].cpu >= 50*time.Millisecond {
			break
		}
	}
	time.Sleep(20 * time.Millisecond) // a thread with nothing to run waits: a switch
	got := m.stop(1000, 1000)
	if len(got) != 1 || got[0].Node != "self" || got[0].Seconds < 0.05 || got[0].MicrosPerPut < 50 || got[0].MicrosPerRow != got[0].MicrosPerPut {
		t.Errorf("cpu: got %+v, want self with 50 ms or more and nothing of the gone process", got)
	}
	// The loop read /proc/self/stat at least once a tick: its syscalls.
	if len(got) == 1 && (got[0].SyscallsPerRow < 0.01 || got[0].SwitchesPerRow <= 0) {
		t.Errorf("syscalls and switches: got %v and %v a row, want the loop's reads and the sleep's switch",
			got[0].SyscallsPerRow, got[0].SwitchesPerRow)
	}
}

func TestSumFields(t *testing.T) {
	io := "rchar: 10\nwchar: 20\nsyscr: 300\nsyscw: 42\nread_bytes: 0\n"
	if n, ok := sumFields([]byte(io), "syscr", "syscw"); !ok || n != 342 {
		t.Errorf("sumFields(io): got %d, %v; want 342", n, ok)
	}
	status := "Name:\tchute\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t5\n"
	if n, ok := sumFields([]byte(status), "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"); !ok || n != 12 {
		t.Errorf("sumFields(status): got %d, %v; want 12", n, ok)
	}
	for _, bad := range []string{"syscr: 3\n", "syscr: 3\nsyscw: x\n", "syscr: 3\nsyscw: -1\n", ""} {
		if n, ok := sumFields([]byte(bad), "syscr", "syscw"); ok {
			t.Errorf("sumFields(%q): got %d, want not read", bad, n)
		}
	}
}

func TestNodeSum(t *testing.T) {
	of := func(n NodeCPU) float64 { return n.SyscallsPerRow }
	if got := nodeSum(nil, "%.3g", of); got != "-" {
		t.Errorf("nodeSum of none: got %q, want -", got)
	}
	if got := nodeSum([]NodeCPU{{SyscallsPerRow: 0.0125}}, "%.3g", of); got != "0.0125" {
		t.Errorf("nodeSum of one: got %q, want 0.0125", got)
	}
	three := []NodeCPU{{SyscallsPerRow: 0.5}, {SyscallsPerRow: 0.25}, {SyscallsPerRow: 0.125}}
	if got := nodeSum(three, "%.3g", of); got != "0.5 + 0.25 + 0.125 = 0.875" {
		t.Errorf("nodeSum of three: got %q, want 0.5 + 0.25 + 0.125 = 0.875", got)
	}
}

func TestLandedRows(t *testing.T) {
	r := Result{Puts: 900, Rows: &RowsResult{Rows: 950}}
	if got := landedRows(r, 100); got != 1050 {
		t.Errorf("landedRows with rows counted: got %d, want 1050", got)
	}
	r.Rows = nil
	if got := landedRows(r, 100); got != 1000 {
		t.Errorf("landedRows without: got %d, want 1000", got)
	}
}

func TestTakeCPU(t *testing.T) {
	cpu := []NodeCPU{{Node: "bench"}, {Node: procClickHouse, MicrosPerRow: 3}, {Node: procClient, MicrosPerRow: 2}}
	ch := takeCPU(&cpu, procClickHouse)
	if ch == nil || ch.MicrosPerRow != 3 {
		t.Errorf("takeCPU(clickhouse): got %+v, want its figures", ch)
	}
	if len(cpu) != 2 || cpu[0].Node != "bench" || cpu[1].Node != procClient {
		t.Errorf("after takeCPU: got %+v, want bench and the client", cpu)
	}
	if got := takeCPU(&cpu, procClickHouse); got != nil {
		t.Errorf("takeCPU of a process taken: got %+v, want nil", got)
	}
}

func TestSumPerRow(t *testing.T) {
	if got := sumPerRow([]NodeCPU{{MicrosPerRow: 1.5}, {MicrosPerRow: 2}, {MicrosPerRow: 0.5}}); got != 4 {
		t.Errorf("sumPerRow: got %v, want 4", got)
	}
}
