package peerpb

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// EncodedSize returns the length of x's wire form as AppendEncoded
// writes it, the bytes proto.Marshal writes, and reports false when x
// holds what AppendEncoded does not write as proto.Marshal would: unknown
// fields, or a string that is not UTF-8 (which proto.Marshal refuses).
// Then the caller marshals x with proto.
//
// A frame is the bulk of what a forwarding member sends, and
// proto.Marshal walks it through reflection-built tables: about a tenth
// of a forwarding member's CPU under txn puts. EncodedSize and
// AppendEncoded walk the few fields a frame has directly.
func (x *ForwardFrame) EncodedSize() (int, bool) {
	if len(x.unknownFields) > 0 {
		return 0, false
	}
	n := 0
	for _, b := range x.Batches {
		if !b.encodable() {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(b.encodedSize())
	}
	return n, true
}

// AppendEncoded appends x's wire form to b, the bytes proto.Marshal
// writes, for a frame whose EncodedSize reported true.
func (x *ForwardFrame) AppendEncoded(b []byte) []byte {
	for _, batch := range x.Batches {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(batch.encodedSize()))
		b = batch.appendEncoded(b)
	}
	return b
}

// encodable reports whether x and its messages are written by
// appendEncoded as proto.Marshal would write them.
func (x *ForwardBatch) encodable() bool {
	if x == nil || len(x.unknownFields) > 0 || !utf8.ValidString(x.Traceparent) || !utf8.ValidString(x.Queue) || !utf8.ValidString(x.Boot) {
		return false
	}
	queue := "" // valid, and the queue of a batch's messages is mostly one string
	for _, m := range x.Messages {
		if m == nil || len(m.unknownFields) > 0 || !utf8.ValidString(m.Tail) || !utf8.ValidString(m.Consumer) {
			return false
		}
		if m.Queue != queue {
			if !utf8.ValidString(m.Queue) {
				return false
			}
			queue = m.Queue
		}
	}
	return true
}

func (x *ForwardBatch) encodedSize() int {
	n := sizeVarint(x.Id)
	for _, m := range x.Messages {
		n += 1 + protowire.SizeBytes(m.encodedSize())
	}
	n += sizeString(x.Traceparent) + sizeVarint(uint64(x.Kind)) + sizeString(x.Queue)
	if len(x.Seqs) > 0 {
		n += 1 + protowire.SizeBytes(packedSize(x.Seqs))
	}
	n += sizeString(x.Boot)
	if x.Puts {
		n += 2
	}
	return n
}

func (x *ForwardBatch) appendEncoded(b []byte) []byte {
	b = appendVarint(b, 1, x.Id)
	for _, m := range x.Messages {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(m.encodedSize()))
		b = m.appendEncoded(b)
	}
	b = appendString(b, 3, x.Traceparent)
	b = appendVarint(b, 4, uint64(x.Kind))
	b = appendString(b, 5, x.Queue)
	if len(x.Seqs) > 0 {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(packedSize(x.Seqs)))
		for _, s := range x.Seqs {
			b = protowire.AppendVarint(b, s)
		}
	}
	b = appendString(b, 7, x.Boot)
	if x.Puts {
		b = append(b, 8<<3|byte(protowire.VarintType), 1)
	}
	return b
}

func (x *QueueMessage) encodedSize() int {
	n := sizeString(x.Queue) + sizeString(x.Tail)
	if len(x.Value) > 0 {
		n += 1 + protowire.SizeBytes(len(x.Value))
	}
	return n + sizeVarint(x.Origin) + sizeVarint(x.N) + sizeVarint(x.Seq) + sizeString(x.Consumer) + sizeVarint(uint64(x.Attempts))
}

func (x *QueueMessage) appendEncoded(b []byte) []byte {
	b = appendString(b, 1, x.Queue)
	b = appendString(b, 2, x.Tail)
	if len(x.Value) > 0 {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, x.Value)
	}
	b = appendVarint(b, 4, x.Origin)
	b = appendVarint(b, 5, x.N)
	b = appendVarint(b, 6, x.Seq)
	b = appendString(b, 7, x.Consumer)
	return appendVarint(b, 8, uint64(x.Attempts))
}

// The fields of these messages have numbers below 16: each tag is one
// byte, and a proto3 field at its zero value is not written.

func sizeVarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

func sizeString(s string) int {
	if s == "" {
		return 0
	}
	return 1 + protowire.SizeBytes(len(s))
}

func packedSize(vs []uint64) int {
	n := 0
	for _, v := range vs {
		n += protowire.SizeVarint(v)
	}
	return n
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
