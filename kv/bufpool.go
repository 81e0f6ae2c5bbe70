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
// this one: buffers of power-of-two capacities from 256 B to 4 MiB;
// larger ones are allocated and dropped.
//
// Below 64 KiB each capacity has a sync.Pool. From 64 KiB up (a txn's
// copy, a member's forward frames) buffers are taken a few times a
// second per capacity, and a sync.Pool lost about half of them: a buffer
// given back on one P sits in its private slot, which a Get on another P
// cannot reach, and the collector empties the pool every other cycle. A
// forwarding member made some 20 MB/s of frame buffers anew that way
// (three nodes, txn-128). Those capacities keep a short free list each
// instead, holding at most maxListBytes in all, under one mutex: they
// are taken thousands of times a second at most.
type bufferPool struct {
	tiers [minListShift - minPoolShift]sync.Pool

	mu    sync.Mutex
	lists [maxPoolShift - minListShift + 1][]*[]byte // guarded by mu: buffers given back, by capacity
	kept  int                                        // guarded by mu: bytes held by lists
}

const minPoolShift, minListShift, maxPoolShift = 8, 16, 22

// maxListBytes bounds the bytes of the buffers a pool's free lists keep:
// two of the largest.
const maxListBytes = 2 << maxPoolShift

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
	if b := p.take(i); b != nil {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(i+minPoolShift))
	return &b
}

// take returns a buffer of tier i given back earlier, or nil.
func (p *bufferPool) take(i int) *[]byte {
	if i < len(p.tiers) {
		b, _ := p.tiers[i].Get().(*[]byte)
		return b
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := &p.lists[i-len(p.tiers)]
	n := len(*l)
	if n == 0 {
		return nil
	}
	b := (*l)[n-1]
	(*l)[n-1] = nil
	*l = (*l)[:n-1]
	p.kept -= cap(*b)
	return b
}

// Put takes a buffer back if its capacity is one of the tiers'.
func (p *bufferPool) Put(b *[]byte) {
	c := cap(*b)
	i, ok := tier(c)
	if !ok || c != 1<<(i+minPoolShift) {
		return
	}
	if i < len(p.tiers) {
		p.tiers[i].Put(b)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept+c > maxListBytes {
		return // left to the collector
	}
	p.kept += c
	p.lists[i-len(p.tiers)] = append(p.lists[i-len(p.tiers)], b)
}
