package dispatch

import (
	"iter"
	"slices"
)

// msgStore holds a queue's messages by number (seq). A dispatcher numbers
// messages in arrival order and handed-over ones keep their numbers, so the
// numbers held are mostly one dense run: the store keeps that run as a
// deque of slots, one pointer per number from the oldest held to the
// newest, and the messages that do not fit it as strays, in a map: numbers
// below the run or far beyond it (another epoch's, handed over), and a
// message left at the front of the run long after the ones behind it were
// acknowledged.
//
// Invariants:
//   - a number is held at most once: in its slot of the run or in strays
//     (a stray's number may lie in a hole of the run, which grew past it:
//     get looks in strays after an empty slot);
//   - the run is empty or its first and last slots hold messages;
//   - the run's empty slots (holes) are at most its messages plus
//     storeSlack, so it costs at most about two slots per message;
//   - order holds at most twice the strays plus storeSlack numbers;
//   - buf[:head] are nil and buf[head:] is the run, numbered from base.
//
// The zero value is an empty store. Not safe for concurrent use: the
// queue's mutex guards it.
type msgStore struct {
	buf  []*message
	head int
	base uint64 // number of buf[head]
	live int    // messages in the run

	strays map[uint64]*message // nil when none
	// order holds the strays' numbers in ascending order, and possibly
	// numbers no longer strays, unless unsorted is set.
	order    []uint64
	unsorted bool
}

// storeSlack is how many holes the run may have beyond one per message.
const storeSlack = 64

// storeMinCap is the run's least capacity worth shrinking to.
const storeMinCap = 64

func (s *msgStore) len() int { return s.live + len(s.strays) }

// slot returns the index in buf of seq's slot, if seq is in the run.
func (s *msgStore) slot(seq uint64) (int, bool) {
	if seq < s.base || seq-s.base >= uint64(len(s.buf)-s.head) {
		return 0, false
	}
	return s.head + int(seq-s.base), true
}

// get returns message seq, nil when it is not held.
func (s *msgStore) get(seq uint64) *message {
	if i, ok := s.slot(seq); ok && s.buf[i] != nil {
		return s.buf[i]
	}
	return s.strays[seq]
}

// put adds m as message seq, which must not be held.
func (s *msgStore) put(seq uint64, m *message) {
	n := len(s.buf) - s.head
	if n == 0 { // a new run
		if cap(s.buf) == 0 {
			s.buf = make([]*message, 0, 16)
		}
		s.buf, s.head, s.base = append(s.buf[:0], m), 0, seq
		s.live++
		return
	}
	if i, ok := s.slot(seq); ok {
		s.buf[i] = m
		s.live++
		return
	}
	// Past the end, when the holes it leaves keep the run within bounds.
	allowed := s.live + 1 + storeSlack - (n - s.live) // holes it may leave
	if end := s.base + uint64(n); seq >= end && allowed >= 0 && seq-end <= uint64(allowed) {
		gap := int(seq - end)
		s.room(gap + 1)
		s.buf = append(s.buf, make([]*message, gap)...)
		s.buf = append(s.buf, m)
		s.live++
		return
	}
	if end := s.base + uint64(n); seq >= end && seq>>32 > (end-1)>>32 && s.live <= storeSlack {
		// A later epoch's number (epoch e numbers from (e-1)<<32 + 1)
		// past a run of few messages left of an earlier one: those few
		// become strays and the new numbers a new run, rather than every
		// new message a stray.
		for i := s.head; i < len(s.buf); i++ {
			if old := s.buf[i]; old != nil {
				s.addStray(s.base+uint64(i-s.head), old)
			}
		}
		clear(s.buf)
		s.buf, s.head, s.base, s.live = append(s.buf[:0], m), 0, seq, 1
		return
	}
	s.addStray(seq, m)
}

// room makes room for n more slots at the end of the run: the run slides
// to the start of buf when that frees an eighth of it, else it moves to a
// larger buf.
func (s *msgStore) room(n int) {
	if len(s.buf)+n <= cap(s.buf) {
		return
	}
	run := len(s.buf) - s.head
	if c := cap(s.buf); run+n <= c-c/8 {
		copy(s.buf, s.buf[s.head:])
		clear(s.buf[run:])
		s.buf, s.head = s.buf[:run], 0
		return
	}
	s.resize(run + n + (run+n)/4 + 16)
}

// resize moves the run to a buf of capacity c.
func (s *msgStore) resize(c int) {
	nb := make([]*message, len(s.buf)-s.head, c)
	copy(nb, s.buf[s.head:])
	s.buf, s.head = nb, 0
}

func (s *msgStore) addStray(seq uint64, m *message) {
	if s.strays == nil {
		s.strays = make(map[uint64]*message)
	}
	s.strays[seq] = m
	if !s.unsorted && (len(s.order) == 0 || seq > s.order[len(s.order)-1]) {
		s.order = append(s.order, seq) // handed-over messages come in order
	} else {
		s.unsorted = true
	}
}

// remove drops message seq, if held.
func (s *msgStore) remove(seq uint64) {
	if i, ok := s.slot(seq); ok && s.buf[i] != nil {
		s.buf[i] = nil
		s.live--
		s.trim()
		return
	}
	if _, ok := s.strays[seq]; ok {
		delete(s.strays, seq)
		switch {
		case len(s.strays) == 0:
			s.strays, s.order, s.unsorted = nil, nil, false
		case len(s.order) > 2*len(s.strays)+storeSlack:
			// Mostly numbers gone: drop them, strayOrder sorts the rest
			// when it is next asked (addStray appends nothing meanwhile).
			s.order, s.unsorted = nil, true
		}
	}
}

// trim restores the run's invariants after a removal: it cuts the holes
// at both ends, moves a message pinning too many holes behind it to the
// strays, and gives back a buf mostly unused.
func (s *msgStore) trim() {
	for {
		for s.head < len(s.buf) && s.buf[s.head] == nil {
			s.head++
			s.base++
		}
		for len(s.buf) > s.head && s.buf[len(s.buf)-1] == nil {
			s.buf = s.buf[:len(s.buf)-1]
		}
		if len(s.buf)-s.head-s.live <= s.live+storeSlack {
			break
		}
		s.addStray(s.base, s.buf[s.head])
		s.buf[s.head] = nil
		s.live--
	}
	run := len(s.buf) - s.head
	switch {
	case run == 0 && cap(s.buf) > storeMinCap:
		s.buf, s.head = nil, 0
	case run == 0:
		s.buf, s.head = s.buf[:0], 0
	case cap(s.buf) > storeMinCap && run < cap(s.buf)/4:
		s.resize(max(2*run, storeMinCap))
	}
}

// all yields the messages in number order. The store must not change
// meanwhile.
func (s *msgStore) all() iter.Seq2[uint64, *message] {
	return func(yield func(uint64, *message) bool) {
		order := s.strayOrder()
		k := 0
		strays := func(below uint64, all bool) bool {
			for ; k < len(order) && (all || order[k] < below); k++ {
				if m := s.strays[order[k]]; m != nil && !yield(order[k], m) {
					return false
				}
			}
			return true
		}
		for i := s.head; i < len(s.buf); i++ {
			m := s.buf[i]
			if m == nil {
				continue
			}
			seq := s.base + uint64(i-s.head)
			if !strays(seq, false) || !yield(seq, m) {
				return
			}
		}
		strays(0, true)
	}
}

// strayOrder returns the strays' numbers in order, some possibly gone.
func (s *msgStore) strayOrder() []uint64 {
	if s.unsorted || len(s.order) > 2*len(s.strays)+storeSlack {
		s.order = s.order[:0]
		for seq := range s.strays {
			s.order = append(s.order, seq)
		}
		slices.Sort(s.order)
		s.unsorted = false
	}
	return s.order
}
