package kv

import (
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"chute/gossip/peer/peerpb"
)

// protoCodec is grpc's proto codec, except that messages are encoded into
// and received ones gathered in buffers of pool, not of grpc's default
// pool, which clears each buffer it hands out (see bufferPool).
type protoCodec struct {
	pool mem.BufferPool
	txns *sync.Pool // of *putTxnArena; nil: batch produces are not decoded into reused memory
}

var _ encoding.CodecV2 = protoCodec{}

// Marshal encodes v as grpc's codec does, into a buffer of pool when it
// is large enough to be worth pooling.
func (c protoCodec) Marshal(v any) (mem.BufferSlice, error) {
	// A batch produce's answer, and a forward frame. The sizes are
	// checked, so that a mistake in them costs the fast path, never a
	// bad message.
	e, ok := v.(appendEncoder)
	if r, isTxn := v.(*pb.TxnResponse); isTxn {
		e, ok = putTxnAnswer{r}, true
	}
	if ok {
		if out, ok := c.encodeSized(e); ok {
			return out, nil
		}
	}
	m, err := messageOf(v)
	if err != nil {
		return nil, err
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // the size was just computed
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := c.pool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil { // writes size bytes over the old ones
		c.pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, nil
}

// encodeSized returns e encoded by itself, into a buffer of pool when
// it is large enough to be worth pooling, and false when e does not
// encode itself or wrote another size than it said.
func (c protoCodec) encodeSized(e appendEncoder) (mem.BufferSlice, bool) {
	size, ok := e.EncodedSize()
	if !ok {
		return nil, false
	}
	if mem.IsBelowBufferPoolingThreshold(size) {
		if b := e.AppendEncoded(make([]byte, 0, size)); len(b) == size {
			return mem.BufferSlice{mem.SliceBuffer(b)}, true
		}
		return nil, false
	}
	buf := c.pool.Get(size)
	if b := e.AppendEncoded((*buf)[:0]); len(b) == size && &b[0] == &(*buf)[0] { // written over the old bytes
		return mem.BufferSlice{mem.NewBuffer(buf, c.pool)}, true
	}
	c.pool.Put(buf)
	return nil, false
}

// putTxnAnswer encodes a batch produce's answer (putTxnResponseSize).
type putTxnAnswer struct{ r *pb.TxnResponse }

func (a putTxnAnswer) EncodedSize() (int, bool)      { return putTxnResponseSize(a.r) }
func (a putTxnAnswer) AppendEncoded(b []byte) []byte { return appendPutTxnResponse(b, a.r) }

func messageOf(v any) (proto.Message, error) {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v), nil
	case protoadapt.MessageV2:
		return v, nil
	}
	return nil, fmt.Errorf("kv: %T is not a proto message", v)
}

func (c protoCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if call, ok := v.(*txnCall); ok {
		return c.unmarshalTxnCall(data, call)
	}
	if u, ok := v.(pooledUnmarshaler); ok {
		// One copy, into a buffer of pool that the message keeps until
		// its receiver is done with it.
		buf := data.MaterializeToBuffer(c.pool)
		if err := u.UnmarshalPooled(buf); err != nil {
			buf.Free()
			return err
		}
		return nil
	}
	m, err := messageOf(v)
	if err != nil {
		return err
	}
	if r, ok := v.(*pb.TxnRequest); ok {
		// A batch produce is decoded in few allocations, its keys and
		// values views of this copy (decodePutTxn).
		b := data.Materialize()
		if decodePutTxn(b, r, &putTxnArena{}) {
			return nil
		}
		return proto.Unmarshal(b, m)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	if cm, ok := v.(peerpb.Counted); ok {
		if err := peerpb.CheckCount(buf.ReadOnlyData(), cm.CountedFields()); err != nil {
			return err
		}
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m) // copies what it keeps
}

// appendEncoder is a message that encodes itself, as proto.Marshal
// would, faster: peerpb.SendFrame, the bulk of what a forwarding member
// sends. EncodedSize reports false for a message it does not encode,
// which proto.Marshal then does (a SendFrame, not a proto message, fails
// then: its sender checks its batches first).
type appendEncoder interface {
	EncodedSize() (int, bool)
	AppendEncoded(b []byte) []byte
}

// pooledUnmarshaler is a message that decodes itself, faster than
// proto.Unmarshal, from a buffer it takes and gives back to the pool
// when done with it: peerpb.RecvFrame, the bulk of what the peer link
// receives.
type pooledUnmarshaler interface {
	UnmarshalPooled(buf mem.Buffer) error
}

// Name is grpc's proto codec's: the content subtype clients send.
func (protoCodec) Name() string { return protoenc.Name }

// MessageBufferDialOptions are MessageBufferOptions for a client
// connection (dispatch's forward streams to other members).
func MessageBufferDialOptions() []grpc.DialOption {
	pool := &bufferPool{}
	return []grpc.DialOption{experimental.WithBufferPool(pool), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(protoCodec{pool: pool}))}
}

// MessageBufferOptions are the gRPC server options that take messages'
// buffers from a pool that does not clear them, and decode received
// messages from it (see bufferPool): the etcd API server uses them, and
// the peer listener can (cmd/chute hands them to gossip/peer's server,
// which takes dispatch's forward frames).
func MessageBufferOptions() []grpc.ServerOption {
	return messageBufferOptions(false)
}

// messageBufferOptions is MessageBufferOptions; with reuseTxns the codec
// decodes batch produces into memory it reuses (txnCall).
func messageBufferOptions(reuseTxns bool) []grpc.ServerOption {
	c := protoCodec{pool: &bufferPool{}}
	if reuseTxns {
		c.txns = &sync.Pool{}
	}
	return []grpc.ServerOption{experimental.BufferPool(c.pool), grpc.ForceServerCodecV2(c)}
}
