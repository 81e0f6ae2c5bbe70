package qlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// The segment file format; doc.go describes it.
const (
	segMagic   = "chuteqlg"
	segVersion = 1
	headerSize = 24 // magic, base seq, version, CRC
	frameSize  = 8  // length, CRC

	typeData    = 1 // the record; its seq is the segment's base plus its index among the data records
	typeMoved   = 2 // seq, then the record: a live record rewritten by compaction
	typeRelease = 3 // runs of released seqs

	// releaseMaxBody bounds a release record; more releases take more
	// records.
	releaseMaxBody = 32 << 10
)

// castagnoli returns the table of CRC-32C, which CPUs compute in
// hardware; hash/crc32 makes it once.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// appendHeader appends the header of a segment whose first data record
// gets seq base.
func appendHeader(b []byte, base uint64) []byte {
	b = append(b, segMagic...)
	b = binary.LittleEndian.AppendUint64(b, base)
	b = binary.LittleEndian.AppendUint32(b, segVersion)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[len(b)-20:], castagnoli()))
}

// parseHeader returns the base seq of a segment header.
func parseHeader(h []byte) (base uint64, err error) {
	switch {
	case len(h) < headerSize:
		return 0, errors.New("header cut short")
	case string(h[:8]) != segMagic:
		return 0, errors.New("not a queue log segment")
	case binary.LittleEndian.Uint32(h[20:]) != crc32.Checksum(h[:20], castagnoli()):
		return 0, errors.New("header checksum mismatch")
	case binary.LittleEndian.Uint32(h[16:]) != segVersion:
		return 0, fmt.Errorf("version %d, want %d", binary.LittleEndian.Uint32(h[16:]), segVersion)
	}
	return binary.LittleEndian.Uint64(h[8:]), nil
}

// dataFrameSize is the bytes a record of n bytes takes as a data frame.
func dataFrameSize(n int) int { return frameSize + 1 + n }

// appendFrame appends a frame of type typ whose body is head then rec.
// The CRC covers the length and the body.
func appendFrame(b []byte, typ byte, head, rec []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(1+len(head)+len(rec)))
	b = append(b, 0, 0, 0, 0) // CRC, below
	b = append(b, typ)
	b = append(b, head...)
	b = append(b, rec...)
	t := castagnoli()
	crc := crc32.Update(crc32.Checksum(b[start:start+4], t), t, b[start+frameSize:])
	binary.LittleEndian.PutUint32(b[start+4:], crc)
	return b
}

// appendMoved appends a moved frame: seq, then rec.
func appendMoved(b []byte, seq uint64, rec []byte) []byte {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], seq)
	return appendFrame(b, typeMoved, h[:], rec)
}

// appendReleases appends release frames naming seqs, which it sorts.
// Each frame's body is runs of consecutive seqs, each run two uvarints:
// its first seq less the end of the run before (0 for the first run),
// and its length less one.
func appendReleases(b []byte, seqs []uint64) []byte {
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	var body []byte
	prevEnd := uint64(0)
	for i := 0; i < len(seqs); {
		j := i + 1
		for j < len(seqs) && seqs[j] == seqs[j-1]+1 {
			j++
		}
		if len(body) > releaseMaxBody-2*binary.MaxVarintLen64 {
			b = appendFrame(b, typeRelease, nil, body)
			body, prevEnd = body[:0], 0
		}
		body = binary.AppendUvarint(body, seqs[i]-prevEnd)
		body = binary.AppendUvarint(body, uint64(j-i-1))
		prevEnd = seqs[j-1] + 1
		i = j
	}
	if len(body) > 0 {
		b = appendFrame(b, typeRelease, nil, body)
	}
	return b
}

// parseReleases calls fn with each seq a release record's payload names,
// all of which must be below limit: a release follows its record.
func parseReleases(p []byte, limit uint64, fn func(seq uint64)) error {
	prevEnd := uint64(0)
	for len(p) > 0 {
		d, n := binary.Uvarint(p)
		if n <= 0 {
			return errors.New("bad release run")
		}
		p = p[n:]
		l, n := binary.Uvarint(p)
		if n <= 0 || d > ^uint64(0)-prevEnd || l >= ^uint64(0)-(prevEnd+d) {
			return errors.New("bad release run")
		}
		p = p[n:]
		first := prevEnd + d
		if first+l >= limit {
			return fmt.Errorf("release of %d, not yet appended", first+l)
		}
		for s := first; s <= first+l; s++ {
			fn(s)
		}
		prevEnd = first + l + 1
	}
	return nil
}

// frame is one record read from a segment.
type frame struct {
	typ  byte
	seq  uint64 // moved frames only
	body []byte // the record (data, moved) or the runs (release)
	size int    // bytes in the file, frame header included
}

// errTorn: the file ends inside a frame.
var errTorn = errors.New("torn record at the end")

// parseFrame reads the frame at the start of b. The returned frame's body
// aliases b.
func parseFrame(b []byte) (frame, error) {
	if len(b) < frameSize {
		return frame{}, errTorn
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 {
		return frame{}, errors.New("empty record")
	}
	if uint64(n) > uint64(len(b)-frameSize) {
		return frame{}, errTorn
	}
	body := b[frameSize : frameSize+int(n)]
	t := castagnoli()
	crc := crc32.Update(crc32.Checksum(b[:4], t), t, body)
	if crc != binary.LittleEndian.Uint32(b[4:]) {
		return frame{}, errors.New("checksum mismatch")
	}
	f := frame{typ: body[0], body: body[1:], size: frameSize + int(n)}
	switch f.typ {
	case typeData, typeRelease:
	case typeMoved:
		if len(f.body) < 8 {
			return frame{}, errors.New("moved record cut short")
		}
		f.seq, f.body = binary.LittleEndian.Uint64(f.body), f.body[8:]
	default:
		return frame{}, fmt.Errorf("unknown record type %d", f.typ)
	}
	return f, nil
}
