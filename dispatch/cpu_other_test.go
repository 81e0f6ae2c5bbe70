//go:build !unix

package dispatch

// processCPU is not measured here.
func processCPU() (int64, bool) { return 0, false }
