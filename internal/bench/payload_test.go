package bench

import (
	"strings"
	"testing"
)

func TestPayload_keyFor_distinctAndSized(t *testing.T) {
	p := newPayload("bench/ab12/", 16, 8, 1)
	seen := make(map[string]bool)
	for n := range int64(5000) {
		k := p.keyFor(n)
		if !strings.HasPrefix(k, "bench/ab12/") {
			t.Fatalf("key %q: want prefix bench/ab12/", k)
		}
		if len(k) < 16 {
			t.Fatalf("key %q: got length %d, want at least 16", k, len(k))
		}
		if seen[k] {
			t.Fatalf("key %q repeated at n=%d", k, n)
		}
		seen[k] = true
	}
}

func TestPayload_keyFor_longerThanKeySize(t *testing.T) {
	p := newPayload("a-long-prefix/", 4, 0, 1)
	if got, want := p.keyFor(35), "a-long-prefix/z"; got != want {
		t.Errorf("keyFor(35): got %q, want %q", got, want)
	}
}

func TestPayload_valueFor_sizedAndPrintable(t *testing.T) {
	for _, size := range []int{0, 1, 256, 4096} {
		p := newPayload("", 1, size, 7)
		for n := range int64(130) {
			v := p.valueFor(n)
			if len(v) != size {
				t.Fatalf("size %d: got length %d", size, len(v))
			}
			if strings.Trim(v, alphabet) != "" {
				t.Fatalf("size %d: value %q has bytes outside the alphabet", size, v)
			}
		}
	}
}

func TestNewRunID(t *testing.T) {
	id := newRunID()
	if len(id) != 4 || strings.Trim(id, runIDAlphabet) != "" {
		t.Errorf("newRunID: got %q, want 4 characters of %q", id, runIDAlphabet)
	}
}
