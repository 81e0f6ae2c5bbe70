package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
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

// usage is what a process has used so far: its CPU time, and, where
// /proc shows them, its read and write syscalls and its context
// switches. Syscalls and switches per row do not move with the
// machine's speed, as CPU time does: a change to what the server does
// per row shows in them run after run, where CPU time needs many runs.
type usage struct {
	cpu      time.Duration
	syscalls int64 // syscr + syscw of /proc/<pid>/io; -1 when unread
	switches int64 // summed over the live threads; -1 when unread
}

// readUsage returns what process pid has used so far. Its CPU time must
// be read; syscalls and switches are -1 when /proc does not show them
// (another user's process, or not Linux).
func readUsage(pid int) (usage, error) {
	t, err := readCPU(pid)
	if err != nil {
		return usage{}, err
	}
	u := usage{cpu: t, syscalls: -1, switches: -1}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		// syscr and syscw count the syscalls of every thread the
		// process has had, the ones gone included.
		if n, ok := sumFields(b, "syscr", "syscw"); ok {
			u.syscalls = n
		}
	}
	if n, ok := readSwitches(pid); ok {
		u.switches = n
	}
	return u, nil
}

// sumFields returns the sum of the "name: value" lines of a /proc file
// (io, status) called names, and whether each was there, once, as a
// count.
func sumFields(b []byte, names ...string) (int64, bool) {
	var sum int64
	found := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok || !slices.Contains(names, string(name)) {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(val)), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		sum += n
		found++
	}
	return sum, found == len(names)
}

// readSwitches returns the context switches, voluntary and not, of the
// live threads of process pid: a thread that has ended takes its
// switches with it, which a Go server's threads seldom do.
func readSwitches(pid int) (int64, bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue // the thread ended meanwhile
		}
		n, ok := sumFields(b, "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
		if !ok {
			return 0, false
		}
		sum += n
	}
	return sum, true
}

// cpuMeter measures what some processes use between its start and stop.
// It holds no goroutine.
type cpuMeter struct {
	procs []proc
	start []usage
	ok    []bool // the start was read
}

// startCPU reads what procs have used until now.
func startCPU(procs []proc) *cpuMeter {
	m := &cpuMeter{procs: procs, start: make([]usage, len(procs)), ok: make([]bool, len(procs))}
	for i, p := range procs {
		u, err := readUsage(p.pid)
		m.start[i], m.ok[i] = u, err == nil
	}
	return m
}

// stop reads what the processes have used again and returns what each
// used since start, per put of puts and per row of rows; a process
// either read did not answer for (gone, or not on Linux) is left out.
func (m *cpuMeter) stop(puts, rows int64) []NodeCPU {
	var out []NodeCPU
	for i, p := range m.procs {
		if !m.ok[i] {
			continue
		}
		u, err := readUsage(p.pid)
		if err != nil {
			continue
		}
		c := nodeCPU(p.name, u.cpu-m.start[i].cpu, puts, rows)
		if rows > 0 {
			if a, b := m.start[i].syscalls, u.syscalls; a >= 0 && b >= a {
				c.SyscallsPerRow = float64(b-a) / float64(rows)
			}
			if a, b := m.start[i].switches, u.switches; a >= 0 && b >= a {
				c.SwitchesPerRow = float64(b-a) / float64(rows)
			}
		}
		out = append(out, c)
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
