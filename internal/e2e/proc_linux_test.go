//go:build e2e

package e2e

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the child when the test binary dies
// without stopping it (a timeout panic, SIGKILL), so no server outlives it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
