// Package snapcodec is the binary encoding of the key space's snapshots,
// shared by the parts that write one (kv/mvcc's keys, leases and alarms;
// kv/auth's users and roles): unsigned and signed varints, and byte
// strings prefixed by their length. A Decoder never trusts a length: a
// count or a string longer than what is left fails it, so a corrupt
// snapshot cannot make it allocate more than the snapshot's size. A
// Reader decodes the same from a stream, holding a chunk of it at a
// time: it allocates a string as its bytes arrive, to the same end.
package snapcodec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// Encoder appends to a buffer.
type Encoder struct {
	w   *bytes.Buffer
	tmp [binary.MaxVarintLen64]byte
}

// NewEncoder returns an Encoder that writes to w.
func NewEncoder(w *bytes.Buffer) *Encoder { return &Encoder{w: w} }

// Raw writes b as it is.
func (e *Encoder) Raw(b []byte) { e.w.Write(b) }

// Uint writes v as an unsigned varint.
func (e *Encoder) Uint(v uint64) { e.w.Write(e.tmp[:binary.PutUvarint(e.tmp[:], v)]) }

// Int writes v as a signed varint.
func (e *Encoder) Int(v int64) { e.w.Write(e.tmp[:binary.PutVarint(e.tmp[:], v)]) }

// Bytes writes b's length, then b.
func (e *Encoder) Bytes(b []byte) {
	e.Uint(uint64(len(b)))
	e.w.Write(b)
}

// Decoder reads what an Encoder wrote. The first error sticks: later
// reads return zero values, and Err returns it.
type Decoder struct {
	b       []byte
	err     error
	corrupt error
}

// NewDecoder returns a Decoder of b whose errors wrap corrupt, the
// caller's sentinel for a damaged snapshot.
func NewDecoder(b []byte, corrupt error) *Decoder { return &Decoder{b: b, corrupt: corrupt} }

// Err returns the first error, nil if every read so far was whole.
func (d *Decoder) Err() error { return d.err }

// Len returns how many bytes are left unread.
func (d *Decoder) Len() int { return len(d.b) }

func (d *Decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated", d.corrupt)
	}
	d.b = nil
}

// Uint reads an unsigned varint.
func (d *Decoder) Uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Int reads a signed varint.
func (d *Decoder) Int() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Count reads a count of items, each of which takes a byte at least, so
// it is bounded by the bytes left.
func (d *Decoder) Count() int {
	v := d.Uint()
	if v > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(v)
}

// Bytes reads a byte string into a new slice; nil when it is empty.
func (d *Decoder) Bytes() []byte {
	n := d.Uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	b := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return b
}

// readChunk is how much a Reader asks its stream for at once, and the
// most it allocates ahead of the bytes a string's length announces.
const readChunk = 64 << 10

// Reader reads what an Encoder wrote from a stream whose length it does
// not know, as a follower restores a snapshot sent to it, without
// holding the stream's bytes: it keeps only readChunk of them at a time.
// Where a Decoder bounds a count or a length by the bytes left, a Reader
// cannot: it allocates a byte string in pieces as its bytes arrive, so
// that a corrupt length costs at most the stream's size (and readChunk),
// and a caller looping over a count stops once Err is set. It keeps a
// CRC of the bytes read (Sum), for the checksum that ends a snapshot.
// The first error sticks, as a Decoder's.
type Reader struct {
	r        io.Reader
	buf      []byte
	pos, end int    // buf[pos:end] is read from r and not yet consumed
	sum      uint32 // of what was consumed before buf
	tab      *crc32.Table
	err      error
	corrupt  error
}

// NewReader returns a Reader of r whose errors wrap corrupt, summing
// with tab.
func NewReader(r io.Reader, corrupt error, tab *crc32.Table) *Reader {
	return &Reader{r: r, buf: make([]byte, readChunk), tab: tab, corrupt: corrupt}
}

// Err returns the first error, nil if every read so far was whole.
func (d *Reader) Err() error { return d.err }

// Sum returns the CRC of every byte consumed so far.
func (d *Reader) Sum() uint32 { return crc32.Update(d.sum, d.tab, d.buf[:d.pos]) }

// fill makes sure unconsumed bytes are buffered; at the end of the
// stream it returns io.EOF, and any other error of the stream as it is.
func (d *Reader) fill() error {
	if d.pos < d.end {
		return nil
	}
	d.sum = d.Sum()
	d.pos, d.end = 0, 0
	// A reader may return no bytes and no error; a few such reads in a
	// row are allowed, as bufio allows them.
	for range 100 {
		n, err := d.r.Read(d.buf)
		d.end = n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

func (d *Reader) failWith(err error) {
	if d.err != nil {
		return
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		d.err = fmt.Errorf("%w: truncated", d.corrupt)
	} else {
		d.err = fmt.Errorf("%w: read: %w", d.corrupt, err)
	}
}

// ReadByte reads one byte (io.ByteReader, for the varints).
func (d *Reader) ReadByte() (byte, error) {
	if d.err != nil {
		return 0, d.err
	}
	if err := d.fill(); err != nil {
		d.failWith(err)
		return 0, d.err
	}
	b := d.buf[d.pos]
	d.pos++
	return b, nil
}

// Uint reads an unsigned varint.
func (d *Reader) Uint() uint64 {
	v, err := binary.ReadUvarint(d)
	if err != nil {
		d.failWith(err)
		return 0
	}
	return v
}

// Int reads a signed varint.
func (d *Reader) Int() int64 {
	v, err := binary.ReadVarint(d)
	if err != nil {
		d.failWith(err)
		return 0
	}
	return v
}

// Count reads a count of items. Nothing bounds it but an int's size:
// loop over it while Err is nil, and allocate for it no more than the
// first items need.
func (d *Reader) Count() int {
	v := d.Uint()
	if v > math.MaxInt32 {
		d.failWith(fmt.Errorf("a count of %d", v))
		return 0
	}
	return int(v)
}

// Bytes reads a byte string into a new slice; nil when it is empty.
func (d *Reader) Bytes() []byte {
	n := d.Uint()
	if n == 0 || d.err != nil {
		return nil
	}
	b := make([]byte, 0, min(n, readChunk))
	for uint64(len(b)) < n {
		if err := d.fill(); err != nil {
			d.failWith(err)
			return nil
		}
		take := min(uint64(d.end-d.pos), n-uint64(len(b)))
		b = append(b, d.buf[d.pos:d.pos+int(take)]...)
		d.pos += int(take)
	}
	return b
}

// Full reads len(p) bytes into p.
func (d *Reader) Full(p []byte) {
	for i := 0; i < len(p) && d.err == nil; {
		if err := d.fill(); err != nil {
			d.failWith(err)
			return
		}
		n := copy(p[i:], d.buf[d.pos:d.end])
		d.pos += n
		i += n
	}
}

// AtEnd reports whether the stream has no byte left; a stream's error
// other than its end sets Err.
func (d *Reader) AtEnd() bool {
	if d.err != nil {
		return false
	}
	switch err := d.fill(); err {
	case nil:
		return false
	case io.EOF:
		return true
	default:
		d.failWith(err)
		return false
	}
}
