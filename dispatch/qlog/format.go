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
	segMagic     = "chuteqlg"
	segVersion   = 2
	headerSize   = 32 // magic, base seq, version, flags, salt, CRC
	headerSizeV1 = 24 // magic, base seq, version, CRC
	frameSize    = 8  // length, CRC

	// flagReused marks a segment written over an older one's file: the
	// bytes past its last frame may be that one's.
	flagReused = 1

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

// header is what a segment's header says.
type header struct {
	base   uint64 // seq of the first data record
	salt   uint32 // the CRC of every frame starts from it (0 in version 1)
	reused bool   // flagReused
	size   int64  // bytes of the header: frames follow
}

// appendHeader appends the header of a segment whose first data record
// gets seq base and whose frames are salted with salt.
func appendHeader(b []byte, base uint64, salt uint32, reused bool) []byte {
	flags := uint32(0)
	if reused {
		flags |= flagReused
	}
	b = append(b, segMagic...)
	b = binary.LittleEndian.AppendUint64(b, base)
	b = binary.LittleEndian.AppendUint32(b, segVersion)
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = binary.LittleEndian.AppendUint32(b, salt)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[len(b)-28:], castagnoli()))
}

// parseHeader reads the header at the start of h: version 2, or version
// 1 (24 bytes, no flags, frames unsalted), which older chutes wrote.
func parseHeader(h []byte) (header, error) {
	if len(h) < headerSizeV1 {
		return header{}, errors.New("header cut short")
	}
	if string(h[:8]) != segMagic {
		return header{}, errors.New("not a queue log segment")
	}
	hd := header{base: binary.LittleEndian.Uint64(h[8:])}
	switch v := binary.LittleEndian.Uint32(h[16:]); v {
	case 1:
		if binary.LittleEndian.Uint32(h[20:]) != crc32.Checksum(h[:20], castagnoli()) {
			return header{}, errors.New("header checksum mismatch")
		}
		hd.size = headerSizeV1
	case segVersion:
		if len(h) < headerSize {
			return header{}, errors.New("header cut short")
		}
		if binary.LittleEndian.Uint32(h[28:]) != crc32.Checksum(h[:28], castagnoli()) {
			return header{}, errors.New("header checksum mismatch")
		}
		flags := binary.LittleEndian.Uint32(h[20:])
		hd.reused, hd.salt, hd.size = flags&flagReused != 0, binary.LittleEndian.Uint32(h[24:]), headerSize
	default:
		// A later chute's header checks out in one of the two layouts
		// (or in neither: damage, as a rotted version field).
		v1 := binary.LittleEndian.Uint32(h[20:]) == crc32.Checksum(h[:20], castagnoli())
		v2 := len(h) >= headerSize && binary.LittleEndian.Uint32(h[28:]) == crc32.Checksum(h[:28], castagnoli())
		if !v1 && !v2 {
			return header{}, errors.New("header checksum mismatch")
		}
		return header{}, versionError{v}
	}
	return hd, nil
}

// versionError is a header of a format this log cannot read: a later
// chute's. Not damage: Open fails rather than delete the segment.
type versionError struct{ v uint32 }

func (e versionError) Error() string {
	return fmt.Sprintf("format version %d, want %d or 1 (written by a later chute?)", e.v, segVersion)
}

// dataFrameSize is the bytes a record of n bytes takes as a data frame.
func dataFrameSize(n int) int { return frameSize + 1 + n }

// appendFrame appends a frame of type typ whose body is head then rec.
// The CRC covers the length and the body, starting from the segment's
// salt: a frame of another segment never checks out in this one, even
// at the same offset of the same file.
func appendFrame(b []byte, salt uint32, typ byte, head, rec []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(1+len(head)+len(rec)))
	b = append(b, 0, 0, 0, 0) // CRC, below
	b = append(b, typ)
	b = append(b, head...)
	b = append(b, rec...)
	t := castagnoli()
	crc := crc32.Update(crc32.Update(salt, t, b[start:start+4]), t, b[start+frameSize:])
	binary.LittleEndian.PutUint32(b[start+4:], crc)
	return b
}

// appendMoved appends a moved frame: seq, then rec.
func appendMoved(b []byte, salt uint32, seq uint64, rec []byte) []byte {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], seq)
	return appendFrame(b, salt, typeMoved, h[:], rec)
}

// appendReleases appends release frames naming seqs, which it sorts.
// Each frame's body is runs of consecutive seqs, each run two uvarints:
// its first seq less the end of the run before (0 for the first run),
// and its length less one.
func appendReleases(b []byte, salt uint32, seqs []uint64) []byte {
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
			b = appendFrame(b, salt, typeRelease, nil, body)
			body, prevEnd = body[:0], 0
		}
		body = binary.AppendUvarint(body, seqs[i]-prevEnd)
		body = binary.AppendUvarint(body, uint64(j-i-1))
		prevEnd = seqs[j-1] + 1
		i = j
	}
	if len(body) > 0 {
		b = appendFrame(b, salt, typeRelease, nil, body)
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

// parseFrame reads the frame at the start of b, of a segment whose frames
// are salted with salt. The returned frame's body aliases b.
func parseFrame(b []byte, salt uint32) (frame, error) {
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
	crc := crc32.Update(crc32.Update(salt, t, b[:4]), t, body)
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
