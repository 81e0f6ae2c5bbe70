package peerpb

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
)

// checkEncoded fails t unless fr encodes by itself to the bytes
// proto.Marshal writes, at the size it said.
func checkEncoded(t *testing.T, name string, fr *ForwardFrame) {
	t.Helper()
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(fr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	size, ok := fr.EncodedSize()
	if !ok {
		t.Fatalf("%s: EncodedSize refused it", name)
	}
	got := fr.AppendEncoded([]byte("prefix"))
	if size != len(want) || !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
		t.Errorf("%s: got size %d and %x, want %d and %x", name, size, got, len(want), want)
	}
}

// TestForwardFrame_AppendEncoded_sameAsProto: the frames members send,
// and one with every field at a large value, encode as proto.Marshal
// encodes them.
func TestForwardFrame_AppendEncoded_sameAsProto(t *testing.T) {
	for i, fr := range sampleFrames() {
		checkEncoded(t, fmt.Sprintf("frame %d", i), fr)
	}
	big := &ForwardBatch{Id: 1<<64 - 1, Kind: ForwardKind_RESET, Traceparent: "tp", Queue: "q", Seqs: []uint64{0, 1<<64 - 1}, Boot: "é", Puts: true,
		Messages: []*QueueMessage{{Queue: "q", Tail: "t", Value: bytes.Repeat([]byte("v"), 200), Origin: 1<<64 - 1, N: 1 << 35, Seq: 127, Consumer: "c", Attempts: -1}}}
	checkEncoded(t, "every field", &ForwardFrame{Batches: []*ForwardBatch{big, {}}})
}

// TestForwardFrame_EncodedSize_refuses: what the encoder would not write
// as proto.Marshal does is left to proto.Marshal: a string that is not
// UTF-8 (which proto.Marshal refuses), unknown fields, a nil batch or
// message.
func TestForwardFrame_EncodedSize_refuses(t *testing.T) {
	unknown := &QueueMessage{Queue: "q"}
	unknown.ProtoReflect().SetUnknown([]byte{0x78, 0x01}) // field 15, varint 1
	frames := map[string]*ForwardFrame{
		"tail not UTF-8":      {Batches: []*ForwardBatch{{Messages: []*QueueMessage{{Tail: "\xff"}}}}},
		"boot not UTF-8":      {Batches: []*ForwardBatch{{Boot: "\xc3"}}},
		"unknown fields":      {Batches: []*ForwardBatch{{Messages: []*QueueMessage{unknown}}}},
		"a nil batch":         {Batches: []*ForwardBatch{nil}},
		"a nil queue message": {Batches: []*ForwardBatch{{Messages: []*QueueMessage{nil}}}},
	}
	for name, fr := range frames {
		if _, ok := fr.EncodedSize(); ok {
			t.Errorf("%s: EncodedSize took it, want it left to proto.Marshal", name)
		}
	}
}

// BenchmarkForwardFrame_encode compares EncodedSize and AppendEncoded
// with proto.Size and proto.Marshal on a frame of one txn of 128 puts of about 100 bytes.
func BenchmarkForwardFrame_encode(b *testing.B) {
	batch := &ForwardBatch{Id: 1, Puts: true}
	for i := range 128 {
		batch.Messages = append(batch.Messages, &QueueMessage{Queue: "ch:bench.events", Tail: fmt.Sprintf("k%07d", i), Origin: 1<<62 + 3, N: 1<<60 + uint64(i),
			Value: fmt.Appendf(nil, `{"id":%d,"ts":"2026-12-02 06:00:00","host":"host-%03d","msg":"a row of about one hundred bytes"}`, i, i%100)})
	}
	fr := &ForwardFrame{Batches: []*ForwardBatch{batch}}
	buf := make([]byte, 0, 64<<10)
	b.Run("proto", func(b *testing.B) { // as grpc's codec and kv's: the size, then the bytes
		b.ReportAllocs()
		for b.Loop() {
			_ = proto.Size(fr)
			if _, err := (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(buf[:0], fr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendEncoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fr.EncodedSize(); !ok {
				b.Fatal("refused")
			}
			buf = fr.AppendEncoded(buf[:0])
		}
	})
}
