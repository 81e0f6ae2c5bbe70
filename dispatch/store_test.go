package dispatch

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestMessage_size keeps a queued message in the allocator's 80-byte size
// class, so that a queued row costs at most its value plus 128 bytes
// (BenchmarkQueue_rowMemory measures the whole).
func TestMessage_size(t *testing.T) {
	if got := unsafe.Sizeof(message{}); got > 80 {
		t.Fatalf("message is %d bytes, want at most 80", got)
	}
}

// checkStore fails t unless s keeps its invariants and holds exactly want.
func checkStore(t *testing.T, s *msgStore, want map[uint64]*message) {
	t.Helper()
	for i := range s.head {
		if s.buf[i] != nil {
			t.Fatalf("slot %d before the run (head %d) holds a message", i, s.head)
		}
	}
	run, live := s.buf[s.head:], 0
	for _, m := range run {
		if m != nil {
			live++
		}
	}
	if live != s.live {
		t.Fatalf("run holds %d messages, live says %d", live, s.live)
	}
	if len(run) > 0 && (run[0] == nil || run[len(run)-1] == nil) {
		t.Fatalf("run of %d slots starts or ends with a hole", len(run))
	}
	if holes := len(run) - live; holes > live+storeSlack {
		t.Fatalf("run has %d holes for %d messages, want at most %d", holes, live, live+storeSlack)
	}
	for seq, m := range s.strays {
		if i, ok := s.slot(seq); ok && s.buf[i] != nil {
			t.Fatalf("seq %d is both in the run and a stray", seq)
		}
		if m == nil {
			t.Fatalf("stray %d is nil", seq)
		}
	}
	if max := 2*len(s.strays) + storeSlack; len(s.order) > max {
		t.Fatalf("order holds %d numbers for %d strays, want at most %d", len(s.order), len(s.strays), max)
	}
	if s.len() != len(want) {
		t.Fatalf("len: got %d, want %d", s.len(), len(want))
	}
	for seq, m := range want {
		if got := s.get(seq); got != m {
			t.Fatalf("get(%d): got %p, want %p", seq, got, m)
		}
	}
	var seqs []uint64
	for seq, m := range s.all() {
		if want[seq] != m {
			t.Fatalf("all yields %d -> %p, want %p", seq, m, want[seq])
		}
		seqs = append(seqs, seq)
	}
	if len(seqs) != len(want) || !slices.IsSorted(seqs) {
		t.Fatalf("all yields %d numbers (sorted: %v), want %d in order", len(seqs), slices.IsSorted(seqs), len(want))
	}
}

func TestMsgStore_cases(t *testing.T) {
	const epoch2 = 1<<32 + 1
	tests := []struct {
		name    string
		put     []uint64
		remove  []uint64
		strays  int // strays left, at most
		maxRun  int // slots of the run left, at most
		wantLen int
	}{
		{name: "dense", put: seqRange(1, 1000), remove: seqRange(1, 500), strays: 0, maxRun: 500, wantLen: 500},
		{name: "front pinned", put: seqRange(1, 1000), remove: seqRange(2, 1000), strays: 1, maxRun: 0, wantLen: 1},
		{name: "front pinned, tail live", put: seqRange(1, 1000), remove: seqRange(2, 900), strays: 1, maxRun: 100, wantLen: 101},
		{name: "every other acknowledged", put: seqRange(1, 1000), remove: evens(1, 1000), strays: 0, maxRun: 1000, wantLen: 500},
		{name: "two epochs", put: append(seqRange(epoch2, epoch2+99), seqRange(1, 100)...), strays: 100, maxRun: 100, wantLen: 200},
		{name: "handed over after new puts", put: append(seqRange(epoch2, epoch2+9), seqRange(500, 1499)...), remove: seqRange(500, 999), strays: 500, maxRun: 10, wantLen: 510},
		{name: "sparse handover", put: evens(1, 4000), strays: 2000, maxRun: 2 * (2000 + storeSlack), wantLen: 2000},
		{name: "run grows past a stray", put: slices.Concat(seqRange(1, 10), []uint64{100}, seqRange(11, 99), seqRange(101, 110)), remove: []uint64{100, 1}, strays: 0, maxRun: 109, wantLen: 108},
		{name: "all removed", put: seqRange(1, 100), remove: seqRange(1, 100), wantLen: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s msgStore
			want := make(map[uint64]*message)
			for _, seq := range tt.put {
				m := &message{id: MsgID{N: seq}}
				s.put(seq, m)
				want[seq] = m
			}
			checkStore(t, &s, want)
			for _, seq := range tt.remove {
				s.remove(seq)
				delete(want, seq)
				checkStore(t, &s, want)
			}
			if len(s.strays) > tt.strays {
				t.Errorf("strays: got %d, want at most %d", len(s.strays), tt.strays)
			}
			if run := len(s.buf) - s.head; run > tt.maxRun {
				t.Errorf("run: got %d slots, want at most %d", run, tt.maxRun)
			}
			if s.len() != tt.wantLen {
				t.Errorf("len: got %d, want %d", s.len(), tt.wantLen)
			}
		})
	}
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func evens(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		if s%2 == 0 {
			out = append(out, s)
		}
	}
	return out
}

// TestMsgStore_random checks the store against a map through random puts
// (mostly the next number, some handed over from below or another epoch)
// and removals (mostly the oldest, some anywhere).
func TestMsgStore_random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s msgStore
	want := make(map[uint64]*message)
	next := uint64(1000)
	for i := range 20000 {
		var seq uint64
		switch p := r.IntN(100); {
		case p < 45:
			seq, next = next, next+1
		case p < 50:
			seq = next - 1000 + r.Uint64N(1000) // handed over, kept its number
		case p < 52:
			seq = 1<<32 + r.Uint64N(50) // another epoch
		case p < 80:
			var oldest uint64
			for seq := range s.all() {
				oldest = seq
				break
			}
			s.remove(oldest)
			delete(want, oldest)
		default:
			seq := next - 1 - r.Uint64N(200)
			s.remove(seq)
			delete(want, seq)
		}
		if seq != 0 && want[seq] == nil {
			m := &message{id: MsgID{N: seq}}
			s.put(seq, m)
			want[seq] = m
		}
		if i%97 == 0 {
			checkStore(t, &s, want)
		}
	}
	checkStore(t, &s, want)
	for seq := range want {
		s.remove(seq)
		delete(want, seq)
	}
	checkStore(t, &s, want)
	if cap(s.buf) > storeMinCap || s.strays != nil {
		t.Errorf("empty store keeps %d slots and %d strays, want at most %d and none", cap(s.buf), len(s.strays), storeMinCap)
	}
}

// TestMsgStore_newEpochAfterAStuckMessage: one message of epoch 1 is never
// acknowledged while epoch 2's flow through a window of ten. The new
// numbers form a run of their own (not one stray each) and the strays'
// order does not keep a number per message that went.
func TestMsgStore_newEpochAfterAStuckMessage(t *testing.T) {
	var s msgStore
	want := make(map[uint64]*message)
	put := func(seq uint64) {
		m := &message{}
		s.put(seq, m)
		want[seq] = m
	}
	put(5) // epoch 1, stuck
	first := uint64(1)<<32 + 1
	for i := range uint64(100_000) {
		put(first + i)
		if i >= 10 {
			s.remove(first + i - 10)
			delete(want, first+i-10)
		}
		if i%10_000 == 0 {
			checkStore(t, &s, want)
		}
	}
	checkStore(t, &s, want)
	if len(s.strays) > 1 || s.live != 10 {
		t.Errorf("strays %d, run %d messages; want the stuck one a stray and the window of 10 in the run", len(s.strays), s.live)
	}
	if len(s.order) > 2*len(s.strays)+storeSlack {
		t.Errorf("order holds %d numbers for %d strays", len(s.order), len(s.strays))
	}
}
