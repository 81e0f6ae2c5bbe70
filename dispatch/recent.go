package dispatch

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
