//go:build !unix

package testutil

// ProcessCPU is not measured here.
func ProcessCPU() (int64, bool) { return 0, false }
