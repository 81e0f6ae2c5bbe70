package peerpb

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
)

// sendBatchOf returns fb as a SendBatch: its messages added one by one,
// the rest copied into the head; false when a message is refused.
func sendBatchOf(fb *ForwardBatch) (*SendBatch, bool) {
	b := &SendBatch{}
	b.Head.Id, b.Head.Kind, b.Head.Traceparent, b.Head.Queue = fb.Id, fb.Kind, fb.Traceparent, fb.Queue
	b.Head.Seqs, b.Head.Boot, b.Head.Puts = fb.Seqs, fb.Boot, fb.Puts
	b.Head.BackupOf, b.Head.BackupBoot, b.Head.Full = fb.BackupOf, fb.BackupBoot, fb.Full
	for _, m := range fb.Messages {
		if !b.AddMessage(m, false) {
			return nil, false
		}
	}
	return b, true
}

// sendFrameOf returns fr as a SendFrame.
func sendFrameOf(t *testing.T, fr *ForwardFrame) *SendFrame {
	t.Helper()
	out := &SendFrame{}
	for i, fb := range fr.Batches {
		b, ok := sendBatchOf(fb)
		if !ok {
			t.Fatalf("batch %d: a message was refused", i)
		}
		out.Batches = append(out.Batches, b)
	}
	return out
}

// checkEncoded fails t unless fr, sent as a SendFrame, encodes to the
// bytes proto.Marshal writes for it, at the size it said.
func checkEncoded(t *testing.T, name string, fr *ForwardFrame) {
	t.Helper()
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(fr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sf := sendFrameOf(t, fr)
	size, ok := sf.EncodedSize()
	if !ok {
		t.Fatalf("%s: EncodedSize refused it", name)
	}
	got := sf.AppendEncoded([]byte("prefix"))
	if size != len(want) || !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
		t.Errorf("%s: got size %d and %x, want %d and %x", name, size, got, len(want), want)
	}
}

// TestSendFrame_AppendEncoded_sameAsProto: the frames members send, and
// one with every field at a large value, encode as proto.Marshal encodes
// the ForwardFrame of the same batches; so does a batch emptied by Reset
// and filled again, with an Id set after its messages were added.
func TestSendFrame_AppendEncoded_sameAsProto(t *testing.T) {
	for i, fr := range sampleFrames() {
		checkEncoded(t, fmt.Sprintf("frame %d", i), fr)
	}
	big := &ForwardBatch{Id: 1<<64 - 1, Kind: ForwardKind_RESET, Traceparent: "tp", Queue: "q", Seqs: []uint64{0, 1<<64 - 1}, Boot: "é", Puts: true,
		BackupOf: 1<<64 - 1, BackupBoot: "ü", Full: true,
		Messages: []*QueueMessage{{Queue: "q", Tail: "t", Value: bytes.Repeat([]byte("v"), 200), Origin: 1<<64 - 1, N: 1 << 35, Seq: 127, Consumer: "c", Attempts: -1, Batch: 1<<32 - 1}}}
	checkEncoded(t, "every field", &ForwardFrame{Batches: []*ForwardBatch{big, {}}})

	b, _ := sendBatchOf(big)
	b.Reset()
	if b.Len() != 0 || b.Bytes() != 0 || b.Cap() == 0 {
		t.Fatalf("after Reset: %d messages of %d bytes, buffer of %d; want none, none, kept", b.Len(), b.Bytes(), b.Cap())
	}
	again := &ForwardBatch{Puts: true, Messages: []*QueueMessage{{Queue: "ch:e", Tail: "k1", Value: []byte(`{"a":1}`), Origin: 3, N: 4}, {Queue: "ch:e", Tail: "k2", Value: []byte(`{}`), Origin: 3, N: 5}}}
	for _, m := range again.Messages {
		b.AddMessage(m, false)
	}
	b.Head.Puts = true
	b.Head.Id, again.Id = 42, 42
	if b.Len() != 2 || b.Bytes() != len(`{"a":1}`)+len(`{}`)+4 {
		t.Errorf("filled again: %d messages of %d bytes, want 2 of %d", b.Len(), b.Bytes(), len(`{"a":1}`)+len(`{}`)+4)
	}
	want, err := proto.Marshal(&ForwardFrame{Batches: []*ForwardBatch{again}})
	if err != nil {
		t.Fatal(err)
	}
	if got := (&SendFrame{Batches: []*SendBatch{b}}).AppendEncoded(nil); !bytes.Equal(got, want) {
		t.Errorf("filled again: got %x, want %x", got, want)
	}
}

// TestSendBatch_refuses: what would not be written as proto.Marshal
// writes it is refused: a message with a string that is not UTF-8
// (which proto.Marshal refuses) or unknown fields, adding nothing; a
// head with such a string, with messages of its own or unknown fields,
// which makes the frame's EncodedSize refuse it.
func TestSendBatch_refuses(t *testing.T) {
	unknown := &QueueMessage{Queue: "q"}
	unknown.ProtoReflect().SetUnknown([]byte{0x78, 0x01}) // field 15, varint 1
	msgs := map[string]*QueueMessage{
		"tail not UTF-8":     {Queue: "q", Tail: "\xff"},
		"consumer not UTF-8": {Queue: "q", Tail: "t", Consumer: "\xc3"},
		"queue not UTF-8":    {Queue: "\xff", Tail: "t"},
		"unknown fields":     unknown,
	}
	for name, m := range msgs {
		b := &SendBatch{}
		if b.AddMessage(m, false) || b.Len() != 0 || len(b.msgs) != 0 {
			t.Errorf("%s: AddMessage took it, want it refused", name)
		}
	}
	if b := (&SendBatch{}); !b.AddMessage(&QueueMessage{Queue: "\xff", Tail: "t"}, true) {
		t.Errorf("a queue name said to be checked was checked again")
	}
	heads := map[string]func(*ForwardBatch){
		"boot not UTF-8":        func(h *ForwardBatch) { h.Boot = "\xc3" },
		"backup boot not UTF-8": func(h *ForwardBatch) { h.BackupBoot = "\xc3" },
		"queue not UTF-8":       func(h *ForwardBatch) { h.Queue = "\xff" },
		"traceparent not UTF-8": func(h *ForwardBatch) { h.Traceparent = "\xff" },
		"messages of its own":   func(h *ForwardBatch) { h.Messages = []*QueueMessage{{Queue: "q"}} },
		"unknown fields":        func(h *ForwardBatch) { h.ProtoReflect().SetUnknown([]byte{0x78, 0x01}) },
	}
	for name, set := range heads {
		b := &SendBatch{}
		set(&b.Head)
		if b.Encodable() {
			t.Errorf("%s: Encodable, want not", name)
		}
		if _, ok := (&SendFrame{Batches: []*SendBatch{{}, b}}).EncodedSize(); ok {
			t.Errorf("%s: the frame's EncodedSize took it", name)
		}
	}
}

// TestSendBatch_Grow: Grow keeps what was added and makes room for as
// many more bytes without another buffer.
func TestSendBatch_Grow(t *testing.T) {
	b := &SendBatch{}
	b.AddMessage(&QueueMessage{Queue: "q", Tail: "a", Value: []byte("1")}, false)
	before := append([]byte(nil), b.msgs...)
	b.Grow(1000)
	if !bytes.Equal(b.msgs, before) || b.Cap() < len(before)+1000 {
		t.Fatalf("after Grow(1000): %x in a buffer of %d, want %x in at least %d", b.msgs, b.Cap(), before, len(before)+1000)
	}
	buf := &b.msgs[:1][0]
	b.AddMessage(&QueueMessage{Queue: "q", Tail: "b", Value: bytes.Repeat([]byte("v"), 900)}, true)
	if &b.msgs[0] != buf {
		t.Errorf("adding what Grow made room for took another buffer")
	}
}

// BenchmarkSendFrame_encode compares a txn of 128 puts of about 100
// bytes added to a SendBatch and encoded in a frame with the same
// messages made and encoded by proto.Size and proto.Marshal.
func BenchmarkSendFrame_encode(b *testing.B) {
	msgs := make([]*QueueMessage, 128)
	for i := range msgs {
		msgs[i] = &QueueMessage{Queue: "ch:bench.events", Tail: fmt.Sprintf("k%07d", i), Origin: 1<<62 + 3, N: 1<<60 + uint64(i),
			Value: fmt.Appendf(nil, `{"id":%d,"ts":"2026-12-02 06:00:00","host":"host-%03d","msg":"a row of about one hundred bytes"}`, i, i%100)}
	}
	buf := make([]byte, 0, 64<<10)
	b.Run("proto", func(b *testing.B) { // as grpc's codec would: the size, then the bytes
		b.ReportAllocs()
		fr := &ForwardFrame{Batches: []*ForwardBatch{{Id: 1, Puts: true, Messages: msgs}}}
		for b.Loop() {
			_ = proto.Size(fr)
			if _, err := (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(buf[:0], fr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SendFrame", func(b *testing.B) {
		b.ReportAllocs()
		sb := &SendBatch{}
		fr := &SendFrame{Batches: []*SendBatch{sb}}
		for b.Loop() {
			sb.Reset()
			for _, m := range msgs {
				sb.AddMessage(m, true)
			}
			sb.Head.Id, sb.Head.Puts = 1, true
			if _, ok := fr.EncodedSize(); !ok {
				b.Fatal("refused")
			}
			buf = fr.AppendEncoded(buf[:0])
		}
	})
}
