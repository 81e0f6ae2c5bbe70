package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DeletedOpen counts the files under dir this process holds open though
// they were deleted: disk space the file system gives back only once
// they are closed (a queue log's segments still mapped, say). Linux only:
// it reads /proc/self/fd, and fails the test where it cannot.
func DeletedOpen(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("testutil: reading the process's open files: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") && strings.HasSuffix(target, " (deleted)") {
			n++
		}
	}
	return n
}
