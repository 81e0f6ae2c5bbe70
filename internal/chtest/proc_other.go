//go:build !linux

package chtest

import "os/exec"

// setDeathSignal does nothing where the kernel offers no parent-death
// signal; the test's cleanup still stops the server on every ordinary path.
func setDeathSignal(*exec.Cmd) {}
