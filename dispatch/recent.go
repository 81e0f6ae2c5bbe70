package dispatch

import mathbits "math/bits"

// recent is a map that remembers the last limit keys added, and at most
// twice as many: keys go into a current generation; when it holds limit
// keys it becomes the previous one, and the previous one is dropped whole.
// The queue uses it for acknowledged message ids and for acknowledgements
// that arrived before their message, one add per message. Dropping a
// generation whole, rather than deleting the oldest key at each add, keeps
// the maps free of deleted slots: a Go map that takes one insert and one
// delete per message for long accumulates them, and its lookups then probe
// far (it stood out in profiles of txn batches: docs/benchmarks.md). Not safe for
// concurrent use; the queue's mutex guards it.
type recent[K comparable, V any] struct {
	limit     int
	cur, prev map[K]V // prev is nil until cur first fills
}

func newRecent[K comparable, V any](limit int) *recent[K, V] {
	return &recent[K, V]{limit: limit, cur: make(map[K]V)}
}

// add remembers k with v.
func (r *recent[K, V]) add(k K, v V) {
	if len(r.cur) >= r.limit {
		r.prev, r.cur = r.cur, make(map[K]V, r.limit)
	}
	r.cur[k] = v
}

func (r *recent[K, V]) get(k K) (V, bool) {
	if v, ok := r.cur[k]; ok {
		return v, true
	}
	v, ok := r.prev[k]
	return v, ok
}

// forget drops k before its turn.
func (r *recent[K, V]) forget(k K) {
	delete(r.cur, k)
	delete(r.prev, k)
}

// doneSet is the set of the ids a queue acknowledged recently: the last
// limit ids added, and at most twice as many, in generations as recent
// keeps them. A member numbers its ids from one counter, so the ids a
// queue acknowledges are mostly runs of consecutive numbers per origin:
// a generation keeps them as bitmaps of 64 numbers, found by origin and
// number/64, and the bitmap of the last add is found without a lookup.
// A batch of consecutive ids then costs a map lookup per 64 of them; ids
// spread out (many queues sharing a member's counter) cost one each, as
// a map of ids would. Membership is exact: an id is in the set only if
// it was added, and stays until its generation is dropped. Not safe for
// concurrent use; the queue's mutex guards it.
type doneSet struct {
	limit     int
	cur, prev doneGen
}

// doneGen is one generation of a doneSet.
type doneGen struct {
	at   map[doneBlock]int32 // index in bits
	bits []uint64            // bit N%64 of bits[at[{origin, N/64}]]
	n    int                 // ids in it
	// last is the block of the last add, at bits[lastAt], when bits is
	// not empty.
	last   doneBlock
	lastAt int32
}

// doneBlock names 64 consecutive ids of one origin.
type doneBlock struct{ origin, hi uint64 }

func newDoneSet(limit int) *doneSet { return &doneSet{limit: limit} }

// add remembers id.
func (s *doneSet) add(id MsgID) {
	if s.cur.n >= s.limit {
		s.prev, s.cur = s.cur, doneGen{}
	}
	g := &s.cur
	b := doneBlock{id.Origin, id.N >> 6}
	if len(g.bits) == 0 || g.last != b {
		i, ok := g.at[b]
		if !ok {
			if g.at == nil {
				g.at = make(map[doneBlock]int32)
			}
			i = int32(len(g.bits))
			g.bits = append(g.bits, 0)
			g.at[b] = i
		}
		g.last, g.lastAt = b, i
	}
	if w, bit := &g.bits[g.lastAt], uint64(1)<<(id.N&63); *w&bit == 0 {
		*w |= bit
		g.n++
	}
}

// has reports whether id was added and its generation is kept.
func (s *doneSet) has(id MsgID) bool {
	return s.cur.has(id) || s.prev.has(id)
}

func (g *doneGen) has(id MsgID) bool {
	i, ok := g.at[doneBlock{id.Origin, id.N >> 6}]
	return ok && g.bits[i]&(1<<(id.N&63)) != 0
}

// blocks appends the ids in s to dst as triples: origin, number/64 and
// the bitmap of the 64 numbers from number/64*64, the older generation
// first (peerpb.ForwardKind_DONE).
func (s *doneSet) blocks(dst []uint64) []uint64 {
	for _, g := range []*doneGen{&s.prev, &s.cur} {
		for b, i := range g.at {
			if bits := g.bits[i]; bits != 0 {
				dst = append(dst, b.origin, b.hi, bits)
			}
		}
	}
	return dst
}

// addBlock adds the ids of one triple blocks made: origin, number/64
// (below 2^58) and the bitmap of 64 numbers.
func (s *doneSet) addBlock(origin, hi, bits uint64) {
	for bits != 0 {
		i := uint64(mathbits.TrailingZeros64(bits))
		bits &= bits - 1
		s.add(MsgID{Origin: origin, N: hi<<6 | i})
	}
}
