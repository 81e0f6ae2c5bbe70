package kv

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// decodePutTxn decodes b into r, as proto.Unmarshal would, when b is a
// txn of puts only: no compare, no failure branch, success ops that are
// each one put of at most a key and a value, and nothing else. It
// reports false, leaving r as it was, for any other message, which
// proto.Unmarshal decodes.
//
// The keys and values are views of b (capped, so an append copies), not
// copies: the caller hands b over to r. protoCodec.Unmarshal copies each
// txn out of gRPC's buffers into a slice of its own for it, so a batch
// produce's bytes are copied once on their way in, not twice. A value
// kept in memory keeps that slice, keys and framing included (about a
// tenth more than the values alone for the bench's rows); with a data
// dir a queued value is its record in the queue log instead, and the
// KV service reuses b and a once the queues say so (txnCall).
//
// A batch produce is such a txn, and proto.Unmarshal makes five
// allocations per put (the op, its oneof wrapper, the put, its key and
// value); this makes none when a's arrays are long enough, else four:
// the ops, wrappers and puts each in one slice, and the pointers to the
// ops.
func decodePutTxn(b []byte, r *pb.TxnRequest, a *putTxnArena) bool {
	n := a.fill(b, cap(a.puts))
	if n > cap(a.puts) { // more puts than the arrays hold: count, then fill arrays that do
		n = 0
		for rest := b; len(rest) > 0; n++ {
			op, l := successOp(rest)
			if _, _, ok := putOp(op); l < 0 || !ok {
				n = -1
				break
			}
			rest = rest[l:]
		}
		if n > 0 {
			n = a.fill(b, n)
		}
	}
	if n <= 0 {
		a.clear()
		return false
	}
	a.reserve(n)
	r.Reset()
	r.Success = a.success
	return true
}

// fill decodes the puts of b into a's arrays, which it makes max long,
// and sets a.size to proto.Size of the txn: it returns how many puts
// b holds, max+1 when it holds more (the arrays then hold the first
// max), and -1 when b is not a batch produce. In one pass: a reused
// arena's arrays hold the next call's puts, so most calls read b once.
func (a *putTxnArena) fill(b []byte, max int) int {
	a.reserve(max)
	ops, wraps, puts := a.ops, a.wraps, a.puts
	size, i := 0, 0
	for rest := b; len(rest) > 0; i++ {
		op, l := successOp(rest)
		if l < 0 {
			return -1
		}
		key, value, ok := putOp(op)
		if !ok {
			return -1
		}
		if i == max {
			return max + 1
		}
		puts[i].Key, puts[i].Value = view(key), view(value)
		wraps[i].RequestPut = &puts[i]
		ops[i].Request = &wraps[i]
		a.success[i] = &ops[i]
		size += putOpSize(len(key), len(value))
		rest = rest[l:]
	}
	a.size = size
	return i
}

// successOp reads one success op (field 2 of TxnRequest) from the start
// of b: its bytes, and the length it took; -1 when b starts with
// anything else.
func successOp(b []byte) ([]byte, int) {
	num, typ, l := protowire.ConsumeTag(b)
	if l < 0 || num != 2 || typ != protowire.BytesType {
		return nil, -1
	}
	op, m := protowire.ConsumeBytes(b[l:])
	if m < 0 {
		return nil, -1
	}
	return op, l + m
}

// putOp returns the key and value of a RequestOp that is one put
// (field 2) whose only fields are a key (1) and a value (2), each at
// most once.
func putOp(op []byte) (key, value []byte, ok bool) {
	num, typ, l := protowire.ConsumeTag(op)
	if l < 0 || num != 2 || typ != protowire.BytesType {
		return nil, nil, false
	}
	put, m := protowire.ConsumeBytes(op[l:])
	if m < 0 || l+m != len(op) {
		return nil, nil, false
	}
	var seen [3]bool
	for len(put) > 0 {
		num, typ, l := protowire.ConsumeTag(put)
		if l < 0 || typ != protowire.BytesType || (num != 1 && num != 2) || seen[num] {
			return nil, nil, false
		}
		seen[num] = true
		v, m := protowire.ConsumeBytes(put[l:])
		if m < 0 {
			return nil, nil, false
		}
		if num == 1 {
			key = v
		} else {
			value = v
		}
		put = put[l+m:]
	}
	return key, value, true
}

// view returns v with its capacity cut to its length (nil when v is
// empty, as proto.Unmarshal leaves an empty bytes field).
func view(v []byte) []byte {
	if len(v) == 0 {
		return nil
	}
	return v[:len(v):len(v)]
}

// putTxnResponseSize returns the encoded size of r when it answers a txn
// of puts only, as produceTxn does: every response a put with no
// previous key-value and at most a header, no unknown fields anywhere.
// It reports false for any other response, which proto.Marshal encodes.
//
// proto.Size and proto.Marshal walk four messages per put of a batch
// produce's answer; appendPutTxnResponse writes the same bytes directly.
func putTxnResponseSize(r *pb.TxnResponse) (int, bool) {
	if len(r.Responses) == 0 || len(r.ProtoReflect().GetUnknown()) != 0 {
		return 0, false
	}
	n := 0
	if r.Header != nil {
		hs, ok := headerSize(r.Header)
		if !ok {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(hs)
	}
	if r.Succeeded {
		n += 2
	}
	for _, op := range r.Responses {
		ps, ok := putResponseSize(op)
		if !ok {
			return 0, false
		}
		n += 1 + protowire.SizeBytes(1+protowire.SizeBytes(ps))
	}
	return n, true
}

// putResponseSize returns the size of the PutResponse op holds, when it
// holds one with at most a header.
func putResponseSize(op *pb.ResponseOp) (int, bool) {
	w, ok := op.Response.(*pb.ResponseOp_ResponsePut)
	if !ok || w.ResponsePut == nil || w.ResponsePut.PrevKv != nil ||
		len(op.ProtoReflect().GetUnknown()) != 0 || len(w.ResponsePut.ProtoReflect().GetUnknown()) != 0 {
		return 0, false
	}
	if h := w.ResponsePut.Header; h != nil {
		hs, ok := headerSize(h)
		return 1 + protowire.SizeBytes(hs), ok
	}
	return 0, true
}

// headerSize returns the size of h, when it has no unknown fields.
func headerSize(h *pb.ResponseHeader) (int, bool) {
	if len(h.ProtoReflect().GetUnknown()) != 0 {
		return 0, false
	}
	return headerLen(h), true
}

// headerLen is the size of h without its unknown fields.
func headerLen(h *pb.ResponseHeader) int {
	n := 0
	for _, v := range [...]uint64{h.ClusterId, h.MemberId, uint64(h.Revision), h.RaftTerm} {
		if v != 0 {
			n += 1 + protowire.SizeVarint(v)
		}
	}
	return n
}

// appendPutTxnResponse appends r, for which putTxnResponseSize reported
// true, to b, as proto.Marshal encodes it.
func appendPutTxnResponse(b []byte, r *pb.TxnResponse) []byte {
	if r.Header != nil {
		b = appendHeader(b, 1, r.Header)
	}
	if r.Succeeded {
		b = append(b, 2<<3|byte(protowire.VarintType), 1)
	}
	for _, op := range r.Responses {
		put := op.Response.(*pb.ResponseOp_ResponsePut).ResponsePut
		ps := 0
		if put.Header != nil {
			ps = 1 + protowire.SizeBytes(headerLen(put.Header))
		}
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(1+protowire.SizeBytes(ps)))
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(ps))
		if put.Header != nil {
			b = appendHeader(b, 1, put.Header)
		}
	}
	return b
}

// appendHeader appends h as field num.
func appendHeader(b []byte, num protowire.Number, h *pb.ResponseHeader) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(headerLen(h)))
	for i, v := range [...]uint64{h.ClusterId, h.MemberId, uint64(h.Revision), h.RaftTerm} {
		if v != 0 {
			b = protowire.AppendTag(b, protowire.Number(i+1), protowire.VarintType)
			b = protowire.AppendVarint(b, v)
		}
	}
	return b
}

// putTxnRequestSize returns proto.Size(r) when r is a txn of puts only,
// as decodePutTxn takes them: no compare, no failure branch, puts of at
// most a key and a value, no unknown fields. It reports false for any
// other txn. requestSizeLimit sizes every request, and proto.Size walks
// three messages per put of a batch produce.
func putTxnRequestSize(r *pb.TxnRequest) (int, bool) {
	if len(r.Compare) != 0 || len(r.Failure) != 0 || len(r.ProtoReflect().GetUnknown()) != 0 {
		return 0, false
	}
	n := 0
	for _, op := range r.Success {
		w, ok := op.Request.(*pb.RequestOp_RequestPut)
		if !ok || w.RequestPut == nil || len(op.ProtoReflect().GetUnknown()) != 0 {
			return 0, false
		}
		p := w.RequestPut
		if p.Lease != 0 || p.PrevKv || p.IgnoreValue || p.IgnoreLease || len(p.ProtoReflect().GetUnknown()) != 0 {
			return 0, false
		}
		n += putOpSize(len(p.Key), len(p.Value))
	}
	return n, true
}

// putOpSize is the bytes a success op of a txn takes (its tag and
// length included) when it is one put of a key and a value of these
// lengths and nothing else, as proto.Size counts it.
func putOpSize(key, value int) int {
	ps := 0
	if key > 0 {
		ps += 1 + protowire.SizeBytes(key)
	}
	if value > 0 {
		ps += 1 + protowire.SizeBytes(value)
	}
	return 1 + protowire.SizeBytes(1+protowire.SizeBytes(ps))
}
