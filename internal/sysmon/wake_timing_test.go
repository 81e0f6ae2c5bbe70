//go:build linux

package sysmon

import (
	"strconv"
	"testing"
)

// TestSetting_keepsMonitorOutOfDeepSleep: what the setting is for, as
// the runtime does it. An idle process whose GODEBUG holds Setting has
// its monitor polling every 10 ms, about 100 wakeups a second; without
// it (schedtrace=0) the monitor sleeps until the next timer, and the
// process's threads sleep through the second (10-20 wakeups when the
// machine is idle). The bounds leave room for a loaded machine: a thread
// that sleeps 10 ms wakes late, not never, and other processes' work
// adds wakeups to the sleeping one (31 to 48 once, in make test), so the
// sleeping child is held to half the polling one's count.
func TestSetting_keepsMonitorOutOfDeepSleep(t *testing.T) {
	const minAwake = 40
	count := func(godebug string) int {
		t.Helper()
		lines := child(t, "idle", &godebug)
		n, err := strconv.Atoi(lines[len(lines)-1])
		if len(lines) != 1 || err != nil {
			t.Fatalf("idle child with GODEBUG=%s: output %q, want one count", godebug, lines)
		}
		t.Logf("idle for %v with GODEBUG=%s: %d voluntary context switches", childIdle, godebug, n)
		return n
	}
	awake := count(Setting)
	if awake < minAwake {
		t.Errorf("idle for %v with GODEBUG=%s: %d voluntary context switches, want at least %d (the monitor polling every 10 ms)",
			childIdle, Setting, awake, minAwake)
	}
	// A loaded machine only adds wakeups: the least of up to three tries
	// is the one asked about.
	maxAsleep := awake / 2
	n := count("schedtrace=0")
	for try := 1; try < 3 && n > maxAsleep; try++ {
		n = min(n, count("schedtrace=0"))
	}
	if n > maxAsleep {
		t.Errorf("idle for %v with GODEBUG=schedtrace=0: %d voluntary context switches, want at most %d (the monitor in its deep sleep)",
			childIdle, n, maxAsleep)
	}
}
