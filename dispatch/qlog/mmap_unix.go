//go:build unix

package qlog

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of the file at path, read-only and shared with
// the page cache; size may pass the file's end, which the file grows into.
// It returns the file too, open for reading the same bytes with pread.
// On 32-bit systems it maps nothing (nil, nil): segments mapped with room
// to grow would use up the address space.
func mapFile(path string, size int64) ([]byte, *os.File, error) {
	if strconv.IntSize < 64 {
		return nil, nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return mem, f, nil
}

// unmapFile ends a mapping mapFile made.
func unmapFile(mem []byte) error { return unix.Munmap(mem) }

// dropPages takes mem's pages out of the process's page tables, not out
// of the page cache: a later read maps them again.
func dropPages(mem []byte) { _ = unix.Madvise(mem, unix.MADV_DONTNEED) }
