package testutil

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// DeletedOpen counts the files under dir this process holds open though
// they were deleted, or renamed to a name ending in one of also (a queue
// log's spare files: deleted segments kept to be written over, which
// must not be while they are open): disk space the file system gives
// back, or the log may reuse, only once they are closed (a queue log's
// segments still mapped, say). Linux only: it reads /proc/self/fd, and
// fails the test where it cannot.
func DeletedOpen(t testing.TB, dir string, also ...string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("testutil: reading the process's open files: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		renamed := slices.ContainsFunc(also, func(suffix string) bool { return strings.HasSuffix(target, suffix) })
		if err == nil && strings.HasPrefix(target, dir+"/") && (strings.HasSuffix(target, " (deleted)") || renamed) {
			n++
		}
	}
	return n
}
