//go:build !linux

package qlog

import "os"

// datasync flushes f: fsync where fdatasync is not at hand.
func datasync(f *os.File) error { return f.Sync() }
