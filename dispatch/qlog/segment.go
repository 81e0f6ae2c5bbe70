package qlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// segExt ends the name of every segment file: its number, 16 hex digits.
const segExt = ".qlog"

// segment is what the log knows of one segment file. Only the writer
// goroutine changes a segment, and only with Log.mu held; Release reads
// and clears its live bits with Log.mu held.
type segment struct {
	id   uint64 // the file's number; later segments have larger ones
	path string
	base uint64 // seq of its first data record
	hdr  int64  // bytes of its header: frames follow
	salt uint32 // its frames' CRCs start from it
	// reused: the file held an older segment (flagReused), whose bytes
	// may follow the last frame until the segment is sealed.
	reused bool
	// made: this log made the file (not Open: an earlier log of the
	// same process may still map it), so only its own mapping reads it.
	made bool

	n    uint64   // data records: seqs base to base+n-1
	bits []uint64 // bit i set: data record base+i is live here

	live     int   // live records here, data and moved
	recs     int   // records written here, data and moved
	recBytes int64 // bytes of those, frames included
	size     int64 // bytes in the file

	stuck bool // compaction found it damaged or cannot open it: the writer's alone

	// region maps the file, nil when it could not be mapped; set before
	// the segment's records are handed out, then never changed.
	region *Region
}

func segName(id uint64) string { return fmt.Sprintf("%016x%s", id, segExt) }

// parseSegName returns the number of a segment file's name.
func parseSegName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, segExt)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(hex, 16, 64)
	return id, err == nil
}

// newSegment returns a new segment of the present format. Its salt is
// its number: no two segments of a log have the same, so that the frames
// of a file's earlier segment never check out in a later one.
func newSegment(dir string, id, base uint64) *segment {
	return &segment{id: id, path: filepath.Join(dir, segName(id)), base: base, hdr: headerSize, salt: uint32(id), size: headerSize, made: true}
}

// owns reports whether seq is one of the segment's data records.
func (s *segment) owns(seq uint64) bool { return seq >= s.base && seq-s.base < s.n }

// isLive reports whether data record seq, which s owns, is live here.
func (s *segment) isLive(seq uint64) bool {
	i := seq - s.base
	return s.bits[i/64]&(1<<(i%64)) != 0
}

// clear marks data record seq, which s owns and holds live, not live.
func (s *segment) clear(seq uint64) {
	i := seq - s.base
	s.bits[i/64] &^= 1 << (i % 64)
	s.live--
}

// addData counts the next data record, live, of size bytes.
func (s *segment) addData(size int) {
	i := s.n
	if i/64 >= uint64(len(s.bits)) {
		s.bits = append(s.bits, 0)
	}
	s.bits[i/64] |= 1 << (i % 64)
	s.n++
	s.live++
	s.recs++
	s.recBytes += int64(size)
}

// liveBytes estimates the bytes of the live records from the mean size of
// the segment's records.
func (s *segment) liveBytes() int64 {
	if s.recs == 0 {
		return 0
	}
	return s.recBytes * int64(s.live) / int64(s.recs)
}

// segFile is what the log does with a segment file; tests wrap it to
// inject faults.
type segFile interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	// Sync makes the data written durable (fdatasync).
	Sync() error
	Close() error
}

// osFile is a segFile on disk.
type osFile struct{ *os.File }

func (f osFile) Sync() error { return datasync(f.File) }

func openOSFile(path string, flag int) (segFile, error) {
	f, err := os.OpenFile(path, flag, 0o640)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// scanner reads a segment's frames in order.
type scanner struct {
	r    *bufio.Reader
	salt uint32 // of the segment's frames
	off  int64  // offset of the next frame
	end  int64  // bytes in the file
	head [frameSize]byte
	buf  []byte
}

// newScanner reads the frames of f, salted with salt, from off, which
// follows the header; f holds end bytes.
func newScanner(f io.ReaderAt, salt uint32, off, end int64) *scanner {
	return &scanner{r: bufio.NewReaderSize(io.NewSectionReader(f, off, end-off), 1<<20), salt: salt, off: off, end: end}
}

// readError is a read of a segment that failed (EIO, a file system
// gone): no sign of damage, so nothing of the file may be cut for it.
type readError struct{ err error }

func (e readError) Error() string { return "read: " + e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// readFailure returns err of a read of a frame the file's size says is
// there: errTorn when the file ended before it after all, else a
// readError.
func readFailure(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errTorn
	}
	return readError{err}
}

// next returns the next frame, io.EOF at the end of the file, errTorn when
// the file ends inside a frame, a readError when reading failed, another
// error for a damaged one. The frame's body is valid until the next call.
func (s *scanner) next() (frame, error) {
	left := s.end - s.off
	switch {
	case left == 0:
		return frame{}, io.EOF
	case left < frameSize:
		return frame{}, errTorn
	}
	if _, err := io.ReadFull(s.r, s.head[:]); err != nil {
		return frame{}, readFailure(err)
	}
	n := int64(binary.LittleEndian.Uint32(s.head[:]))
	if n > left-frameSize {
		return frame{}, errTorn
	}
	if need := frameSize + int(n); cap(s.buf) < need {
		s.buf = make([]byte, need)
	}
	b := s.buf[:frameSize+int(n)]
	copy(b, s.head[:])
	if _, err := io.ReadFull(s.r, b[frameSize:]); err != nil {
		return frame{}, readFailure(err)
	}
	f, err := parseFrame(b, s.salt)
	if err != nil {
		return frame{}, err
	}
	s.off += int64(f.size)
	return f, nil
}
