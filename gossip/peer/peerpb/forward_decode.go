package peerpb

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// errFrame is a ForwardFrame that does not decode.
var errFrame = errors.New("peerpb: ForwardFrame does not decode")

// Bounds of a received ForwardFrame, checked once its batches and
// messages are counted and before anything is made for them: a message
// of two bytes on the wire is a QueueMessage of about 150 in memory, so
// a frame within the peer link's 64 MiB of empty messages made gigabytes
// before the receiver's own bounds looked at it. A member packs at most
// MaxFrameBatches batches in a frame, MaxBatchMessages messages in a
// batch (dispatch's forwardFrameBatches and peerCallMessages) and
// MaxFrameSeqs numbers in a frame (dispatch's peerCallSeqs): a number of
// one byte packed is one of eight in memory, so a frame of 64 MiB of them
// made half a gigabyte.
const (
	MaxFrameBatches  = 256
	MaxBatchMessages = 4096
	MaxFrameSeqs     = 1 << 20
)

// ErrFrameBounds is wrapped by the error of a frame past MaxFrameBatches
// or MaxBatchMessages, which proto.Unmarshal would decode.
var ErrFrameBounds = errors.New("peerpb: ForwardFrame past its bounds")

// RecvFrame is a ForwardFrame as the dispatcher receives it: decoded
// from a buffer of the peer codec's pool (UnmarshalPooled), into arrays
// of batches and messages that the next frame is decoded into again once
// the receiver is done with this one (Done). The values decoded are views
// of the buffer, so a busy dispatcher receives megabytes a second without
// a fresh buffer and arrays for each frame, which the collector had to
// clear and scan; tails and queue names are made anew for each frame,
// for the queues keep them. Another proto codec decodes into the
// embedded frame as it would into any.
type RecvFrame struct {
	ForwardFrame
	buf   mem.Buffer // holds the frame's bytes; nil: none held
	slabs frameArena
}

// frameArena is the memory a RecvFrame decodes its batches and messages
// into, kept from frame to frame.
type frameArena struct {
	batches []ForwardBatch
	bptrs   []*ForwardBatch
	msgs    []QueueMessage
	ptrs    []*QueueMessage
	counts  []int // of each batch's messages, from countFrame
}

// UnmarshalPooled decodes buf, a ForwardFrame's wire form, into r,
// taking buf on success (on failure the caller keeps it). It decodes
// what proto.Unmarshal decodes and refuses what it refuses (a string
// that is not UTF-8 included), except that unknown fields are skipped
// rather than kept. A frame still held (Done not called) is let go as
// Done(false) would.
func (r *RecvFrame) UnmarshalPooled(buf mem.Buffer) error {
	if r.buf != nil {
		r.Done(false)
	}
	if err := r.decode(buf.ReadOnlyData()); err != nil {
		r.ForwardFrame.Reset()
		return err
	}
	r.buf = buf
	return nil
}

// Done ends the frame: with reuse, nothing refers to its batches,
// messages or values any more, and its buffer goes back to the pool and
// its arrays are decoded into again; without, something may (a value
// kept as it came, a batch kept whole), and both are left to the
// collector. The frame is empty afterwards.
func (r *RecvFrame) Done(reuse bool) {
	if r.buf != nil && reuse {
		r.buf.Free()
	}
	if !reuse {
		r.slabs = frameArena{}
	}
	r.buf = nil
	r.ForwardFrame.Reset()
}

// decode decodes b into r's frame, whose values are views of b. A queue
// name repeated message after message, batch after batch, is kept once,
// where proto.Unmarshal allocates each; the tails are kept in one buffer
// of their own, a few bytes a message.
func (r *RecvFrame) decode(b []byte) error {
	x := &r.ForwardFrame
	x.Reset()
	counts, nm, err := countFrame(b, r.slabs.counts[:0])
	r.slabs.counts = counts
	if err != nil {
		return err
	}
	nb := len(counts)
	if nb > MaxFrameBatches {
		return fmt.Errorf("%w: %d batches, at most %d", ErrFrameBounds, nb, MaxFrameBatches)
	}
	for _, c := range counts {
		if c > MaxBatchMessages {
			return fmt.Errorf("%w: a batch of %d messages, at most %d", ErrFrameBounds, c, MaxBatchMessages)
		}
	}
	a := r.slabs.reserve(nb, nm)
	if nb > 0 {
		x.Batches = a.bptrs[:0:nb]
	}
	d := &frameSlabs{msgs: a.msgs, ptrs: a.ptrs, frame: len(b)}
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := consumeBytes(b)
			if n < 0 {
				return errFrame
			}
			batch := &a.batches[len(x.Batches)]
			if err := batch.unmarshalOwned(v, d, counts[len(x.Batches)]); err != nil {
				return err
			}
			x.Batches = append(x.Batches, batch)
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return errFrame
		}
		b = b[n:]
	}
	return nil
}

// reserve returns the arena with nb batches and nm messages, zero: its
// own arrays, cleared, when long enough, else new ones it keeps.
func (a *frameArena) reserve(nb, nm int) *frameArena {
	if cap(a.batches) < nb {
		a.batches, a.bptrs = make([]ForwardBatch, nb), make([]*ForwardBatch, nb)
	} else {
		a.batches, a.bptrs = a.batches[:nb], a.bptrs[:nb]
		clear(a.batches)
	}
	if cap(a.msgs) < nm {
		a.msgs, a.ptrs = make([]QueueMessage, nm), make([]*QueueMessage, nm)
	} else {
		a.msgs, a.ptrs = a.msgs[:nm], a.ptrs[:nm]
		clear(a.msgs)
	}
	return a
}

// frameSlabs are the messages of a frame's batches, made at once, the
// buffer their tails are kept in, and the last queue name decoded, kept
// for the next message.
type frameSlabs struct {
	msgs  []QueueMessage
	ptrs  []*QueueMessage // ptrs[i] is &msgs[i] once decoded
	next  int             // the first not taken by a batch
	tails []byte          // appended to only: a tail is a view of its bytes
	frame int             // the bytes of the frame
	queue string
	seqs  int // numbers decoded in the frame's batches
}

// addSeqs counts n more numbers of the frame, refused past MaxFrameSeqs
// before they are made.
func (d *frameSlabs) addSeqs(n int) error {
	if d.seqs += n; d.seqs > MaxFrameSeqs {
		return fmt.Errorf("%w: %d numbers or more, at most %d", ErrFrameBounds, d.seqs, MaxFrameSeqs)
	}
	return nil
}

// tail returns v as a string kept in d.tails, made at the first tail
// with room for as long a tail of every message of the frame. When it is
// full the next tails go in a new buffer twice as large; the strings
// taken keep the old one. No buffer is larger than the frame, which
// holds every tail.
func (d *frameSlabs) tail(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if cap(d.tails)-len(d.tails) < len(v) {
		n := min(max(len(v)*len(d.msgs), 2*cap(d.tails)), d.frame)
		d.tails = make([]byte, 0, max(n, len(v)))
	}
	start := len(d.tails)
	d.tails = append(d.tails, v...)
	return unsafe.String(&d.tails[start], len(v))
}

// countFrame appends to counts how many messages each batch of a
// ForwardFrame's wire form holds, in order, and returns them and their
// sum, so that the batches and messages are made at once.
func countFrame(b []byte, counts []int) (_ []int, msgs int, err error) {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return counts, 0, errFrame
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := consumeBytes(b)
			if n < 0 {
				return counts, 0, errFrame
			}
			m, err := countMessages(v)
			if err != nil {
				return counts, 0, err
			}
			counts, msgs = append(counts, m), msgs+m
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return counts, 0, errFrame
		}
		b = b[n:]
	}
	return counts, msgs, nil
}

// unmarshalOwned decodes a ForwardBatch of msgs messages (countMessages)
// into x, which is new, its messages into the next of d's.
func (x *ForwardBatch) unmarshalOwned(b []byte, d *frameSlabs, msgs int) error {
	if msgs > 0 {
		x.Messages = d.ptrs[d.next : d.next : d.next+msgs]
	}
	slab := d.msgs[d.next : d.next+msgs]
	d.next += msgs
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		switch {
		case num == 2 && typ == protowire.BytesType:
			v, n := consumeBytes(b)
			if n < 0 {
				return errFrame
			}
			m := &slab[len(x.Messages)]
			if err := m.unmarshalOwned(v, d); err != nil {
				return err
			}
			x.Messages = append(x.Messages, m)
			b = b[n:]
		case num == 6 && typ == protowire.BytesType: // seqs, packed
			v, n := consumeBytes(b)
			if n < 0 {
				return errFrame
			}
			count := 0 // a varint ends at each byte below 0x80
			for _, c := range v {
				if c < 0x80 {
					count++
				}
			}
			if err := d.addSeqs(count); err != nil {
				return err
			}
			x.Seqs = slices.Grow(x.Seqs, count)
			for len(v) > 0 {
				s, k := consumeVarint(v)
				if k < 0 {
					return errFrame
				}
				x.Seqs = append(x.Seqs, s)
				v = v[k:]
			}
			b = b[n:]
		case (num == 1 || num == 4 || num == 6 || num == 8 || num == 9 || num == 11) && typ == protowire.VarintType:
			v, n := consumeVarint(b)
			if n < 0 {
				return errFrame
			}
			switch num {
			case 1:
				x.Id = v
			case 4:
				x.Kind = ForwardKind(int32(v))
			case 6:
				if err := d.addSeqs(1); err != nil {
					return err
				}
				x.Seqs = append(x.Seqs, v)
			case 8:
				x.Puts = v != 0
			case 9:
				x.BackupOf = v
			case 11:
				x.Full = v != 0
			}
			b = b[n:]
		case (num == 3 || num == 5 || num == 7 || num == 10) && typ == protowire.BytesType:
			v, n := consumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return errFrame
			}
			switch num {
			case 3:
				x.Traceparent = string(v)
			case 5:
				x.Queue = string(v)
			case 7:
				x.Boot = string(v)
			case 10:
				x.BackupBoot = string(v)
			}
			b = b[n:]
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errFrame
			}
			b = b[n:]
		}
	}
	return nil
}

// countMessages returns how many messages a ForwardBatch's wire form
// holds, so that they are made at once.
func countMessages(b []byte) (int, error) {
	count := 0
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return 0, errFrame
		}
		b = b[n:]
		if typ == protowire.BytesType {
			_, n = consumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return 0, errFrame
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			count++
		}
	}
	return count, nil
}

// unmarshalOwned decodes a QueueMessage into x, which is new, from b, a
// view of the frame that the value stays a view of. d.queue is
// the last queue name decoded in the batch: a message of the same queue
// shares its string, and one of another replaces it.
func (x *QueueMessage) unmarshalOwned(b []byte, d *frameSlabs) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2 || num == 7) && typ == protowire.BytesType:
			v, n := consumeBytes(b)
			if n < 0 {
				return errFrame
			}
			switch {
			case num == 1 && string(v) == d.queue:
				x.Queue = d.queue
			case !utf8.Valid(v):
				return errFrame
			case num == 1:
				x.Queue = string(v)
				d.queue = x.Queue
			case num == 2:
				x.Tail = d.tail(v)
			default:
				x.Consumer = string(v)
			}
			b = b[n:]
		case num == 3 && typ == protowire.BytesType:
			v, n := consumeBytes(b)
			if n < 0 {
				return errFrame
			}
			x.Value = v[:len(v):len(v)]
			b = b[n:]
		case num >= 4 && num <= 9 && num != 7 && typ == protowire.VarintType:
			v, n := consumeVarint(b)
			if n < 0 {
				return errFrame
			}
			switch num {
			case 4:
				x.Origin = v
			case 5:
				x.N = v
			case 6:
				x.Seq = v
			case 8:
				x.Attempts = int64(v)
			case 9:
				x.Batch = uint32(v) // as proto.Unmarshal: a uint32 keeps the low 32 bits
			}
			b = b[n:]
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errFrame
			}
			b = b[n:]
		}
	}
	return nil
}

// consumeTag is protowire.ConsumeTag, refusing a field number that
// proto.Unmarshal refuses too. A tag of one byte (every field a frame
// has) is read inline.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	if len(b) > 0 && b[0] < 0x80 {
		if b[0]>>3 == 0 {
			return 0, 0, -1
		}
		return protowire.Number(b[0] >> 3), protowire.Type(b[0] & 7), 1
	}
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || !num.IsValid() {
		return 0, 0, -1
	}
	return num, typ, n
}

// consumeVarint is protowire.ConsumeVarint, a varint of one byte read
// inline.
func consumeVarint(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return protowire.ConsumeVarint(b)
}

// consumeBytes is protowire.ConsumeBytes, a length of one or two bytes
// (most fields of a frame's messages) read inline.
func consumeBytes(b []byte) ([]byte, int) {
	var n, k int
	switch {
	case len(b) > 0 && b[0] < 0x80:
		n, k = int(b[0]), 1
	case len(b) > 1 && b[1] < 0x80:
		n, k = int(b[0]&0x7f)|int(b[1])<<7, 2
	default:
		return protowire.ConsumeBytes(b)
	}
	if n > len(b)-k {
		return nil, -1
	}
	return b[k : k+n], k + n
}
