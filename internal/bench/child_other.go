//go:build !linux

package bench

import "os/exec"

// setDeathSignal does nothing where the kernel offers no parent-death
// signal; stop still ends the child on every ordinary return path.
func setDeathSignal(*exec.Cmd) {}
