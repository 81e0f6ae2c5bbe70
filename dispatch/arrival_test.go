package dispatch

import (
	"testing"
	"time"

	"chute/gossip/peer/peerpb"
)

// TestQueue_enqueueLocked_arrivals checks the duplicate rules by arrival:
// a forwarded put skips the lookups only while no copy from its origin
// came, so a copy and its forwarded original are kept once whichever
// comes first, and a copy of an acknowledged put is dropped.
func TestQueue_enqueueLocked_arrivals(t *testing.T) {
	const a, b = 0xa, 0xb
	type step struct {
		how  arrival
		id   MsgID
		ack  bool // acknowledge the message numbered by this step instead
		want int  // messages queued after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"copy then its forwarded original", []step{
			{how: arrivedCopy, id: MsgID{a, 1}, want: 1},
			{how: arrivedForwarded, id: MsgID{a, 1}, want: 1},
			{how: arrivedForwarded, id: MsgID{a, 2}, want: 2},
		}},
		{"forwarded then its copy", []step{
			{how: arrivedForwarded, id: MsgID{a, 1}, want: 1},
			{how: arrivedCopy, id: MsgID{a, 1}, want: 1},
		}},
		{"forwarded, acknowledged, then its copy", []step{
			{how: arrivedForwarded, id: MsgID{a, 1}, want: 1},
			{ack: true, id: MsgID{a, 1}, want: 0},
			{how: arrivedCopy, id: MsgID{a, 1}, want: 0},
		}},
		{"copy acknowledged, then its forwarded original", []step{
			{how: arrivedCopy, id: MsgID{a, 1}, want: 1},
			{ack: true, id: MsgID{a, 1}, want: 0},
			{how: arrivedForwarded, id: MsgID{a, 1}, want: 0},
		}},
		{"a copy from one origin leaves another's puts alone", []step{
			{how: arrivedCopy, id: MsgID{a, 1}, want: 1},
			{how: arrivedForwarded, id: MsgID{b, 1}, want: 2},
			{how: arrivedForwarded, id: MsgID{b, 2}, want: 3},
		}},
		{"local put then its copy", []step{
			{how: arrivedLocal, id: MsgID{a, 1}, want: 1},
			{how: arrivedLocal, id: MsgID{a, 2}, want: 2},
			{how: arrivedCopy, id: MsgID{a, 1}, want: 2},
			{how: arrivedLocal, id: MsgID{a, 3}, want: 3},
			{how: arrivedCopy, id: MsgID{a, 3}, want: 3},
		}},
		{"the queue emptied, then a copy of what it holds again", []step{
			{how: arrivedCopy, id: MsgID{b, 1}, want: 1},
			{ack: true, id: MsgID{b, 1}, want: 0},
			{how: arrivedLocal, id: MsgID{a, 1}, want: 1},
			{how: arrivedCopy, id: MsgID{a, 1}, want: 1},
			{how: arrivedCopy, id: MsgID{b, 1}, want: 1},
		}},
		{"copies are looked up among themselves", []step{
			{how: arrivedCopy, id: MsgID{b, 7}, want: 1},
			{how: arrivedCopy, id: MsgID{b, 7}, want: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue("t", Config{}.withDefaults().defaults())
			now := time.Now()
			for i, s := range tt.steps {
				q.mu.Lock()
				if s.ack {
					for seq, m := range q.msgs.all() {
						if m.id == s.id {
							q.removeLocked(seq, m)
							break
						}
					}
				} else {
					q.enqueueLocked([]incoming{{id: s.id, tail: "k", value: []byte(`{}`)}}, now, s.how, false)
				}
				got := q.msgs.len()
				q.mu.Unlock()
				if got != s.want {
					t.Fatalf("step %d: %d messages queued, want %d", i, got, s.want)
				}
			}
		})
	}
}

// TestQueue_enqueueLocked_forwardedPutsNotLookedUp shows what the rule
// saves: with no copy from the origin, a forwarded put's id is not looked
// up, so the same id forwarded twice (which a member never does) is queued
// twice; after a copy from that origin it is not.
func TestQueue_enqueueLocked_forwardedPutsNotLookedUp(t *testing.T) {
	q := newQueue("t", Config{}.withDefaults().defaults())
	now := time.Now()
	put := []incoming{{id: MsgID{0xa, 1}, tail: "k", value: []byte(`{}`)}}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enqueueLocked(put, now, arrivedForwarded, false)
	q.enqueueLocked(put, now, arrivedForwarded, false)
	if got := q.msgs.len(); got != 2 {
		t.Fatalf("%d messages queued, want 2: a forwarded put was looked up with no copy from its origin", got)
	}
	q.enqueueLocked([]incoming{{id: MsgID{0xa, 9}, tail: "k", value: []byte(`{}`)}}, now, arrivedCopy, false)
	q.enqueueLocked(put, now, arrivedForwarded, false)
	if got := q.msgs.len(); got != 3 {
		t.Fatalf("%d messages queued, want 3: a forwarded put was not looked up after a copy from its origin", got)
	}
}

func TestMadeBy(t *testing.T) {
	msgs := func(origins ...uint64) []*peerpb.QueueMessage {
		var out []*peerpb.QueueMessage
		for _, o := range origins {
			out = append(out, &peerpb.QueueMessage{Origin: o})
		}
		return out
	}
	tests := []struct {
		name   string
		msgs   []*peerpb.QueueMessage
		member uint64
		want   bool
	}{
		{"all the sender's", msgs(5, 5, 5), 5, true},
		{"one from another member", msgs(5, 6, 5), 5, false},
		{"unknown sender", msgs(0), 0, false},
		{"no messages", nil, 5, true},
	}
	for _, tt := range tests {
		if got := madeBy(tt.msgs, tt.member); got != tt.want {
			t.Errorf("%s: madeBy = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestQueue_ack_renamedHandover checks acknowledgements of a handed-over
// message renumbered here while its consumer held it: two members claimed
// the queue at once and both numbered from the same floor, so the
// consumer's ack of the old number must not remove the message that has
// that number here (it would be lost, never delivered); the first ack of
// the number with that tail goes to the handed-over one, the next to the
// other.
func TestQueue_ack_renamedHandover(t *testing.T) {
	const winner, loser = 0xa, 0xb
	now := time.Now()
	own := incoming{id: MsgID{winner, 1}, tail: "k", value: []byte(`{}`)}
	tests := []struct {
		name      string
		handed    incoming
		acks      []string // tails acknowledged with number 1, in order
		wantAfter []MsgID  // ids left after each ack
	}{
		{
			name:      "delivered on the loser: first ack is its, second the winner's",
			handed:    incoming{id: MsgID{loser, 1}, tail: "k", value: []byte(`{}`), seq: 1, consumer: "x"},
			acks:      []string{"k", "k"},
			wantAfter: []MsgID{{winner, 1}, {}},
		},
		{
			name:      "not delivered on the loser: nobody holds its old number",
			handed:    incoming{id: MsgID{loser, 1}, tail: "k", value: []byte(`{}`), seq: 1},
			acks:      []string{"k"},
			wantAfter: []MsgID{{loser, 1}},
		},
		{
			name:      "another tail is not the renamed one's",
			handed:    incoming{id: MsgID{loser, 1}, tail: "j", value: []byte(`{}`), seq: 1, consumer: "x"},
			acks:      []string{"k", "j"},
			wantAfter: []MsgID{{loser, 1}, {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue("t", Config{}.withDefaults().defaults())
			q.mu.Lock()
			q.enqueueLocked([]incoming{own}, now, arrivedLocal, false)
			q.enqueueLocked([]incoming{tt.handed}, now, arrivedCopy, false)
			n := q.msgs.len()
			q.mu.Unlock()
			if n != 2 {
				t.Fatalf("%d messages queued, want 2 (the handed-over one renumbered)", n)
			}
			for i, tail := range tt.acks {
				if !q.ack(1, tail, "", now) {
					t.Fatalf("ack %d of 1/%s removed nothing", i, tail)
				}
				q.mu.Lock()
				var left MsgID
				for _, m := range q.msgs.all() {
					left = m.id
				}
				q.mu.Unlock()
				if left != tt.wantAfter[i] {
					t.Fatalf("after ack %d of 1/%s: %v left, want %v", i, tail, left, tt.wantAfter[i])
				}
			}
		})
	}
}
