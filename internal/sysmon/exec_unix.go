//go:build unix

package sysmon

import (
	"os"
	"syscall"
)

// selfExe names the running binary on Linux even after the file at its
// path was replaced (an upgrade in place): the process starts again as
// the binary it is.
const selfExe = "/proc/self/exe"

// Exec starts the running binary again in this process, with args (the
// whole argv, os.Args) and the environment Env makes of the process's,
// when Env changes it. It returns only when it did not: nil when there
// was nothing to change, else why the exec failed, and the process goes
// on as it is.
func Exec(args []string) error {
	env, changed := Env(os.Environ())
	if !changed {
		return nil
	}
	exe := selfExe
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	return syscall.Exec(exe, args, env)
}
