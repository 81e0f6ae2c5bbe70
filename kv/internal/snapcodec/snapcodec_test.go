package snapcodec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errCorrupt = errors.New("corrupt")

func TestDecoder_roundTrip(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	e.Uint(300)
	e.Int(-7)
	e.Bytes([]byte("key"))
	e.Bytes(nil)
	e.Uint(2)
	d := NewDecoder(buf.Bytes(), errCorrupt)
	if u, i, b, empty, n := d.Uint(), d.Int(), d.Bytes(), d.Bytes(), d.Count(); u != 300 || i != -7 || string(b) != "key" || empty != nil || n != 0 {
		t.Errorf("got %d %d %q %v %d; want 300 -7 key nil and a count of 2 refused (no bytes left for its items)", u, i, b, empty, n)
	}
	if !errors.Is(d.Err(), errCorrupt) {
		t.Errorf("Err after a count past the end: got %v, want one wrapping the caller's sentinel", d.Err())
	}
}

// A corrupt length never allocates past the input, and the first error
// sticks.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0x03, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b, errCorrupt)
		n := d.Count()
		for range n {
			if v := d.Bytes(); len(v) > len(b) {
				t.Fatalf("a string of %d bytes from %d", len(v), len(b))
			}
		}
		if d.Err() != nil && d.Len() != 0 {
			t.Fatalf("after an error %d bytes left, want 0", d.Len())
		}
	})
}

// trickle is a stream that gives at most n bytes a read, and a read of
// none, with no error, before each.
type trickle struct {
	b     []byte
	n     int
	empty bool
}

func (s *trickle) Read(p []byte) (int, error) {
	if s.empty = !s.empty; s.empty {
		return 0, nil
	}
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), s.n)], s.b)
	s.b = s.b[k:]
	return k, nil
}

// TestReader_roundTrip reads what an Encoder wrote from a stream that
// gives a few bytes at a time, a string longer than the Reader's buffer
// among them: the values come back, Sum is the CRC of the bytes read,
// and AtEnd holds only after the last.
func TestReader_roundTrip(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	long := bytes.Repeat([]byte("0123456789abcdef"), readChunk/16*2+3)
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	e.Raw([]byte("magic"))
	e.Uint(300)
	e.Int(-7)
	e.Bytes([]byte("key"))
	e.Bytes(nil)
	e.Bytes(long)
	e.Uint(2)
	body := len(buf.Bytes())
	e.Raw([]byte("tail"))
	for _, n := range []int{1, 7, readChunk + 1} {
		d := NewReader(&trickle{b: buf.Bytes(), n: n}, errCorrupt, tab)
		magic := make([]byte, 5)
		d.Full(magic)
		if u, i, b, empty, l, c := d.Uint(), d.Int(), d.Bytes(), d.Bytes(), d.Bytes(), d.Count(); string(magic) != "magic" || u != 300 || i != -7 || string(b) != "key" || empty != nil || !bytes.Equal(l, long) || c != 2 || d.Err() != nil {
			t.Fatalf("%d a read: got %q %d %d %q %v, %d bytes, %d, %v; want magic 300 -7 key nil, the long string, 2", n, magic, u, i, b, empty, len(l), c, d.Err())
		}
		if got, want := d.Sum(), crc32.Checksum(buf.Bytes()[:body], tab); got != want {
			t.Errorf("%d a read: Sum %#x, want %#x, the CRC of the bytes read", n, got, want)
		}
		if d.AtEnd() {
			t.Errorf("%d a read: AtEnd with 4 bytes left", n)
		}
		tail := make([]byte, 4)
		if d.Full(tail); string(tail) != "tail" || !d.AtEnd() || d.Err() != nil {
			t.Errorf("%d a read: tail %q, AtEnd %v, %v; want tail, at the end, no error", n, tail, d.AtEnd(), d.Err())
		}
	}
}

// TestReader_corruptLengths checks a length or a count far past the end
// of a short stream fails it as truncated, having allocated about the
// stream's size rather than what the length claims, and that the first
// error sticks.
func TestReader_corruptLengths(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	stream := append(binary.AppendUvarint(nil, 1<<40), bytes.Repeat([]byte("x"), 1000)...)
	d := NewReader(bytes.NewReader(stream), errCorrupt, tab)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if b := d.Bytes(); b != nil || !errors.Is(d.Err(), errCorrupt) {
		t.Fatalf("a string of 1 TiB in %d bytes: got %d bytes, %v; want none and an error wrapping the sentinel", len(stream), len(b), d.Err())
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*readChunk {
		t.Errorf("a string of 1 TiB in %d bytes allocated %d bytes, want at most %d", len(stream), got, 2*readChunk)
	}
	if v := d.Uint(); v != 0 || !errors.Is(d.Err(), errCorrupt) {
		t.Errorf("a read after the error: %d, %v; want 0 and the first error", v, d.Err())
	}
	big := NewReader(bytes.NewReader(binary.AppendUvarint(nil, 1<<40)), errCorrupt, tab)
	if n := big.Count(); n != 0 || !errors.Is(big.Err(), errCorrupt) {
		t.Errorf("a count of 2^40: got %d, %v; want 0 and an error", n, big.Err())
	}
	empty := NewReader(bytes.NewReader(nil), errCorrupt, tab)
	if !empty.AtEnd() || empty.Err() != nil {
		t.Errorf("an empty stream: AtEnd %v, %v; want at the end, no error", empty.AtEnd(), empty.Err())
	}
}

// FuzzReader: whatever the stream, a Reader never returns a string
// longer than it, and once it fails every read gives zero values.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0x03, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	tab := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewReader(bytes.NewReader(b), errCorrupt, tab)
		n := d.Count()
		for i := 0; i < n && d.Err() == nil; i++ {
			if v := d.Bytes(); len(v) > len(b) {
				t.Fatalf("a string of %d bytes from %d", len(v), len(b))
			}
		}
		if d.Err() != nil && (d.Uint() != 0 || d.Bytes() != nil) {
			t.Fatal("a read after an error gave a value")
		}
	})
}
