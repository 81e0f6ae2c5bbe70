package sink

import (
	"bytes"
	"testing"
)

// TestPlainPrefix puts every byte value at every position of plain runs
// of up to 48 bytes (and at offsets into a larger array, for unaligned
// loads): plainPrefix must stop at the first byte a string does not
// take as it is, or where fewer than 16 bytes are left, and count no
// byte that is not plain.
func TestPlainPrefix(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	want := func(v []byte) int {
		k := 0
		for ; k+16 <= len(v); k += 16 {
			for j, c := range v[k : k+16] {
				if !plain(c) {
					return k + j
				}
			}
		}
		return k
	}
	buf := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789 ~!"), 3)
	for n := range 49 {
		for start := range 3 {
			v := buf[start : start+n]
			for pos := range n {
				for c := range 256 {
					old := v[pos]
					v[pos] = byte(c)
					got := plainPrefix(v)
					for _, b := range v[:got] {
						if !plain(b) {
							t.Fatalf("plainPrefix(%q) = %d: counts %q", v, got, b)
						}
					}
					if plainPrefixCounts && got != want(v) {
						t.Fatalf("plainPrefix(%q) = %d, want %d", v, got, want(v))
					}
					v[pos] = old
				}
			}
		}
	}
}
