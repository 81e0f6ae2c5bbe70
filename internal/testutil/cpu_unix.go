//go:build unix

package testutil

import "syscall"

// ProcessCPU returns the CPU time this process used so far, user and
// system, in nanoseconds; false where it is not measured.
func ProcessCPU() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
