//go:build !unix

package sysmon

// Exec does nothing where a process cannot start another binary in its
// place: the monitor keeps the runtime's default.
func Exec(args []string) error { return nil }
