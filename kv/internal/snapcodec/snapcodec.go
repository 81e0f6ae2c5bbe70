// Package snapcodec is the binary encoding of the key space's snapshots,
// shared by the parts that write one (kv/mvcc's keys, leases and alarms;
// kv/auth's users and roles): unsigned and signed varints, and byte
// strings prefixed by their length. A Decoder never trusts a length: a
// count or a string longer than what is left fails it, so a corrupt
// snapshot cannot make it allocate more than the snapshot's size.
package snapcodec

import (
	"bytes"
	"encoding/binary"
	"fmt"
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
