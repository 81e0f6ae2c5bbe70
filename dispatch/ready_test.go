package dispatch

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestReadySeqs: numbers come out least first whatever the order they
// went in, against a sorted reference, with pops between the pushes; and
// numbers pushed in ascending order never reach the heap.
func TestReadySeqs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var r readySeqs
		var want []uint64
		next := uint64(1)
		for range 3000 {
			switch k := rng.IntN(10); {
			case k < 6: // a new message, numbered in arrival order
				r.push(next)
				want = append(want, next)
				next++
			case k < 7 && next > 1: // one back for delivery again
				seq := 1 + rng.Uint64N(next-1)
				r.push(seq)
				want = append(want, seq)
			case r.len() > 0:
				slices.Sort(want)
				if got := r.pop(); got != want[0] {
					t.Fatalf("round %d: pop got %d, want %d", round, got, want[0])
				}
				want = want[1:]
			}
			if r.len() != len(want) {
				t.Fatalf("round %d: len %d, want %d", round, r.len(), len(want))
			}
		}
		slices.Sort(want)
		for i, w := range want {
			if got := r.pop(); got != w {
				t.Fatalf("round %d: draining, pop %d got %d, want %d", round, i, got, w)
			}
		}
		if r.len() != 0 {
			t.Fatalf("round %d: %d left", round, r.len())
		}
	}

	var r readySeqs
	for seq := range uint64(5000) {
		r.push(seq + 1)
		if seq%3 == 0 {
			r.pop()
		}
	}
	if len(r.heap) != 0 {
		t.Errorf("ascending pushes: %d numbers in the heap, want none", len(r.heap))
	}
	for n := uint64(1); r.len() > 0; n++ {
		if got := r.pop(); got < n {
			t.Fatalf("ascending pushes: pop got %d after %d", got, n)
		}
	}
	if cap(r.run) > 1024 {
		t.Errorf("emptied: run keeps room for %d numbers", cap(r.run))
	}
}

// BenchmarkReadySeqs: a backlog of 30000 numbers, each op one push of
// the next and one pop, as a busy dispatcher's queue does.
func BenchmarkReadySeqs(b *testing.B) {
	var r readySeqs
	seq := uint64(0)
	for range 30000 {
		seq++
		r.push(seq)
	}
	for b.Loop() {
		seq++
		r.push(seq)
		r.pop()
	}
}
