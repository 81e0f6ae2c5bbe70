package dispatch

// idIndex is the set of ids a queue holds, so that a message already
// queued is not queued twice (copies broadcast while the dispatcher was
// unreachable, handovers, forwards sent again after a stream broke, backup
// frames). It is an open-addressing hash table with linear probing of the
// messages themselves, plus one tag byte per slot (seven bits of the id's
// hash) so that a probe reads a message only when its tag matches: about
// 9 bytes a slot, between 3/8 and 7/8 of them used, where a Go map from
// MsgID costs about 35 bytes an id.
//
// Invariants: slots and tags have the same power-of-two length (or are
// both nil); a message is in the probe sequence of its id's hash, with no
// empty slot between its home slot and it; n counts the messages, used
// the slots not empty (messages and deleted ones), used <= 7/8 of the
// slots. The zero value is an empty index. Not safe for concurrent use:
// the queue's mutex guards it.
type idIndex struct {
	slots []*message
	tags  []uint8
	n     int
	used  int
}

const (
	tagEmpty   uint8 = 0
	tagDeleted uint8 = 1
	tagFull    uint8 = 0x80 // | the hash's top seven bits

	idIndexMinSlots = 16
)

// hashID mixes an id (splitmix64's finalizer over both words).
func hashID(id MsgID) uint64 {
	h := id.Origin*0x9e3779b97f4a7c15 ^ id.N
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

func tagOf(h uint64) uint8 { return tagFull | uint8(h>>57) }

// has reports whether a message with id is in the index.
func (x *idIndex) has(id MsgID) bool {
	if x.n == 0 {
		return false
	}
	h := hashID(id)
	tag, mask := tagOf(h), len(x.slots)-1
	for i := int(h) & mask; x.tags[i] != tagEmpty; i = (i + 1) & mask {
		if x.tags[i] == tag && x.slots[i].id == id {
			return true
		}
	}
	return false
}

// add puts m in the index; no message with its id may be there.
func (x *idIndex) add(m *message) {
	if (x.used+1)*8 > len(x.slots)*7 {
		x.rehash(x.n + 1)
	}
	h := hashID(m.id)
	mask := len(x.slots) - 1
	i := int(h) & mask
	for x.tags[i] >= tagFull {
		i = (i + 1) & mask
	}
	if x.tags[i] == tagEmpty {
		x.used++
	}
	x.slots[i], x.tags[i] = m, tagOf(h)
	x.n++
}

// remove takes m out of the index, if it is there.
func (x *idIndex) remove(m *message) {
	if x.n == 0 {
		return
	}
	mask := len(x.slots) - 1
	i := int(hashID(m.id)) & mask
	for x.slots[i] != m {
		if x.tags[i] == tagEmpty {
			return
		}
		i = (i + 1) & mask
	}
	x.slots[i], x.tags[i] = nil, tagDeleted
	x.n--
	// A deleted slot before an empty one ends no probe: empty it, and the
	// deleted ones before it.
	for x.tags[(i+1)&mask] == tagEmpty && x.tags[i] == tagDeleted {
		x.tags[i] = tagEmpty
		x.used--
		i = (i - 1) & mask
	}
	if len(x.slots) > idIndexMinSlots && x.n*8 < len(x.slots) {
		x.rehash(x.n)
	}
}

// rehash moves the messages to a table sized for n of them, at most half
// full, without deleted slots.
func (x *idIndex) rehash(n int) {
	size := idIndexMinSlots
	for size < 2*n {
		size *= 2
	}
	old := x.slots
	x.slots, x.tags, x.n, x.used = make([]*message, size), make([]uint8, size), 0, 0
	for _, m := range old {
		if m != nil {
			x.add(m)
		}
	}
}
