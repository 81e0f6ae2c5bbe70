package dispatch

import (
	"math/rand/v2"
	"testing"
)

// checkIDs fails t unless x keeps its invariants and holds exactly want.
func checkIDs(t *testing.T, x *idIndex, want map[MsgID]*message) {
	t.Helper()
	if len(x.slots) != len(x.tags) || len(x.slots)&(len(x.slots)-1) != 0 {
		t.Fatalf("%d slots and %d tags, want the same power of two", len(x.slots), len(x.tags))
	}
	n, used := 0, 0
	for i, m := range x.slots {
		switch tag := x.tags[i]; {
		case tag >= tagFull:
			n++
			used++
			if m == nil || tag != tagOf(hashID(m.id)) {
				t.Fatalf("slot %d: tag %#x for %v", i, tag, m)
			}
		case tag == tagDeleted:
			used++
			fallthrough
		default:
			if m != nil {
				t.Fatalf("slot %d: tag %#x holds a message", i, tag)
			}
		}
	}
	if n != x.n || used != x.used || n != len(want) {
		t.Fatalf("n %d used %d counted, index says %d and %d, want n %d", n, used, x.n, x.used, len(want))
	}
	if used*8 > len(x.slots)*7 {
		t.Fatalf("%d of %d slots used, want at most 7/8", used, len(x.slots))
	}
	for id := range want {
		if !x.has(id) {
			t.Fatalf("has(%v): got false, want true", id)
		}
	}
}

// TestIDIndex_random checks the index against a map through random adds,
// removals and lookups of ids from a few origins.
func TestIDIndex_random(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var x idIndex
	want := make(map[MsgID]*message)
	var order []*message // added, oldest first, some removed
	counters := map[uint64]uint64{7: 1 << 60, 9: 5, 1<<63 + 1: 0}
	origins := []uint64{7, 9, 1<<63 + 1}
	for i := range 50000 {
		switch p := r.IntN(100); {
		case p < 50 || len(want) == 0:
			o := origins[r.IntN(len(origins))]
			counters[o]++
			id := MsgID{Origin: o, N: counters[o]}
			if x.has(id) {
				t.Fatalf("has(%v) before it was added", id)
			}
			m := &message{id: id}
			x.add(m)
			want[id] = m
			order = append(order, m)
		case p < 85: // the oldest, as a queue mostly acknowledges
			for len(order) > 0 && want[order[0].id] != order[0] {
				order = order[1:]
			}
			if len(order) > 0 {
				x.remove(order[0])
				delete(want, order[0].id)
			}
		case p < 95:
			for id, m := range want {
				x.remove(m)
				delete(want, id)
				break
			}
		default:
			if id := (MsgID{Origin: 8, N: r.Uint64()}); x.has(id) {
				t.Fatalf("has(%v) of an id never added", id)
			}
		}
		if i%101 == 0 {
			checkIDs(t, &x, want)
		}
	}
	checkIDs(t, &x, want)
	x.remove(&message{id: MsgID{Origin: 7, N: 1}}) // not there: no change
	checkIDs(t, &x, want)
	for id, m := range want {
		x.remove(m)
		delete(want, id)
	}
	checkIDs(t, &x, want)
	if len(x.slots) > idIndexMinSlots {
		t.Errorf("empty index keeps %d slots, want at most %d", len(x.slots), idIndexMinSlots)
	}
}

// TestIDIndex_removeIsByMessage checks that removing a message leaves
// another message with the same id alone: the index matches by message.
func TestIDIndex_removeIsByMessage(t *testing.T) {
	var x idIndex
	a := &message{id: MsgID{Origin: 1, N: 1}}
	x.add(a)
	x.remove(&message{id: a.id})
	if !x.has(a.id) {
		t.Fatalf("has(%v) after removing another message with its id: got false, want true", a.id)
	}
	x.remove(a)
	if x.has(a.id) {
		t.Fatalf("has(%v) after removing it: got true, want false", a.id)
	}
}
