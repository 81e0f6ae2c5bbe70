package kv

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// bufferPool is the gRPC server's pool of message buffers: grpc's default
// pool clears every buffer it hands out, its whole capacity, although a
// received message fills its buffer to the length asked for before anyone
// reads it (and its values are copied out when it is decoded). For a txn of
// 128 puts that is 64 KiB cleared per call, which stood out in profiles
// of txn batches (docs/benchmarks.md). grpc keeps its own uncleared pool internal, hence
// this one: buffers of power-of-two capacities from 256 B to 4 MiB, one
// sync.Pool each; larger ones are allocated and dropped.
type bufferPool struct {
	tiers [maxPoolShift - minPoolShift + 1]sync.Pool
}

const minPoolShift, maxPoolShift = 8, 22

var _ mem.BufferPool = (*bufferPool)(nil)

// tier returns the index of the tier whose buffers hold n bytes, and
// whether there is one.
func tier(n int) (int, bool) {
	shift := minPoolShift
	if n > 1<<minPoolShift {
		shift = bits.Len(uint(n - 1))
	}
	return shift - minPoolShift, shift <= maxPoolShift
}

// Get returns a buffer of length n, with whatever bytes it held before.
func (p *bufferPool) Get(n int) *[]byte {
	i, ok := tier(n)
	if !ok {
		b := make([]byte, n)
		return &b
	}
	if b, _ := p.tiers[i].Get().(*[]byte); b != nil {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(i+minPoolShift))
	return &b
}

// Put takes a buffer back if its capacity is one of the tiers'.
func (p *bufferPool) Put(b *[]byte) {
	c := cap(*b)
	i, ok := tier(c)
	if !ok || c != 1<<(i+minPoolShift) {
		return
	}
	p.tiers[i].Put(b)
}
