package chtest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the server when the test binary dies
// without stopping it (a timeout panic, SIGKILL), so no server outlives it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
