package kv

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// protoCodec is grpc's proto codec, except that a received message is
// gathered into a buffer of pool, not of grpc's default pool, which clears
// each buffer it hands out (see bufferPool). Marshalling is grpc's own.
type protoCodec struct {
	base encoding.CodecV2 // grpc's "proto" codec
	pool mem.BufferPool
}

var _ encoding.CodecV2 = protoCodec{}

func newProtoCodec(pool mem.BufferPool) (protoCodec, error) {
	base := encoding.GetCodecV2("proto")
	if base == nil {
		return protoCodec{}, fmt.Errorf("kv: grpc has no proto codec")
	}
	return protoCodec{base: base, pool: pool}, nil
}

func (c protoCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c protoCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var m proto.Message
	switch v := v.(type) {
	case protoadapt.MessageV1:
		m = protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		m = v
	default:
		return fmt.Errorf("kv: cannot unmarshal into %T, want a proto message", v)
	}
	buf := data.MaterializeToBuffer(c.pool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m) // copies what it keeps
}

func (c protoCodec) Name() string { return c.base.Name() }
