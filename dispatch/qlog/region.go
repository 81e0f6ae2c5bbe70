package qlog

import (
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"
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
	file    *os.File    // the segment file, open while the Region is reachable; nil when mem is
	deleted atomic.Bool // the log deleted the file
	// ended is set once the mapping ended (the Region's cleanup ran):
	// nothing reads the file through it any more. Nil when nothing was
	// mapped.
	ended *atomic.Bool
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
	mem, f, err := mapFile(path, size)
	if err != nil {
		return nil, err
	}
	r := &Region{mem: mem, file: f}
	if mem != nil { // nil: nothing mapped here (mapFile)
		r.ended = new(atomic.Bool)
		runtime.AddCleanup(r, func(m mapping) {
			_ = unmapFile(m.mem)
			_ = m.file.Close()
			m.ended.Store(true)
		}, mapping{mem, f, r.ended})
	}
	return r, nil
}

// mapping is what a Region's cleanup ends.
type mapping struct {
	mem   []byte
	file  *os.File
	ended *atomic.Bool
}

// endedFlag returns the flag set once r's mapping ended; nil when r maps
// nothing (its file is free at once).
func (r *Region) endedFlag() *atomic.Bool {
	if r == nil {
		return nil
	}
	return r.ended
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

// maxViewGap is how many bytes between two views ReadViews reads through
// rather than ending its read: the frames and record heads between
// consecutive values of the log are some tens of bytes.
const maxViewGap = 4 << 10

// ReadViews reads a prefix of views, which are views of the log's
// records, from r's segment file into buf with one pread, and appends to
// out views of buf holding the same bytes, one per view read. It reads
// the views of r that follow one another in the file, each starting at
// most maxViewGap bytes after the one before ends, as many as buf holds;
// it reads none (and returns out as it is) when views[0] is not a view of
// r, buf cannot hold it, or the read fails.
//
// A read of a mapping faults its pages into the process a few at a time,
// and the log takes them out again every few MiB (doc.go, "Mapped
// records"); pread copies the same bytes from the page cache at a
// fraction of that CPU, so a reader of many consecutive records (a
// drainer sending a batch) reads them this way.
func (r *Region) ReadViews(buf []byte, views, out [][]byte) [][]byte {
	if len(views) == 0 {
		return out
	}
	start, ok := r.offset(views[0])
	if !ok || len(views[0]) > len(buf) {
		return out
	}
	n0 := len(out)
	out = append(out, buf[:len(views[0]):len(views[0])])
	end := start + int64(len(views[0]))
	for _, v := range views[1:] {
		off, ok := r.offset(v)
		if !ok || off < end || off > end+maxViewGap || off+int64(len(v))-start > int64(len(buf)) {
			break
		}
		out = append(out, buf[off-start:off-start+int64(len(v)):off-start+int64(len(v))])
		end = off + int64(len(v))
	}
	if _, err := r.file.ReadAt(buf[:end-start], start); err != nil {
		return out[:n0]
	}
	return out
}

// Contains reports whether v is a view of r (a nil Region has none).
func (r *Region) Contains(v []byte) bool {
	_, ok := r.offset(v)
	return ok
}

// offset returns where v, a view of r, starts in the segment file; false
// when v is empty or not a view of r.
func (r *Region) offset(v []byte) (int64, bool) {
	if r == nil || r.file == nil || len(v) == 0 || len(r.mem) == 0 {
		return 0, false
	}
	base, p := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem))), uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	if p < base || p-base > uintptr(len(r.mem)) || uintptr(len(v)) > uintptr(len(r.mem))-(p-base) {
		return 0, false
	}
	return int64(p - base), true
}
