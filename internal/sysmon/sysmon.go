// Package sysmon keeps the Go runtime's monitor thread out of its deep
// sleep, so that a process that goes idle and busy many times a second
// does not pay for the monitor's fastest polling each time.
//
// The runtime's monitor thread (sysmon) retakes processors from
// goroutines stuck in system calls and preempts long-running ones. It
// sleeps 20 µs between its checks, and once 50 checks in a row found
// nothing to do, twice as long each time, up to 10 ms. While every
// processor is idle it instead sleeps until the next timer is due (its
// deep sleep), and the first system call a goroutine makes after that
// wakes it and sends it back to 20 µs. A chute node serving calls in
// bursts with idle gaps between them, as a member that forwards its
// puts to another's queue does, goes idle and busy hundreds of times a
// second, and its monitor spends most of its time in 20 µs sleeps: a
// nanosleep and two context switches each, which on the development
// machine made a large share of such a member's CPU
// (docs/operations.md, Monitor thread, has the measurements).
//
// With the GODEBUG setting schedtrace the runtime never takes the deep
// sleep (it must print its scheduler trace on time), so the monitor
// backs off to 10 ms and stays there until it really retakes a
// processor from a system call; chute makes its long ones (the queue
// log's writes and fsyncs) through io_uring, off the Go threads. The
// trace's period is set to its largest, 2^31-1 ms (24.8 days): the
// runtime prints one line ("SCHED ...") on stderr once the machine's
// monotonic clock has passed that many milliseconds since its boot, at
// the process's start on a machine up that long, and then every 24.8
// days. An idle process's monitor wakes every 10 ms rather than at its
// next timer, which on the development machine left an idle node's CPU
// unchanged.
//
// The runtime reads GODEBUG's schedtrace only when the process starts,
// so a binary that wants it starts itself again, in the same process
// (execve), with the setting added: Exec, first thing in main. A
// GODEBUG that already sets schedtrace, to any value, is the operator's
// choice and is kept: GODEBUG=schedtrace=0 turns this off.
package sysmon

import "strings"

// Setting is the GODEBUG entry that keeps the monitor out of its deep
// sleep: the scheduler trace at its longest period.
const Setting = "schedtrace=2147483647"

// Env returns environ with Setting added to GODEBUG and true; or
// environ as it is and false when GODEBUG already sets schedtrace. The
// result has one GODEBUG, the first of environ's (the one the runtime
// reads) with Setting after its entries.
func Env(environ []string) ([]string, bool) {
	godebug, found := "", false
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			out = append(out, kv)
			continue
		}
		if !found {
			godebug, found = v, true
		}
	}
	for entry := range strings.SplitSeq(godebug, ",") {
		if key, _, _ := strings.Cut(entry, "="); strings.TrimSpace(key) == "schedtrace" {
			return environ, false
		}
	}
	if godebug != "" {
		godebug += ","
	}
	return append(out, "GODEBUG="+godebug+Setting), true
}
