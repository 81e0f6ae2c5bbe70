package bench

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the child if this process dies without
// stopping it (SIGKILL, crash), so a matrix never leaves servers behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
