package peerpb

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// sampleFrames are frames as members send them: a txn's produce batch, a
// backup frame with releases, a handed-over message, an empty frame, a
// restarted backup's copies.
func sampleFrames() []*ForwardFrame {
	produce := &ForwardBatch{Id: 7, Puts: true, Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	for i := range 3 {
		produce.Messages = append(produce.Messages, &QueueMessage{Queue: "ch:db.events", Tail: "k" + string(rune('a'+i)), Value: []byte(`{"id":1}`), Origin: 1<<63 + 5, N: uint64(i + 1)})
	}
	backup := &ForwardBatch{Id: 8, Kind: ForwardKind_BACKUP, Queue: "jobs", Boot: "b1", Seqs: []uint64{1, 300, 1 << 40},
		Messages: []*QueueMessage{{Queue: "jobs", Tail: "x", Value: []byte("v"), Seq: 4<<32 + 1}}}
	handover := &ForwardBatch{Id: 9, Messages: []*QueueMessage{
		{Queue: "jobs", Tail: "a", Consumer: "c1", Attempts: 3, Seq: 9, Batch: 2},
		{Queue: "other", Tail: "b"}, // another queue: the receiver refuses it, the decoder keeps it
		{Queue: "jobs", Tail: "c", Value: []byte{}},
	}}
	// A restarted backup's copies of its dispatcher's messages.
	restored := &ForwardBatch{Id: 12, BackupOf: 1<<63 + 9, BackupBoot: "3w5e11264sgsf",
		Messages: []*QueueMessage{{Queue: "jobs", Tail: "r", Value: []byte("v"), Seq: 2<<32 + 7, Origin: 4, N: 5}}}
	// The last frame of a full copy, and a RESET alone.
	copied := &ForwardBatch{Id: 13, Kind: ForwardKind_BACKUP, Queue: "jobs", Boot: "b1", Full: true,
		Messages: []*QueueMessage{{Queue: "jobs", Tail: "z", Value: []byte("v"), Seq: 2<<32 + 8}}}
	reset := &ForwardBatch{Id: 14, Kind: ForwardKind_RESET, Queue: "jobs", Boot: "b1", Full: true}
	// Tails longer than the first: the decoder's buffer of tails fills.
	long := &ForwardBatch{Id: 11, Messages: []*QueueMessage{
		{Queue: "q", Tail: "s", Value: []byte("1")},
		{Queue: "q", Tail: "a tail much longer than the first one", Value: []byte("2")},
		{Queue: "q", Tail: "u", Value: []byte("3")},
	}}
	return []*ForwardFrame{
		{Batches: []*ForwardBatch{produce}},
		{Batches: []*ForwardBatch{backup, handover, {Id: 10}}},
		{},
		{Batches: []*ForwardBatch{long}},
		{Batches: []*ForwardBatch{restored, produce}},
		{Batches: []*ForwardBatch{copied, reset}},
	}
}

// TestRecvFrame_sameAsProto: the frames members send
// decode to what proto.Unmarshal makes of them, and a queue name repeated
// in a batch is decoded once.
func TestRecvFrame_sameAsProto(t *testing.T) {
	for i, want := range sampleFrames() {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got RecvFrame
		if err := got.UnmarshalPooled(mem.SliceBuffer(b)); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !proto.Equal(&got.ForwardFrame, want) {
			t.Errorf("frame %d: got %v, want %v", i, &got.ForwardFrame, want)
		}
	}
	var got RecvFrame
	b, _ := proto.Marshal(sampleFrames()[0])
	if err := got.UnmarshalPooled(mem.SliceBuffer(b)); err != nil {
		t.Fatal(err)
	}
	msgs := got.Batches[0].Messages
	if unsafeStringData(msgs[0].Queue) != unsafeStringData(msgs[2].Queue) {
		t.Errorf("the queue name of a batch's messages: got copies, want one string")
	}
}

// TestRecvFrame_keeps: the values decoded are views of
// the bytes decoded, the tails are not (a queued message's tail must not
// keep its whole frame alive once its value is a view of the log).
func TestRecvFrame_keeps(t *testing.T) {
	b, err := proto.Marshal(sampleFrames()[0])
	if err != nil {
		t.Fatal(err)
	}
	var got RecvFrame
	if err := got.UnmarshalPooled(mem.SliceBuffer(b)); err != nil {
		t.Fatal(err)
	}
	in := func(p *byte) bool {
		a := uintptr(unsafe.Pointer(p))
		return a >= uintptr(unsafe.Pointer(&b[0])) && a < uintptr(unsafe.Pointer(&b[0]))+uintptr(len(b))
	}
	for i, m := range got.Batches[0].Messages {
		if !in(&m.Value[0]) || cap(m.Value) != len(m.Value) {
			t.Errorf("message %d: value is not a view of the frame of its own length (cap %d, len %d)", i, cap(m.Value), len(m.Value))
		}
		if in(unsafe.StringData(m.Tail)) {
			t.Errorf("message %d: tail %q is a view of the frame", i, m.Tail)
		}
	}
}

// TestRecvFrame_allocations: decoding a frame makes as many allocations
// for a thousand messages as for ten; decoding it again into the same
// RecvFrame, done with the first for reuse, makes two (the frame's tails
// and its queue name, which the queues keep).
func TestRecvFrame_allocations(t *testing.T) {
	wire := func(n int) []byte {
		f := &ForwardBatch{Id: 1, Puts: true}
		for i := range n {
			f.Messages = append(f.Messages, &QueueMessage{Queue: "ch:events", Tail: fmt.Sprintf("%016d", i), Value: []byte(`{"id":1,"v":"x"}`), Origin: 3, N: uint64(i + 1)})
		}
		b, err := proto.Marshal(&ForwardFrame{Batches: []*ForwardBatch{f}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fresh := func(b []byte) float64 {
		return testing.AllocsPerRun(20, func() {
			var got RecvFrame
			if err := got.UnmarshalPooled(mem.SliceBuffer(b)); err != nil {
				t.Fatal(err)
			}
		})
	}
	if few, many := fresh(wire(10)), fresh(wire(1000)); many != few {
		t.Errorf("allocations: got %v for 1000 messages, %v for 10; want as many", many, few)
	}
	var buf mem.Buffer = mem.SliceBuffer(wire(1000))
	var got RecvFrame
	reused := testing.AllocsPerRun(20, func() {
		got.Done(true)
		if err := got.UnmarshalPooled(buf); err != nil {
			t.Fatal(err)
		}
	})
	if reused > 2 {
		t.Errorf("allocations decoding into a frame done with for reuse: got %v, want at most 2", reused)
	}
	if len(got.Batches) != 1 || len(got.Batches[0].Messages) != 1000 || got.Batches[0].Messages[999].Tail != fmt.Sprintf("%016d", 999) {
		t.Errorf("decoded again: got %v, want the frame", &got.ForwardFrame)
	}
}

// TestRecvFrame_done: a frame done with for reuse is decoded over by the
// next (same messages in memory); one done with without reuse is left as
// it was, its messages, values and tails unchanged by the next frame
// decoded into the same RecvFrame.
func TestRecvFrame_done(t *testing.T) {
	frames := sampleFrames()
	first, _ := proto.Marshal(frames[0])
	second, _ := proto.Marshal(frames[3])
	for _, reuse := range []bool{true, false} {
		var r RecvFrame
		if err := r.UnmarshalPooled(mem.SliceBuffer(bytes.Clone(first))); err != nil {
			t.Fatal(err)
		}
		kept := r.Batches[0].Messages[0]
		want := proto.Clone(kept).(*QueueMessage)
		r.Done(reuse)
		if len(r.Batches) != 0 {
			t.Errorf("done with reuse %v: the frame still has %d batches", reuse, len(r.Batches))
		}
		if err := r.UnmarshalPooled(mem.SliceBuffer(bytes.Clone(second))); err != nil {
			t.Fatal(err)
		}
		if over := r.Batches[0].Messages[0] == kept; over != reuse {
			t.Errorf("done with reuse %v: the next frame's first message decoded over the first's: %v", reuse, over)
		}
		if !reuse && !proto.Equal(kept, want) {
			t.Errorf("done without reuse: a message of the first frame became %v, want %v", kept, want)
		}
		if !proto.Equal(&r.ForwardFrame, frames[3]) {
			t.Errorf("done with reuse %v: the next frame decoded as %v, want %v", reuse, &r.ForwardFrame, frames[3])
		}
	}
}

// TestRecvFrame_tailsBounded: the buffer the tails are
// kept in is sized from the first tail and the count of messages, but
// never more than the frame: a peer's long first tail and many messages
// without one do not make it allocate their product.
func TestRecvFrame_tailsBounded(t *testing.T) {
	f := &ForwardBatch{Messages: []*QueueMessage{{Queue: "q", Tail: string(make([]byte, 64<<10))}}}
	for range 2000 {
		f.Messages = append(f.Messages, &QueueMessage{Queue: "q"})
	}
	b, err := proto.Marshal(&ForwardFrame{Batches: []*ForwardBatch{f}})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var got RecvFrame
	if err := got.UnmarshalPooled(mem.SliceBuffer(b)); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(8*len(b)) {
		t.Errorf("allocated %d bytes decoding a frame of %d; want a few times the frame at most", n, len(b))
	}
	if len(got.Batches) != 1 || len(got.Batches[0].Messages) != 2001 || len(got.Batches[0].Messages[0].Tail) != 64<<10 {
		t.Errorf("decoded: got %d batches, want one of 2001 messages, the first with its 64 KiB tail", len(got.Batches))
	}
}

// TestRecvFrame_refuses: what proto.Unmarshal refuses,
// RecvFrame refuses: a string that is not UTF-8, a cut frame.
func TestRecvFrame_refuses(t *testing.T) {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg := protowire.AppendTag(nil, 2, protowire.BytesType)
	msg = protowire.AppendBytes(msg, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("\xff")))
	b = protowire.AppendBytes(b, msg)
	good, _ := proto.Marshal(sampleFrames()[0])
	for name, wire := range map[string][]byte{"tail not UTF-8": b, "cut": good[:len(good)-3]} {
		if err := proto.Unmarshal(wire, &ForwardFrame{}); err == nil {
			t.Fatalf("%s: proto.Unmarshal took it", name)
		}
		if err := (&RecvFrame{}).UnmarshalPooled(mem.SliceBuffer(wire)); err == nil {
			t.Errorf("%s: got no error, want one", name)
		}
	}
}

// TestRecvFrame_bounds: a frame of more than MaxFrameBatches batches, or
// with a batch of more than MaxBatchMessages messages, is refused once
// counted, before its messages are made: a batch of a million empty
// messages (2 MiB on the wire, within the peer link's 64 MiB) made
// 150 MB of them before the receiver's bounds looked. At the bounds a
// frame decodes.
func TestRecvFrame_bounds(t *testing.T) {
	batch := func(msgs int) []byte {
		var v []byte
		for range msgs {
			v = protowire.AppendTag(v, 2, protowire.BytesType)
			v = protowire.AppendBytes(v, nil) // an empty message
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), v)
	}
	frame := func(batches, msgs int) []byte {
		var b []byte
		for range batches {
			b = append(b, batch(msgs)...)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		wire []byte
		bad  bool
	}{
		{"batches at the bound", frame(MaxFrameBatches, 1), false},
		{"messages at the bound", frame(1, MaxBatchMessages), false},
		{"a batch too many", frame(MaxFrameBatches+1, 1), true},
		{"a message too many", frame(1, MaxBatchMessages+1), true},
	} {
		err := (&RecvFrame{}).UnmarshalPooled(mem.SliceBuffer(tc.wire))
		if tc.bad != errors.Is(err, ErrFrameBounds) || !tc.bad && err != nil {
			t.Errorf("%s: got %v, want bounds error %v", tc.name, err, tc.bad)
		}
	}
	huge := frame(1, 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := (&RecvFrame{}).UnmarshalPooled(mem.SliceBuffer(huge))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFrameBounds) {
		t.Fatalf("a batch of 2^20 messages: got %v, want a bounds error", err)
	}
	if made := after.TotalAlloc - before.TotalAlloc; made > 1<<20 {
		t.Errorf("refusing a frame of %d bytes made %d bytes", len(huge), made)
	}
}

// TestRecvFrame_seqsBounds: a frame naming more than MaxFrameSeqs
// numbers, packed or not, in one batch or over several, is refused before
// they are made: a packed number of one byte is eight in memory, so 32 MiB
// of them on the wire made 1.5 GB. At the bound a frame decodes.
func TestRecvFrame_seqsBounds(t *testing.T) {
	packed := func(n int) []byte { // a batch of n numbers, packed, each 1
		v := protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), bytes.Repeat([]byte{1}, n))
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), v)
	}
	unpacked := func(n int) []byte {
		var v []byte
		for range n {
			v = protowire.AppendVarint(protowire.AppendTag(v, 6, protowire.VarintType), 1)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), v)
	}
	half := MaxFrameSeqs / 2
	for _, tc := range []struct {
		name string
		wire []byte
		bad  bool
	}{
		{"packed, at the bound", packed(MaxFrameSeqs), false},
		{"packed, over two batches at the bound", append(packed(half), packed(half)...), false},
		{"unpacked and packed at the bound", append(unpacked(half), packed(half)...), false},
		{"packed, one too many", packed(MaxFrameSeqs + 1), true},
		{"over two batches, one too many", append(packed(half), packed(half+1)...), true},
		{"unpacked after packed, one too many", append(packed(MaxFrameSeqs), unpacked(1)...), true},
	} {
		var r RecvFrame
		err := r.UnmarshalPooled(mem.SliceBuffer(tc.wire))
		if tc.bad != errors.Is(err, ErrFrameBounds) || !tc.bad && err != nil {
			t.Errorf("%s: got %v, want bounds error %v", tc.name, err, tc.bad)
		}
		if !tc.bad && err == nil {
			n := 0
			for _, b := range r.Batches {
				n += len(b.Seqs)
			}
			if n != MaxFrameSeqs {
				t.Errorf("%s: %d numbers decoded, want %d", tc.name, n, MaxFrameSeqs)
			}
		}
	}
	huge := packed(32 << 20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := (&RecvFrame{}).UnmarshalPooled(mem.SliceBuffer(huge))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFrameBounds) {
		t.Fatalf("2^25 numbers packed: got %v, want a bounds error", err)
	}
	if made := after.TotalAlloc - before.TotalAlloc; made > 1<<20 {
		t.Errorf("refusing a frame of %d bytes made %d bytes", len(huge), made)
	}
}

// FuzzRecvFrame: any bytes decode as proto.Unmarshal
// decodes them, unknown fields aside, or fail as it fails; and what
// decodes encodes by hand as proto.Marshal encodes it (AppendEncoded).
func FuzzRecvFrame(f *testing.F) {
	for _, fr := range sampleFrames() {
		b, _ := proto.Marshal(fr)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want ForwardFrame
		var got RecvFrame
		werr := proto.Unmarshal(b, &want)
		gerr := got.UnmarshalPooled(mem.SliceBuffer(b))
		if errors.Is(gerr, ErrFrameBounds) {
			return // proto.Unmarshal has no such bounds (TestRecvFrame_bounds)
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("UnmarshalPooled error %v, proto.Unmarshal error %v", gerr, werr)
		}
		if werr != nil {
			return
		}
		discardUnknown(&want)
		if !proto.Equal(&got.ForwardFrame, &want) {
			t.Fatalf("got %v, want %v", &got.ForwardFrame, &want)
		}
		checkEncoded(t, "fuzzed frame", &want)
	})
}

// discardUnknown drops the unknown fields proto.Unmarshal keeps and
// RecvFrame skips.
func discardUnknown(fr *ForwardFrame) {
	fr.ProtoReflect().SetUnknown(nil)
	for _, b := range fr.Batches {
		b.ProtoReflect().SetUnknown(nil)
		for _, m := range b.Messages {
			m.ProtoReflect().SetUnknown(nil)
		}
	}
}

func unsafeStringData(s string) *byte { return unsafe.StringData(s) }

// BenchmarkForwardFrame_decode compares RecvFrame, reused as the
// dispatcher reuses it, with proto.Unmarshal on a frame of one txn of 128
// puts of about 100 bytes.
func BenchmarkForwardFrame_decode(b *testing.B) {
	batch := &ForwardBatch{Id: 1, Puts: true}
	for i := range 128 {
		batch.Messages = append(batch.Messages, &QueueMessage{Queue: "ch:bench.events", Tail: fmt.Sprintf("k%07d", i), Origin: 1<<62 + 3, N: 1<<60 + uint64(i),
			Value: fmt.Appendf(nil, `{"id":%d,"ts":"2026-12-02 06:00:00","host":"host-%03d","msg":"a row of about one hundred bytes"}`, i, i%100)})
	}
	wire, err := proto.Marshal(&ForwardFrame{Batches: []*ForwardBatch{batch}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var fr ForwardFrame
			if err := proto.Unmarshal(wire, &fr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RecvFrame", func(b *testing.B) {
		b.ReportAllocs()
		var fr RecvFrame
		for b.Loop() {
			if err := fr.UnmarshalPooled(mem.SliceBuffer(wire)); err != nil {
				b.Fatal(err)
			}
			fr.Done(true)
		}
	})
}

// TestRecvFrame_allocsOnePutBatches: a frame of one-put batches, as a
// busy member forwards unary puts, decoded into a RecvFrame done with for
// reuse, costs three allocations, none per put: the queue name, kept once
// for the frame, and the tails' buffer, which doubles once here (sized
// from the first tail, shorter than most).
func TestRecvFrame_allocsOnePutBatches(t *testing.T) {
	const puts = 32
	frame := &ForwardFrame{}
	for i := range puts {
		frame.Batches = append(frame.Batches, &ForwardBatch{Id: uint64(i + 1), Puts: true, Messages: []*QueueMessage{
			{Queue: "ch:db.events", Tail: fmt.Sprintf("k%d", i), Value: []byte(`{"id":1}`), Origin: 5, N: uint64(i + 1)}}})
	}
	wire, err := proto.Marshal(frame)
	if err != nil {
		t.Fatal(err)
	}
	var buf mem.Buffer = mem.SliceBuffer(wire)
	var got RecvFrame
	allocs := testing.AllocsPerRun(20, func() {
		got.Done(true)
		if err := got.UnmarshalPooled(buf); err != nil {
			t.Fatal(err)
		}
	})
	if want := 3.0; allocs > want {
		t.Errorf("got %.0f allocations for a frame of %d one-put batches, want at most %.0f", allocs, puts, want)
	}
	if len(got.Batches) != puts || got.Batches[puts-1].Messages[0].Tail != fmt.Sprintf("k%d", puts-1) {
		t.Errorf("got %d batches, want %d, the last with key k%d", len(got.Batches), puts, puts-1)
	}
}
