package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: the kernel
// reports them in USER_HZ, which is 100 on every architecture Go runs
// Linux on, whatever the kernel's own tick rate.
const userHZ = 100

// errStat marks a /proc/<pid>/stat the bench cannot read.
var errStat = errors.New("bench: cpu: bad /proc stat")

// readCPU returns the CPU time (user and system, all threads) process pid
// has used so far: utime + stime of /proc/<pid>/stat. Linux only;
// elsewhere an error.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: cpu: %w", err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime, the 14th and 15th fields, from the
// contents of /proc/<pid>/stat. The second field, the command in
// parentheses, may hold spaces and parentheses, so the fields are counted
// after its last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: no command field", errStat)
	}
	// After ") ": state is field 3, utime 14, stime 15.
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: %d fields after the command, want at least 13", errStat, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: cpu field %q", errStat, s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuMeter measures the CPU time some processes use between its start
// and stop. It holds no goroutine.
type cpuMeter struct {
	procs []proc
	start []time.Duration
	ok    []bool // the start was read
}

// startCPU reads the CPU time of procs now.
func startCPU(procs []proc) *cpuMeter {
	m := &cpuMeter{procs: procs, start: make([]time.Duration, len(procs)), ok: make([]bool, len(procs))}
	for i, p := range procs {
		t, err := readCPU(p.pid)
		m.start[i], m.ok[i] = t, err == nil
	}
	return m
}

// stop reads the CPU time of the processes again and returns what each
// used since start, per put of puts and per row of rows; a process
// either read did not answer for (gone, or not on Linux) is left out.
func (m *cpuMeter) stop(puts, rows int64) []NodeCPU {
	var out []NodeCPU
	for i, p := range m.procs {
		if !m.ok[i] {
			continue
		}
		t, err := readCPU(p.pid)
		if err != nil {
			continue
		}
		out = append(out, nodeCPU(p.name, t-m.start[i], puts, rows))
	}
	return out
}

// nodeCPU is used CPU time of node spread over puts, and over rows.
func nodeCPU(node string, used time.Duration, puts, rows int64) NodeCPU {
	c := NodeCPU{Node: node, Seconds: used.Seconds()}
	if puts > 0 {
		c.MicrosPerPut = float64(used.Microseconds()) / float64(puts)
	}
	if rows > 0 {
		c.MicrosPerRow = float64(used.Microseconds()) / float64(rows)
	}
	return c
}

// takeCPU removes the figures of the process called name from cpu and
// returns them; nil when cpu has none.
func takeCPU(cpu *[]NodeCPU, name string) *NodeCPU {
	for i, c := range *cpu {
		if c.Node == name {
			*cpu = append((*cpu)[:i:i], (*cpu)[i+1:]...)
			return &c
		}
	}
	return nil
}

// sumPerRow is the sum of the nodes' CPU µs per row: what a row cost a
// cluster, all its nodes together.
func sumPerRow(nodes []NodeCPU) float64 {
	var s float64
	for _, n := range nodes {
		s += n.MicrosPerRow
	}
	return s
}

// landedRows is the rows run r, whose warmup made warmup puts, put
// into ClickHouse: the warmup's and the measured rows counted there
// (the measured puts when it did not count them).
func landedRows(r Result, warmup int) int64 {
	if r.Rows != nil {
		return int64(warmup) + r.Rows.Rows
	}
	return int64(warmup) + r.Puts
}
