package peerpb

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// SendBatch is a ForwardBatch as a member sends it: Head holds every
// field but the messages, which are encoded as they are added
// (AddMessage) into one buffer of wire form, the bytes proto.Marshal
// writes for them. A forwarding member makes a batch of a txn's puts
// this way, without a QueueMessage for each put, and its forward stream
// then writes the batches' buffers in a frame (SendFrame) without
// walking their messages again. Head.Messages stays empty; Head.Id may
// be set until the batch is encoded in a frame.
type SendBatch struct {
	Head  ForwardBatch
	msgs  []byte // field 2 of ForwardBatch, once per message added
	count int
	bytes int // values and tails
}

// Reset empties b for another batch, keeping its buffer.
func (b *SendBatch) Reset() {
	b.Head.Reset()
	b.msgs, b.count, b.bytes = b.msgs[:0], 0, 0
}

// Grow makes room for n more bytes of messages without a new buffer.
func (b *SendBatch) Grow(n int) {
	if cap(b.msgs)-len(b.msgs) < n {
		msgs := make([]byte, len(b.msgs), len(b.msgs)+n)
		copy(msgs, b.msgs)
		b.msgs = msgs
	}
}

// Cap is the size of b's buffer of messages.
func (b *SendBatch) Cap() int { return cap(b.msgs) }

// AddMessage appends m to b, its value copied. It reports false, and
// adds nothing, when m holds what proto.Marshal would not write (a
// string that is not UTF-8, unknown fields). queueChecked says that
// m.Queue is known to be UTF-8 (the batch's messages name one queue,
// checked once).
func (b *SendBatch) AddMessage(m *QueueMessage, queueChecked bool) bool {
	if len(m.unknownFields) > 0 || !utf8.ValidString(m.Tail) || !utf8.ValidString(m.Consumer) || (!queueChecked && !utf8.ValidString(m.Queue)) {
		return false
	}
	b.msgs = append(b.msgs, tag(2, protowire.BytesType))
	b.msgs = appendUvarint(b.msgs, uint64(m.encodedSize()))
	b.msgs = m.appendEncoded(b.msgs)
	b.count++
	b.bytes += len(m.Value) + len(m.Tail)
	return true
}

// Len is the number of messages added.
func (b *SendBatch) Len() int { return b.count }

// Bytes is the bytes of the values and tails added.
func (b *SendBatch) Bytes() int { return b.bytes }

// Encodable reports whether b's head is written as proto.Marshal would
// write it: no unknown fields, no message, strings of UTF-8. A frame of
// batches that are not is not sent (SendFrame).
func (b *SendBatch) Encodable() bool {
	h := &b.Head
	return len(h.unknownFields) == 0 && len(h.Messages) == 0 && utf8.ValidString(h.Traceparent) && utf8.ValidString(h.Queue) && utf8.ValidString(h.Boot) &&
		utf8.ValidString(h.BackupBoot)
}

// size is the length of b's wire form.
func (b *SendBatch) size() int {
	h := &b.Head
	n := sizeVarint(h.Id) + len(b.msgs)
	n += sizeString(h.Traceparent) + sizeVarint(uint64(h.Kind)) + sizeString(h.Queue)
	if len(h.Seqs) > 0 {
		n += 1 + protowire.SizeBytes(packedSize(h.Seqs))
	}
	n += sizeString(h.Boot)
	if h.Puts {
		n += 2
	}
	n += sizeVarint(h.BackupOf) + sizeString(h.BackupBoot)
	if h.Full {
		n += 2
	}
	return n
}

// appendEncoded appends b's wire form, in field order as proto.Marshal
// writes it.
func (b *SendBatch) appendEncoded(out []byte) []byte {
	h := &b.Head
	out = appendVarint(out, 1, h.Id)
	out = append(out, b.msgs...)
	out = appendString(out, 3, h.Traceparent)
	out = appendVarint(out, 4, uint64(h.Kind))
	out = appendString(out, 5, h.Queue)
	if len(h.Seqs) > 0 {
		out = protowire.AppendTag(out, 6, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(packedSize(h.Seqs)))
		for _, s := range h.Seqs {
			out = protowire.AppendVarint(out, s)
		}
	}
	out = appendString(out, 7, h.Boot)
	if h.Puts {
		out = append(out, 8<<3|byte(protowire.VarintType), 1)
	}
	out = appendVarint(out, 9, h.BackupOf)
	out = appendString(out, 10, h.BackupBoot)
	if h.Full {
		out = append(out, 11<<3|byte(protowire.VarintType), 1)
	}
	return out
}

// SendFrame is a ForwardFrame of SendBatches, which encodes itself as
// proto.Marshal encodes the ForwardFrame of the same batches: what a
// member's forward stream sends. Its batches must be Encodable.
type SendFrame struct {
	Batches []*SendBatch
}

// EncodedSize returns the length of f's wire form, and false when a
// batch is not Encodable: the frame must not be sent then.
func (f *SendFrame) EncodedSize() (int, bool) {
	n := 0
	for _, b := range f.Batches {
		if !b.Encodable() {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(b.size())
	}
	return n, true
}

// AppendEncoded appends f's wire form to out, for a frame whose
// EncodedSize reported true.
func (f *SendFrame) AppendEncoded(out []byte) []byte {
	for _, b := range f.Batches {
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(b.size()))
		out = b.appendEncoded(out)
	}
	return out
}

func (x *QueueMessage) encodedSize() int {
	n := sizeString(x.Queue) + sizeString(x.Tail)
	if len(x.Value) > 0 {
		n += 1 + protowire.SizeBytes(len(x.Value))
	}
	return n + sizeVarint(x.Origin) + sizeVarint(x.N) + sizeVarint(x.Seq) + sizeString(x.Consumer) + sizeVarint(uint64(x.Attempts)) + sizeVarint(uint64(x.Batch))
}

func (x *QueueMessage) appendEncoded(b []byte) []byte {
	b = appendString(b, 1, x.Queue)
	b = appendString(b, 2, x.Tail)
	if len(x.Value) > 0 {
		b = append(b, tag(3, protowire.BytesType))
		b = appendUvarint(b, uint64(len(x.Value)))
		b = append(b, x.Value...)
	}
	b = appendVarint(b, 4, x.Origin)
	b = appendVarint(b, 5, x.N)
	b = appendVarint(b, 6, x.Seq)
	b = appendString(b, 7, x.Consumer)
	b = appendVarint(b, 8, uint64(x.Attempts))
	return appendVarint(b, 9, uint64(x.Batch))
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

// tag is the one byte of a field's tag, for a field number below 16.
func tag(num protowire.Number, typ protowire.Type) byte {
	return byte(num)<<3 | byte(typ)
}

// appendUvarint is protowire.AppendVarint, the one- and two-byte lengths
// of a message's fields written inline: a frame writes several for each
// of its messages.
func appendUvarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<7:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, byte(v)|0x80, byte(v>>7))
	}
	return protowire.AppendVarint(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendUvarint(append(b, tag(num, protowire.VarintType)), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, tag(num, protowire.BytesType))
	b = appendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
