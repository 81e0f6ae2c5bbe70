//go:build e2e && !linux

package e2e

import "os/exec"

// setDeathSignal does nothing where the kernel has no parent-death signal.
func setDeathSignal(*exec.Cmd) {}
