package kv

import "testing"

func TestBufferPool_GetPut(t *testing.T) {
	var p bufferPool
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 33_000, 1 << 22, 1<<22 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		if c := cap(*b); n <= 1<<maxPoolShift && (c < n || c&(c-1) != 0 || c < 1<<minPoolShift) {
			t.Fatalf("Get(%d): capacity %d, want a power of two from %d on", n, c, 1<<minPoolShift)
		}
		p.Put(b)
	}
	// A buffer given back serves the next Get of its tier, uncleared. The
	// race detector makes sync.Pool drop a quarter of what it is given:
	// one of many tries gets it back.
	for range 100 {
		b := p.Get(1000)
		(*b)[0] = 42
		p.Put(b)
		c := p.Get(600)
		if cap(*c) != 1024 {
			t.Fatalf("Get(600): capacity %d, want 1024", cap(*c))
		}
		if (*c)[:1][0] == 42 {
			return
		}
	}
	t.Errorf("a buffer given back never served a Get of its tier")
}
