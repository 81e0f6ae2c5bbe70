package dispatch

import (
	"encoding/binary"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
)

// takenBlocks returns ids as a Taken call's blocks, one block each.
func takenBlocks(ids ...MsgID) []byte {
	var b []byte
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, id.Origin)
		b = binary.LittleEndian.AppendUint64(b, id.N>>6)
		b = binary.LittleEndian.AppendUint64(b, 1<<(id.N&63))
	}
	return b
}

// TestQueueService_Taken: a Taken call drops the held copies it names
// and no others, and a copy it names that comes back from a failed
// hand-over is not held again; one of a queue this member holds nothing
// of makes no queue. A call cut mid-block, with more blocks than a call
// may carry or naming an id past 2^64 is refused whole.
func TestQueueService_Taken(t *testing.T) {
	m, err := New(Config{MemberID: 7})
	if err != nil {
		t.Fatal(err)
	}
	svc := m.PeerService()
	ctx := testCtx(t, 5*time.Second)
	var pastEnd []byte // N/64 at 2^58: ids past 2^64
	for _, v := range []uint64{1, 1 << 58, 1} {
		pastEnd = binary.LittleEndian.AppendUint64(pastEnd, v)
	}
	for what, r := range map[string]*peerpb.TakenRequest{
		"bad queue":    {Queue: "a/b"},
		"cut short":    {Queue: "jobs", Blocks: make([]byte, takenBlockBytes+8)},
		"too many":     {Queue: "jobs", Blocks: make([]byte, (maxTakenBlocks+1)*takenBlockBytes)},
		"id past 2^64": {Queue: "jobs", Blocks: append(takenBlocks(MsgID{Origin: 1, N: 1}), pastEnd...)},
	} {
		if _, err := svc.Taken(ctx, r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", what, err)
		}
	}
	if _, err := svc.Taken(ctx, &peerpb.TakenRequest{Queue: "other", Blocks: takenBlocks(MsgID{Origin: 2, N: 1})}); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Status().Queues); n != 0 {
		t.Fatalf("%d queues after a Taken call of a queue held nowhere, want 0", n)
	}

	q := m.queueFor("jobs")
	q.mu.Lock()
	q.holdLocked([]incoming{
		{id: MsgID{Origin: 2, N: 1}, tail: "a", value: []byte("v")},
		{id: MsgID{Origin: 2, N: 2}, tail: "b", value: []byte("v")},
		{id: MsgID{Origin: 2, N: 130}, tail: "c", value: []byte("v")},
	})
	q.mu.Unlock()
	out := q.takeAll() // a and b out for a hand-over while the call comes
	q.mu.Lock()
	q.holdLocked(out[2:])
	q.mu.Unlock()
	if _, err := svc.Taken(ctx, &peerpb.TakenRequest{Queue: "jobs", Blocks: takenBlocks(MsgID{Origin: 2, N: 2}, MsgID{Origin: 2, N: 130})}); err != nil {
		t.Fatal(err)
	}
	q.putBack(out[:2], time.Now())
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.held) != 1 || q.held[0].tail != "a" || q.bytes != 2 || len(q.heldIDs) != 1 {
		t.Errorf("held %+v (%d bytes), want a alone", q.held, q.bytes)
	}
}

// TestQueueService_Taken_manyIDs: one call naming more ids than a queue
// remembers as acknowledged (doneIDs, two generations) drops every held
// copy it names: the ids of a call are kept whole while it is applied.
func TestQueueService_Taken_manyIDs(t *testing.T) {
	m, err := New(Config{MemberID: 7})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3 * doneIDs
	held := make([]incoming, n)
	var blocks []byte
	for i := range held {
		held[i] = incoming{id: MsgID{Origin: 2, N: uint64(i)}, tail: "k", value: []byte("v")}
	}
	for hi := range uint64(n / 64) {
		for _, v := range []uint64{2, hi, 1<<64 - 1} {
			blocks = binary.LittleEndian.AppendUint64(blocks, v)
		}
	}
	q := m.queueFor("jobs")
	q.mu.Lock()
	q.holdLocked(held)
	q.mu.Unlock()
	if _, err := m.PeerService().Taken(testCtx(t, 5*time.Second), &peerpb.TakenRequest{Queue: "jobs", Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
	if got := q.status().Held; got != 0 {
		t.Fatalf("%d of %d copies held after a call naming them all, want none", got, n)
	}
}
