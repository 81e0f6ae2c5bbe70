package dispatch

import (
	"math/rand/v2"
	"testing"
)

func TestRecent_remembersTheLastLimitKeys(t *testing.T) {
	const limit = 100
	r := newRecent[int, int](limit)
	for k := range 1000 {
		r.add(k, -k)
		// The last limit keys are always there, with their values.
		for back := 0; back < limit && back <= k; back++ {
			if v, ok := r.get(k - back); !ok || v != back-k {
				t.Fatalf("after adding %d: get(%d) = %d, %v; want %d, true", k, k-back, v, ok, back-k)
			}
		}
		// At most twice the limit.
		if n := len(r.cur) + len(r.prev); n > 2*limit {
			t.Fatalf("after adding %d: %d keys kept, want at most %d", k, n, 2*limit)
		}
	}
	if _, ok := r.get(1000 - 2*limit - 1); ok {
		t.Errorf("a key added more than twice the limit ago is still there")
	}
	r.forget(999)
	r.forget(900)
	if _, ok := r.get(999); ok {
		t.Errorf("forget(999): still there")
	}
	if _, ok := r.get(900); ok {
		t.Errorf("forget(900): still there")
	}
}

// TestDoneSet_has_exact adds ids in runs, spread out, out of order and
// from several origins, and checks has against the ids added: every one
// of the last limit is there, an id never added never is, and at most
// twice the limit are kept.
func TestDoneSet_has_exact(t *testing.T) {
	const limit = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	s := newDoneSet(limit)
	var added []MsgID
	isAdded := make(map[MsgID]bool)
	next := map[uint64]uint64{1: 0, 2: 1 << 40, 3: 63}
	for round := range 400 {
		origin := uint64(1 + rng.IntN(3))
		var ids []MsgID
		switch round % 4 {
		case 0: // a run of consecutive numbers
			for range 1 + rng.IntN(200) {
				next[origin]++
				ids = append(ids, MsgID{origin, next[origin]})
			}
		case 1: // every third number, as when queues share the counter
			for range 1 + rng.IntN(50) {
				next[origin] += 3
				ids = append(ids, MsgID{origin, next[origin]})
			}
		case 2: // a run acknowledged backwards
			for range 1 + rng.IntN(100) {
				next[origin]++
				ids = append([]MsgID{{origin, next[origin]}}, ids...)
			}
		case 3: // skip a gap, never added
			next[origin] += uint64(rng.IntN(100))
		}
		for _, id := range ids {
			s.add(id)
			if !isAdded[id] {
				added = append(added, id)
				isAdded[id] = true
			}
		}
		for back := 0; back < limit && back < len(added); back++ {
			if id := added[len(added)-1-back]; !s.has(id) {
				t.Fatalf("round %d: has(%v), added %d ids ago: got false, want true", round, id, back)
			}
		}
		for range 200 {
			id := MsgID{uint64(rng.IntN(5)), uint64(rng.Int64N(int64(next[1] + 200)))}
			if rng.IntN(2) == 0 {
				id.N = next[id.Origin] - uint64(rng.IntN(300))
			}
			if s.has(id) && !isAdded[id] {
				t.Fatalf("round %d: has(%v): got true for an id never added", round, id)
			}
		}
		if n := s.cur.n + s.prev.n; n > 2*limit {
			t.Fatalf("round %d: %d ids kept, want at most %d", round, n, 2*limit)
		}
	}
	if s.has(added[0]) {
		t.Errorf("has(%v), the first of %d ids: got true, want it dropped", added[0], len(added))
	}
}

// TestDoneSet_add_consecutiveAreBitmaps checks that a run of consecutive
// ids costs a bitmap word per 64 of them, not an entry each.
func TestDoneSet_add_consecutiveAreBitmaps(t *testing.T) {
	s := newDoneSet(1 << 16)
	for n := range uint64(6400) {
		s.add(MsgID{7, 1<<30 + n})
	}
	if got, want := len(s.cur.bits), 100; got != want {
		t.Errorf("bitmap words for 6400 consecutive ids: got %d, want %d", got, want)
	}
	if got, want := s.cur.n, 6400; got != want {
		t.Errorf("ids counted: got %d, want %d", got, want)
	}
}

// TestDoneSet_blocks_roundTrip: the triples blocks makes, added to
// another set, give it every id of the first (of both generations) and
// no other.
func TestDoneSet_blocks_roundTrip(t *testing.T) {
	s := newDoneSet(100)
	var in []MsgID
	for n := range uint64(150) { // a run: two generations
		in = append(in, MsgID{Origin: 7, N: 1<<40 + n})
	}
	in = append(in, MsgID{Origin: 9, N: 0}, MsgID{Origin: 9, N: 63}, MsgID{Origin: 1<<64 - 1, N: 1<<64 - 1})
	for _, id := range in {
		s.add(id)
	}
	ids := s.blocks(nil)
	if len(ids)%3 != 0 || len(ids)/3 > 8 {
		t.Fatalf("%d numbers for %d ids: want triples, a few blocks", len(ids), len(in))
	}
	got := newDoneSet(1000)
	for i := 0; i < len(ids); i += 3 {
		got.addBlock(ids[i], ids[i+1], ids[i+2])
	}
	for _, id := range in {
		if !got.has(id) {
			t.Fatalf("%v lost", id)
		}
	}
	for _, id := range []MsgID{{Origin: 7, N: 1<<40 - 1}, {Origin: 7, N: 1<<40 + 150}, {Origin: 9, N: 1}, {Origin: 8, N: 0}} {
		if got.has(id) {
			t.Fatalf("%v added, never in the first set", id)
		}
	}
}
