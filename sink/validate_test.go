package sink

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateRow(t *testing.T) {
	tests := []struct {
		v    string
		err  error  // nil: valid
		want string // part of the message
	}{
		{v: `{"id":1}`},
		{v: `{}`},
		{v: " \n{\"id\":1}\r\n\t"},
		{v: `{"id":18446744073709551615,"n":9007199254740993}`},
		{v: `{"id":1e400}`}, // JSON, though ClickHouse may refuse it
		{v: "{\"a\":\n[1,{\"b\":null}]}"},
		{v: `{"s":"\u00e9\ud83d\ude00"}`},
		{v: ``, err: ErrEmptyRow},
		{v: " \n\t", err: ErrEmptyRow},
		{v: `[1,2]`, err: ErrNotObject, want: "array"},
		{v: `[{"id":1}]`, err: ErrNotObject, want: "array"},
		{v: `"s"`, err: ErrNotObject, want: "string"},
		{v: `42`, err: ErrNotObject, want: "number"},
		{v: `-1`, err: ErrNotObject, want: "number"},
		{v: `true`, err: ErrNotObject, want: "boolean"},
		{v: `null`, err: ErrNotObject, want: "null"},
		{v: `id=1`, err: ErrNotObject, want: "not JSON"},
		{v: `nope`, err: ErrNotObject, want: "not JSON"},
		{v: `[1,`, err: ErrNotObject, want: "not JSON"},
		{v: `{"a":1}{"a":2}`, err: ErrNotObject, want: "second JSON object after the object, at byte 7"},
		{v: "{\"a\":1}\n{\"a\":2}", err: ErrNotObject, want: "second JSON object after the object, at byte 8"},
		{v: `{"a":1} x`, err: ErrNotObject, want: "trailing data after the object, at byte 8"},
		{v: `{"a":1}}`, err: ErrNotObject, want: "trailing data"},
		{v: `{"a":1`, err: ErrNotObject, want: "invalid JSON"},
		{v: `{"a":}`, err: ErrNotObject, want: "invalid JSON at byte"},
		{v: `{a:1}`, err: ErrNotObject, want: "invalid JSON at byte"},
		{v: `{"a":01}`, err: ErrNotObject, want: "invalid JSON"},
		{v: `{"a":NaN}`, err: ErrNotObject, want: "invalid JSON"},
		{v: "{\"s\":\"caf\xe9\"}", err: ErrInvalidUTF8, want: "invalid UTF-8 at byte 9"},
		{v: "{\"s\":\"\xff\"}", err: ErrInvalidUTF8, want: "at byte 6"},
		{v: "{\"s\":\"\xed\xa0\x80\"}", err: ErrInvalidUTF8, want: "at byte 6"}, // a surrogate's encoding
		{v: "{\"s\":\"\xc0\xaf\"}", err: ErrInvalidUTF8, want: "at byte 6"},     // overlong '/'
		{v: "{\"s\":\"\xe6\x97\"}", err: ErrInvalidUTF8, want: "at byte 6"},     // cut short
		{v: "{\"k\xfe\":1}", err: ErrInvalidUTF8, want: "at byte 3"},            // in a key
		{v: "{\"a\":1}\xff", err: ErrInvalidUTF8, want: "at byte 7"},            // after the object
		{v: "\xef\xbb\xbf{\"a\":1}", err: ErrNotObject, want: "not JSON"},       // a BOM is UTF-8, not JSON
		{v: "{\"s\":\"\u65e5\xe6\x97\xa5\"}"},
	}
	for _, tt := range tests {
		orig := []byte(tt.v)
		v := bytes.Clone(orig)
		err := ValidateRow(v)
		if !bytes.Equal(v, orig) {
			t.Errorf("ValidateRow(%q) changed its input to %q", tt.v, v)
		}
		switch {
		case tt.err == nil && err != nil:
			t.Errorf("ValidateRow(%q): got %v, want nil", tt.v, err)
		case tt.err != nil && !errors.Is(err, tt.err):
			t.Errorf("ValidateRow(%q): got %v, want %v", tt.v, err, tt.err)
		case tt.err != nil && !strings.Contains(err.Error(), tt.want):
			t.Errorf("ValidateRow(%q): got %q, want it to say %q", tt.v, err, tt.want)
		}
	}
}

func FuzzValidateRow(f *testing.F) {
	for _, s := range []string{`{"id":1}`, ``, `[1]`, `{"a":1}{"a":2}`, `{"a":1} x`, ` {} `, `{"n":9007199254740993}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		orig := bytes.Clone(v)
		err := ValidateRow(v)
		if !bytes.Equal(v, orig) {
			t.Fatalf("ValidateRow changed %q to %q", orig, v)
		}
		trimmed := bytes.TrimLeft(v, " \t\r\n")
		want := json.Valid(v) && utf8.Valid(v) && len(trimmed) > 0 && trimmed[0] == '{'
		if (err == nil) != want {
			t.Fatalf("ValidateRow(%q): got %v, want valid=%v", v, err, want)
		}
		if err != nil && !errors.Is(err, ErrEmptyRow) && !errors.Is(err, ErrNotObject) && !errors.Is(err, ErrInvalidUTF8) {
			t.Fatalf("ValidateRow(%q): %v wraps neither sentinel", v, err)
		}
	})
}

// FuzzValidObject checks the fast scanner against encoding/json: it must
// accept exactly the single JSON objects json.Valid accepts that are
// UTF-8.
func FuzzValidObject(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"x\u00e9\n"}`, `{"n":-0.5e+10}`, `{"a":01}`,
		`{"a":1,}`, `{"a" 1}`, `[1]`, `"s"`, `{"a":"\x01"}`, `{"a":tru}`, `{"a":1}{}`, `{"a":1.}`, `{"a":-}`,
		`{"a":"\u12"}`, `{"a":[}`, `{"a":{"b":[]}}`, "{\"a\":\"\xff\"}", `{"a":1e}`, `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		trimmed := bytes.TrimLeft(v, " \t\r\n")
		want := json.Valid(v) && utf8.Valid(v) && len(trimmed) > 0 && trimmed[0] == '{'
		if got := validObject(v); got != want {
			t.Fatalf("validObject(%q) = %v, encoding/json says %v", v, got, want)
		}
	})
}

func BenchmarkValidateRow(b *testing.B) {
	row := []byte(`{"id":123456789,"ts":"2026-11-30 10:00:00","user":"someone@example.com","tags":["a","b"],"v":0.25,"ok":true,"pad":"` + strings.Repeat("x", 150) + `"}`)
	b.SetBytes(int64(len(row)))
	for b.Loop() {
		if err := ValidateRow(row); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStringBytes checks the eight-byte test of stringEnd against the
// byte-by-byte one: every byte value at every position among plain
// bytes, and random words, whose first marked byte must be the first
// that stringEnd looks at.
func TestStringBytes(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf }
	first := func(w uint64) int { // the first special byte, 8 for none
		for k := range 8 {
			if special(byte(w >> (8 * k))) {
				return k
			}
		}
		return 8
	}
	marked := func(w uint64) int { return bits.TrailingZeros64(stringBytes(w)) >> 3 }
	for pos := range 8 {
		for c := range 256 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			w := binary.LittleEndian.Uint64(b)
			if got, want := marked(w), first(w); got != want {
				t.Fatalf("first byte stringBytes(%q) marks: got %d, want %d", b, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		w := rng.Uint64()
		if rng.IntN(2) == 0 {
			w &= 0x7f7f7f7f7f7f7f7f // ASCII, so the other tests matter
		}
		if got, want := marked(w), first(w); got != want {
			t.Fatalf("first byte stringBytes(%#x) marks: got %d, want %d", w, got, want)
		}
	}
}

// BenchmarkValidateRowPadded is chute-bench's row: an id and one string
// of printable padding, 256 bytes in all.
func BenchmarkValidateRowPadded(b *testing.B) {
	row := []byte(`{"id":1234567,"v":"` + strings.Repeat("abcdefghij", 24) + `abcdefghijklmnopqrstu"}`)
	b.SetBytes(int64(len(row)))
	for b.Loop() {
		if err := ValidateRow(row); err != nil {
			b.Fatal(err)
		}
	}
}
