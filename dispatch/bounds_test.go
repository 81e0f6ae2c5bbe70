package dispatch

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
	"chute/kv"
)

func TestParseRecord_epochRange(t *testing.T) {
	for _, tc := range []struct {
		epoch string
		ok    bool
	}{
		{"0", true},
		{"4294967295", true}, // maxEpoch
		{"4294967296", false},
		{"18446744073709551615", false},
		{"18446744073709551616", false}, // does not fit: not read as 0
		{"-1", false},
		{"x", false},
	} {
		rec, ok := ParseRecord("7;epoch=" + tc.epoch)
		if ok != tc.ok {
			t.Errorf("epoch=%s: got ok %v (%+v), want %v", tc.epoch, ok, rec, tc.ok)
		}
	}
}

func TestNextEpoch_last(t *testing.T) {
	if e, ok := nextEpoch(Record{Member: 1, Epoch: maxEpoch - 1}); !ok || e != maxEpoch {
		t.Fatalf("after maxEpoch-1: got %d %v, want %d true", e, ok, uint64(maxEpoch))
	}
	if e, ok := nextEpoch(Record{Member: 1, Epoch: maxEpoch}); ok {
		t.Fatalf("after maxEpoch: got %d, want none", e)
	}
	// The last epoch's numbers fit: the floor does not wrap.
	if floor := (uint64(maxEpoch)-1)<<32 + 1; floor > maxSeq || epochOfSeq(maxSeq) != maxEpoch || epochOfSeq(floor) != maxEpoch {
		t.Fatalf("epoch %d numbers from %d to %d", uint64(maxEpoch), floor, uint64(maxSeq))
	}
}

// TestCheck_recordEpochOutOfRange: a client's put of a record whose epoch
// no claim could take is InvalidArgument, whatever the queue's name.
func TestCheck_recordEpochOutOfRange(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	for _, key := range []string{"/q/j", "/q/j;epoch=18446744073709551615"} {
		for _, v := range []string{"7;epoch=18446744073709551615", "7;epoch=4294967296", "7;epoch=99999999999999999999"} {
			_, err := cli.Put(ctx, key, v)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "etcdserver: ") {
				t.Errorf("put %s %q: got %v, want InvalidArgument etcdserver: ...", key, v, err)
			}
		}
	}
	if _, err := cli.Put(ctx, "/q/j", "7;epoch=4294967295"); err != nil {
		t.Fatalf("put of the last epoch: %v", err)
	}
}

// TestProduce_lastEpochNotClaimed: a queue whose record is at the last
// epoch, naming a member that is gone, is not claimed (the epoch would
// wrap): the put fails FailedPrecondition and the record stays.
func TestProduce_lastEpochNotClaimed(t *testing.T) {
	cl := newCluster(t)
	a := cl.start("a", nil)
	ctx := testCtx(t, 10*time.Second)
	last := fmt.Sprintf("99;epoch=%d", uint64(maxEpoch))
	if _, err := a.cli.Put(ctx, "/q/j", last); err != nil {
		t.Fatal(err)
	}
	_, err := a.cli.Put(ctx, "/q/j/p/x", "v")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "is the last") {
		t.Fatalf("put: got %v, want FailedPrecondition naming the last epoch", err)
	}
	if got := recordOn(a, "j"); got != last {
		t.Fatalf("record: got %q, want %q", got, last)
	}
}

func TestPeerLimits_checkPeerMessages(t *testing.T) {
	l := peerLimits{maxKeyBytes: kv.DefaultMaxKeyBytes, maxRequestBytes: kv.DefaultMaxRequestBytes}
	msg := func(queue, tail, value string, seq uint64) *peerpb.QueueMessage {
		return &peerpb.QueueMessage{Queue: queue, Tail: tail, Value: []byte(value), Origin: 1, N: 1, Seq: seq}
	}
	many := make([]*peerpb.QueueMessage, peerCallMessages+1)
	for i := range many {
		many[i] = msg("jobs", fmt.Sprint(i), "v", 0)
	}
	longTail := strings.Repeat("t", kv.DefaultMaxKeyBytes-len("/q/jobs/p/")+1)
	tried := func(m *peerpb.QueueMessage, rows uint32) *peerpb.QueueMessage { m.Batch = rows; return m }
	consumer := func(m *peerpb.QueueMessage, id string) *peerpb.QueueMessage { m.Consumer = id; return m }
	for _, tc := range []struct {
		name  string
		msgs  []*peerpb.QueueMessage
		epoch uint64
		want  codes.Code
	}{
		{"ok", []*peerpb.QueueMessage{msg("jobs", "a", "v", 0), msg("jobs", "b", "v", 5)}, 1, codes.OK},
		{"longest key", []*peerpb.QueueMessage{msg("jobs", longTail[1:], "v", 0)}, 1, codes.OK},
		{"largest value", []*peerpb.QueueMessage{msg("jobs", "a", strings.Repeat("v", kv.DefaultMaxRequestBytes), 0)}, 1, codes.OK},
		{"last number within the lead", []*peerpb.QueueMessage{msg("jobs", "a", "v", (1+epochLead)<<32)}, 1, codes.OK},
		{"too many", many, 1, codes.InvalidArgument},
		{"two queues", []*peerpb.QueueMessage{msg("jobs", "a", "v", 0), msg("other", "a", "v", 0)}, 1, codes.InvalidArgument},
		{"empty name", []*peerpb.QueueMessage{msg("", "a", "v", 0)}, 1, codes.InvalidArgument},
		{"name with /", []*peerpb.QueueMessage{msg("a/b", "a", "v", 0)}, 1, codes.InvalidArgument},
		{"empty tail", []*peerpb.QueueMessage{msg("jobs", "", "v", 0)}, 1, codes.InvalidArgument},
		{"tail with /", []*peerpb.QueueMessage{msg("jobs", "a/b", "v", 0)}, 1, codes.InvalidArgument},
		{"key too large", []*peerpb.QueueMessage{msg("jobs", longTail, "v", 0)}, 1, codes.InvalidArgument},
		{"value too large", []*peerpb.QueueMessage{msg("jobs", "a", strings.Repeat("v", kv.DefaultMaxRequestBytes+1), 0)}, 1, codes.InvalidArgument},
		{"longest consumer", []*peerpb.QueueMessage{consumer(msg("jobs", "a", "v", 0), strings.Repeat("c", kv.DefaultMaxKeyBytes))}, 1, codes.OK},
		{"consumer too long", []*peerpb.QueueMessage{consumer(msg("jobs", "a", "v", 0), strings.Repeat("c", kv.DefaultMaxKeyBytes+1))}, 1, codes.InvalidArgument},
		{"number of no epoch", []*peerpb.QueueMessage{msg("jobs", "a", "v", math.MaxUint64)}, 1, codes.OutOfRange},
		{"number far ahead", []*peerpb.QueueMessage{msg("jobs", "a", "v", (1+epochLead)<<32+1)}, 1, codes.OutOfRange},
		{"ch row not an object", []*peerpb.QueueMessage{msg("ch:events", "a", "[1]", 0)}, 1, codes.InvalidArgument},
		{"ch row", []*peerpb.QueueMessage{msg("ch:events", "a", `{"a":1}`, 0)}, 1, codes.OK},
		{"largest tried batch", []*peerpb.QueueMessage{tried(msg("ch:events", "a", `{"a":1}`, 5), maxBatchRows)}, 1, codes.OK},
		{"tried batch too large", []*peerpb.QueueMessage{tried(msg("ch:events", "a", `{"a":1}`, 5), maxBatchRows+1)}, 1, codes.InvalidArgument},
		{"tried batch of a held copy", []*peerpb.QueueMessage{tried(msg("ch:events", "a", `{"a":1}`, 0), 1)}, 1, codes.OK},
		{"tried batch of no drainer", []*peerpb.QueueMessage{tried(msg("jobs", "a", "v", 5), 1)}, 1, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(l.checkPeerMessages(tc.msgs, tc.epoch)); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestQueue_enqueueLocked_numbersDoNotWrap: a queue at the last number
// gives it, then keeps what comes after unnumbered instead of wrapping.
func TestQueue_enqueueLocked_numbersDoNotWrap(t *testing.T) {
	q := newQueue("jobs", Config{}.withDefaults().defaults())
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextSeq = maxSeq
	if !q.numbersLeftLocked(1) || q.numbersLeftLocked(2) {
		t.Fatalf("numbers left at maxSeq: want exactly one")
	}
	now := time.Now()
	q.enqueueLocked([]incoming{
		{id: MsgID{Origin: 1, N: 1}, tail: "a", value: []byte("v")},
		{id: MsgID{Origin: 1, N: 2}, tail: "b", value: []byte("v")},
		{id: MsgID{Origin: 1, N: 3}, tail: "c", value: []byte("v"), seq: math.MaxUint64},
	}, now, arrivedCopy, false)
	if m := q.msgs.get(maxSeq); m == nil || m.tail != "a" {
		t.Fatalf("the last number: got %+v, want message a", m)
	}
	if q.msgs.len() != 1 || len(q.held) != 2 {
		t.Fatalf("got %d numbered and %d held, want 1 and 2", q.msgs.len(), len(q.held))
	}
	if q.nextSeq != maxSeq+1 {
		t.Fatalf("next number: got %d, want %d", q.nextSeq, uint64(maxSeq)+1)
	}
}

func TestManager_nextN_doesNotWrap(t *testing.T) {
	m, err := New(Config{MemberID: 7})
	if err != nil {
		t.Fatal(err)
	}
	m.counter.Store(math.MaxUint64 - 1)
	if n, err := m.nextN(); err != nil || n != math.MaxUint64 {
		t.Fatalf("the last id: got %d, %v", n, err)
	}
	if n, err := m.nextN(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("past the last id: got %d, %v, want ResourceExhausted", n, err)
	}
}

// TestManager_Ack_unknownQueueCreatesNone checks that an acknowledgement of
// a queue this member holds nothing of, from a client or from a peer, is
// answered "not acked" and leaves no queue behind: keys naming queues at
// random must not grow the manager.
func TestManager_Ack_unknownQueueCreatesNone(t *testing.T) {
	m, err := New(Config{MemberID: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 5*time.Second)
	for i := range 50 {
		acked, err := m.Ack(ctx, []byte(fmt.Sprintf("/q/client-%d/1/k", i)))
		if err != nil || acked {
			t.Fatalf("client ack of an unknown queue: got %v, %v; want false, nil", acked, err)
		}
		resp, err := m.PeerService().Ack(ctx, &peerpb.AckRequest{Queue: fmt.Sprintf("peer-%d", i), Seq: 1, Tail: "k"})
		if err != nil || resp.Acked {
			t.Fatalf("peer ack of an unknown queue: got %v, %v; want not acked", resp, err)
		}
	}
	if n := len(m.Status().Queues); n != 0 {
		t.Fatalf("%d queues after acks of unknown queues, want 0", n)
	}
}

// TestQueueService_keyGrammar: a peer's Ack and Consume naming a queue,
// key or consumer outside the key grammar, or longer than a key may be,
// are refused before anything is looked up or made.
func TestQueueService_keyGrammar(t *testing.T) {
	m, err := New(Config{MemberID: 7})
	if err != nil {
		t.Fatal(err)
	}
	svc := m.PeerService()
	ctx := testCtx(t, 5*time.Second)
	long := strings.Repeat("x", kv.DefaultMaxKeyBytes+1)
	for what, r := range map[string]*peerpb.AckRequest{
		"bad queue":         {Queue: "a/b", Seq: 1, Tail: "k"},
		"empty tail":        {Queue: "jobs", Seq: 1},
		"tail with /":       {Queue: "jobs", Seq: 1, Tail: "a/b"},
		"tail too long":     {Queue: "jobs", Seq: 1, Tail: long},
		"consumer with /":   {Queue: "jobs", Seq: 1, Tail: "k", Consumer: "a/b"},
		"consumer too long": {Queue: "jobs", Seq: 1, Tail: "k", Consumer: long},
	} {
		if _, err := svc.Ack(ctx, r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ack, %s: %v, want InvalidArgument", what, err)
		}
	}
	if resp, err := svc.Ack(ctx, &peerpb.AckRequest{Queue: "jobs", Seq: 1, Tail: "k", Consumer: "c"}); err != nil || resp.Acked {
		t.Errorf("ack within the grammar: %v, %v; want not acked, no error", resp, err)
	}
	for what, r := range map[string]*peerpb.ConsumeRequest{
		"bad queue":         {Queue: "a/b", Consumer: "c", Prefix: "q"},
		"no consumer":       {Queue: "jobs", Prefix: "q"},
		"consumer with /":   {Queue: "jobs", Consumer: "a/b", Prefix: "q"},
		"consumer too long": {Queue: "jobs", Consumer: long, Prefix: "q"},
		"bad prefix":        {Queue: "jobs", Consumer: "c", Prefix: "x"},
	} {
		if err := svc.Consume(r, nil); status.Code(err) != codes.InvalidArgument {
			t.Errorf("consume, %s: %v, want InvalidArgument", what, err)
		}
	}
	if n := len(m.Status().Queues); n != 0 {
		t.Fatalf("%d queues after refused calls, want 0", n)
	}
}

// TestKeepBackup_boundsNumbers: a backup frame naming more numbers than
// a frame may is refused whole.
func TestKeepBackup_boundsNumbers(t *testing.T) {
	n := startNode(t, nil)
	ctx := testCtx(t, 5*time.Second)
	b := &peerpb.ForwardBatch{Kind: peerpb.ForwardKind_RELEASE, Queue: "jobs", Seqs: make([]uint64, peerCallSeqs+1)}
	if err := n.mgr.keepBackup(ctx, 9, b); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a release of %d numbers: %v, want InvalidArgument", len(b.Seqs), err)
	}
	b.Seqs = b.Seqs[:peerCallSeqs]
	if err := n.mgr.keepBackup(ctx, 9, b); err != nil {
		t.Fatalf("a release of %d numbers: %v", len(b.Seqs), err)
	}
}

// TestTakeDone_bounds: a DONE frame whose numbers are not triples, name
// an id past 2^64 or no valid queue is refused whole; a valid one adds
// its ids.
func TestTakeDone_bounds(t *testing.T) {
	n := startNode(t, nil)
	for what, b := range map[string]*peerpb.ForwardBatch{
		"not triples": {Kind: peerpb.ForwardKind_DONE, Queue: "jobs", Seqs: []uint64{1, 2}},
		"past 2^64":   {Kind: peerpb.ForwardKind_DONE, Queue: "jobs", Seqs: []uint64{1, 1 << 58, 1}},
		"bad queue":   {Kind: peerpb.ForwardKind_DONE, Queue: "a/b", Seqs: []uint64{1, 2, 3}},
		"too many":    {Kind: peerpb.ForwardKind_DONE, Queue: "jobs", Seqs: make([]uint64, peerCallSeqs+3)},
	} {
		if err := n.mgr.takeDone(0, b); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", what, err)
		}
	}
	if err := n.mgr.takeDone(0, &peerpb.ForwardBatch{Kind: peerpb.ForwardKind_DONE, Queue: "jobs", Seqs: []uint64{5, 1<<58 - 1, 1 << 63}}); err != nil {
		t.Fatal(err)
	}
	q := n.mgr.queueFor("jobs")
	q.mu.Lock()
	defer q.mu.Unlock()
	if id := (MsgID{Origin: 5, N: 1<<64 - 1}); !q.isDone(id) || q.isDone(MsgID{Origin: 5, N: 1<<64 - 2}) {
		t.Fatalf("after a DONE of %v alone: isDone %v", id, q.isDone(id))
	}
}
