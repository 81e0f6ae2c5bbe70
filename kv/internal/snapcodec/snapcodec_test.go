package snapcodec

import (
	"bytes"
	"errors"
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
