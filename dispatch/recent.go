package dispatch

// recent is a map that remembers at most limit keys: adding one more
// forgets the oldest added. The queue uses it for acknowledged message ids
// and for acknowledgements that arrived before their message. Not safe for
// concurrent use; the queue's mutex guards it.
type recent[K comparable, V any] struct {
	limit int
	m     map[K]V
	ring  []K
	next  int
}

func newRecent[K comparable, V any](limit int) *recent[K, V] {
	return &recent[K, V]{limit: limit, m: make(map[K]V)}
}

// add remembers k with v, forgetting the oldest key beyond the limit.
func (r *recent[K, V]) add(k K, v V) {
	if len(r.ring) < r.limit {
		r.ring = append(r.ring, k)
	} else {
		delete(r.m, r.ring[r.next])
		r.ring[r.next] = k
		r.next = (r.next + 1) % r.limit
	}
	r.m[k] = v
}

func (r *recent[K, V]) get(k K) (V, bool) {
	v, ok := r.m[k]
	return v, ok
}

// forget drops k before its turn.
func (r *recent[K, V]) forget(k K) { delete(r.m, k) }
