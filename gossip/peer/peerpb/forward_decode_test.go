package peerpb

import (
	"fmt"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// sampleFrames are frames as members send them: a txn's produce batch, a
// backup frame with releases, a handed-over message, an empty frame.
func sampleFrames() []*ForwardFrame {
	produce := &ForwardBatch{Id: 7, Puts: true, Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	for i := range 3 {
		produce.Messages = append(produce.Messages, &QueueMessage{Queue: "ch:db.events", Tail: "k" + string(rune('a'+i)), Value: []byte(`{"id":1}`), Origin: 1<<63 + 5, N: uint64(i + 1)})
	}
	backup := &ForwardBatch{Id: 8, Kind: ForwardKind_BACKUP, Queue: "jobs", Boot: "b1", Seqs: []uint64{1, 300, 1 << 40},
		Messages: []*QueueMessage{{Queue: "jobs", Tail: "x", Value: []byte("v"), Seq: 4<<32 + 1}}}
	handover := &ForwardBatch{Id: 9, Messages: []*QueueMessage{
		{Queue: "jobs", Tail: "a", Consumer: "c1", Attempts: 3, Seq: 9},
		{Queue: "other", Tail: "b"}, // another queue: the receiver refuses it, the decoder keeps it
		{Queue: "jobs", Tail: "c", Value: []byte{}},
	}}
	return []*ForwardFrame{
		{Batches: []*ForwardBatch{produce}},
		{Batches: []*ForwardBatch{backup, handover, {Id: 10}}},
		{},
	}
}

// TestForwardFrame_UnmarshalCopy_sameAsProto: the frames members send
// decode to what proto.Unmarshal makes of them, and a queue name repeated
// in a batch is decoded once.
func TestForwardFrame_UnmarshalCopy_sameAsProto(t *testing.T) {
	for i, want := range sampleFrames() {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var got ForwardFrame
		if err := got.UnmarshalCopy(b); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !proto.Equal(&got, want) {
			t.Errorf("frame %d: got %v, want %v", i, &got, want)
		}
	}
	var got ForwardFrame
	b, _ := proto.Marshal(sampleFrames()[0])
	if err := got.UnmarshalCopy(b); err != nil {
		t.Fatal(err)
	}
	msgs := got.Batches[0].Messages
	if unsafeStringData(msgs[0].Queue) != unsafeStringData(msgs[2].Queue) {
		t.Errorf("the queue name of a batch's messages: got copies, want one string")
	}
}

// TestForwardFrame_UnmarshalCopy_copies: nothing decoded refers to the
// bytes decoded, which the codec reuses.
func TestForwardFrame_UnmarshalCopy_copies(t *testing.T) {
	b, err := proto.Marshal(sampleFrames()[0])
	if err != nil {
		t.Fatal(err)
	}
	var got ForwardFrame
	if err := got.UnmarshalCopy(b); err != nil {
		t.Fatal(err)
	}
	clear(b)
	if v := string(got.Batches[0].Messages[1].Value); v != `{"id":1}` {
		t.Errorf("value after the buffer was cleared: got %q, want %q", v, `{"id":1}`)
	}
}

// TestForwardFrame_UnmarshalCopy_refuses: what proto.Unmarshal refuses,
// UnmarshalCopy refuses: a string that is not UTF-8, a cut frame.
func TestForwardFrame_UnmarshalCopy_refuses(t *testing.T) {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg := protowire.AppendTag(nil, 2, protowire.BytesType)
	msg = protowire.AppendBytes(msg, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("\xff")))
	b = protowire.AppendBytes(b, msg)
	good, _ := proto.Marshal(sampleFrames()[0])
	for name, wire := range map[string][]byte{"tail not UTF-8": b, "cut": good[:len(good)-3]} {
		if err := proto.Unmarshal(wire, &ForwardFrame{}); err == nil {
			t.Fatalf("%s: proto.Unmarshal took it", name)
		}
		if err := (&ForwardFrame{}).UnmarshalCopy(wire); err == nil {
			t.Errorf("%s: got no error, want one", name)
		}
	}
}

// FuzzForwardFrame_UnmarshalCopy: any bytes decode as proto.Unmarshal
// decodes them, unknown fields aside, or fail as it fails; and what
// decodes encodes by hand as proto.Marshal encodes it (AppendEncoded).
func FuzzForwardFrame_UnmarshalCopy(f *testing.F) {
	for _, fr := range sampleFrames() {
		b, _ := proto.Marshal(fr)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got ForwardFrame
		werr := proto.Unmarshal(b, &want)
		gerr := got.UnmarshalCopy(b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("UnmarshalCopy error %v, proto.Unmarshal error %v", gerr, werr)
		}
		if werr != nil {
			return
		}
		discardUnknown(&want)
		if !proto.Equal(&got, &want) {
			t.Fatalf("got %v, want %v", &got, &want)
		}
		checkEncoded(t, "fuzzed frame", &want)
	})
}

// discardUnknown drops the unknown fields proto.Unmarshal keeps and
// UnmarshalCopy skips.
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

// BenchmarkForwardFrame_decode compares UnmarshalCopy with proto.Unmarshal
// on a frame of one txn of 128 puts of about 100 bytes.
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
	b.Run("UnmarshalCopy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var fr ForwardFrame
			if err := fr.UnmarshalCopy(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestForwardFrame_UnmarshalCopy_allocs: a frame of one-put batches, as
// a busy member forwards unary puts, costs a few allocations for the
// frame and two per put (its key and its value), the queue name being
// kept once for the frame.
func TestForwardFrame_UnmarshalCopy_allocs(t *testing.T) {
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
	var got ForwardFrame
	allocs := testing.AllocsPerRun(20, func() {
		if err := got.UnmarshalCopy(wire); err != nil {
			t.Fatal(err)
		}
	})
	if want := float64(4 + 1 + 2*puts); allocs > want {
		t.Errorf("got %.0f allocations for a frame of %d one-put batches, want at most %.0f", allocs, puts, want)
	}
	if len(got.Batches) != puts || got.Batches[puts-1].Messages[0].Tail != fmt.Sprintf("k%d", puts-1) {
		t.Errorf("got %d batches, want %d, the last with key k%d", len(got.Batches), puts, puts-1)
	}
}
