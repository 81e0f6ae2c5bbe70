//go:build !unix

package dispatch

import "os"

// lockDir opens path; other systems are not locked.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}
