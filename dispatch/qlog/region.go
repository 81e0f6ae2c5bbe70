package qlog

import (
	"runtime"
	"sync/atomic"
)

// A Region is the read-only mapping of one segment file. The records
// AppendMapped and OpenMapped hand out mapped are slices of it, which stay
// valid while the Region is reachable: whoever keeps such a slice keeps
// its Region beside it. The log keeps the Region of each of its segments
// until it deletes the segment; the mapping ends once the garbage
// collector finds the Region unreachable, so a record stays readable
// after the log released, moved or deleted it, for as long as its holder
// keeps the Region. doc.go ("Mapped records") has the design.
type Region struct {
	mem     []byte
	deleted atomic.Bool // the log deleted the file
}

// Deleted reports whether the log deleted the segment file: its views
// still read, but hold the file's disk space until the Region is
// unreachable, so a holder that keeps them long should copy them. False
// for a nil Region.
func (r *Region) Deleted() bool { return r != nil && r.deleted.Load() }

// mapRegion maps size bytes of the segment file at path, or returns nil
// and the error when it cannot (the log then hands out no mapped
// records of that segment).
func mapRegion(path string, size int64) (*Region, error) {
	mem, err := mapFile(path, size)
	if err != nil {
		return nil, err
	}
	r := &Region{mem: mem}
	if mem != nil { // nil: nothing mapped here (mapFile)
		runtime.AddCleanup(r, func(mem []byte) { _ = unmapFile(mem) }, mem)
	}
	return r, nil
}

// view returns the n bytes at offset off of the file, or nil when they
// are not all mapped. The slice's capacity ends with it: an append to it
// copies.
func (r *Region) view(off int64, n int) []byte {
	if r == nil || off < 0 || off+int64(n) > int64(len(r.mem)) {
		return nil
	}
	return r.mem[off : off+int64(n) : off+int64(n)]
}

// dropPages takes the region's pages out of the process's resident
// memory: they stay in the page cache, and a read maps them again.
func (r *Region) dropPages() {
	if r != nil {
		dropPages(r.mem)
	}
}
