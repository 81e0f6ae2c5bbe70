//go:build unix

package dispatch

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on path (created if missing), so that
// a second process given the same data dir fails at once instead of
// cutting the tail of a log the first one is writing. The lock goes with
// the returned file's close, or the process.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is locked: another process uses this data dir", path)
		}
		return nil, err
	}
	return f, nil
}
