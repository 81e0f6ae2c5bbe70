package kv

import (
	"errors"
	"runtime"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"chute/gossip/peer/peerpb"
)

// TestCodec_countsBeforeDecode: the peer link's codec refuses a Propose
// or a Hold whose commands or messages are past their bound before it
// makes them: 2^20 empty ones are 2 MiB on the wire, within the link's
// 64 MiB, and were 24 to 200 bytes each once decoded (raftkv and
// dispatch checked their count after); one at the bound is decoded.
func TestCodec_countsBeforeDecode(t *testing.T) {
	empties := func(n int) []byte {
		var b []byte
		for range n {
			b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), nil)
		}
		return b
	}
	c := protoCodec{pool: &bufferPool{}}
	for _, m := range []peerpb.Counted{&peerpb.ProposeRequest{}, &peerpb.HoldRequest{}} {
		most := m.CountedFields()[0].Most
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(empties(most))}, m); err != nil {
			t.Errorf("%T of %d: %v", m, most, err)
		}
		wire := empties(1 << 20)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, m)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, peerpb.ErrTooMany) {
			t.Errorf("%T of 2^20: %v, want ErrTooMany", m, err)
		}
		if made := after.TotalAlloc - before.TotalAlloc; made > 8<<20 {
			t.Errorf("refusing a %T of %d bytes made %d MB", m, len(wire), made>>20)
		}
	}
}
