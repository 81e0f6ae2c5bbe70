package kv

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/mem"
)

func TestBufferPool_GetPut(t *testing.T) {
	var p bufferPool
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 33_000, 1 << 22, 1<<22 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		if c := cap(*b); n <= 1<<maxPoolShift && (c < n || c&(c-1) != 0 || c < 1<<minPoolShift) {
			t.Fatalf("Get(%d): capacity %d, want a power of two from %d on", n, c, 1<<minPoolShift)
		}
		p.Put(b)
	}
	// A buffer given back serves the next Get of its tier, uncleared. The
	// race detector makes sync.Pool drop a quarter of what it is given:
	// one of many tries gets it back.
	for range 100 {
		b := p.Get(1000)
		(*b)[0] = 42
		p.Put(b)
		c := p.Get(600)
		if cap(*c) != 1024 {
			t.Fatalf("Get(600): capacity %d, want 1024", cap(*c))
		}
		if (*c)[:1][0] == 42 {
			return
		}
	}
	t.Errorf("a buffer given back never served a Get of its tier")
}

// A large buffer given back serves the next Get of its capacity from any
// goroutine, every time (a free list, not a sync.Pool), and the free
// lists keep at most maxListBytes.
func TestBufferPool_largeBuffersKept(t *testing.T) {
	var p bufferPool
	b := p.Get(100_000)
	(*b)[0] = 42
	p.Put(b)
	got := make(chan *[]byte)
	go func() { got <- p.Get(70_000) }()
	if c := <-got; &(*c)[:1][0] != &(*b)[0] || (*c)[0] != 42 || len(*c) != 70_000 {
		t.Errorf("Get(70000) on another goroutine: got a new buffer, want the 128 KiB one given back")
	}

	const big = 1 << maxPoolShift
	var given []*[]byte
	for range 3 {
		given = append(given, p.Get(big))
	}
	for _, b := range given {
		p.Put(b)
	}
	if k := p.kept; k != maxListBytes {
		t.Errorf("bytes kept after three %d-byte buffers: %d, want %d", big, k, maxListBytes)
	}
	reused := 0
	for range 3 {
		c := p.Get(big)
		for _, b := range given {
			if &(*c)[0] == &(*b)[0] {
				reused++
			}
		}
	}
	if reused != maxListBytes/big || p.kept != 0 {
		t.Errorf("buffers served again: %d, want %d; bytes still kept %d, want 0", reused, maxListBytes/big, p.kept)
	}
}

// countingPool counts the buffers taken from the pool it wraps, and
// given back to it.
type countingPool struct {
	bufferPool
	gets, puts int
}

func (p *countingPool) Get(n int) *[]byte { p.gets++; return p.bufferPool.Get(n) }
func (p *countingPool) Put(b *[]byte)     { p.puts++; p.bufferPool.Put(b) }

func TestProtoCodec_unmarshalsWithItsPool(t *testing.T) {
	pool := &countingPool{}
	codec := protoCodec{pool: pool}
	want := &pb.PutRequest{Key: []byte("/q/ch:events/p/1"), Value: []byte(`{"id":1}`)}
	data, err := codec.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	// A message that came in two frames is gathered into one buffer.
	raw := data.Materialize()
	two := mem.BufferSlice{mem.SliceBuffer(raw[:5]), mem.SliceBuffer(raw[5:])}
	var got pb.PutRequest
	if err := codec.Unmarshal(two, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Key) != string(want.Key) || string(got.Value) != string(want.Value) {
		t.Errorf("got %q=%q, want %q=%q", got.Key, got.Value, want.Key, want.Value)
	}
	if pool.gets != 1 {
		t.Errorf("buffers taken from the codec's pool: %d, want 1", pool.gets)
	}
	if codec.Name() != "proto" {
		t.Errorf("Name() = %q, want proto", codec.Name())
	}
}

func TestProtoCodec_marshalsLargeMessagesIntoItsPool(t *testing.T) {
	pool := &countingPool{}
	codec := protoCodec{pool: pool}
	txn := &pb.TxnRequest{}
	for i := range 128 {
		txn.Success = append(txn.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
			Key: fmt.Appendf(nil, "/q/ch:events/p/%d", i), Value: fmt.Appendf(nil, `{"id":%d,"pad":"%0200d"}`, i, 0)}}})
	}
	data, err := codec.Marshal(txn)
	if err != nil {
		t.Fatal(err)
	}
	if pool.gets != 1 {
		t.Errorf("buffers taken to marshal a txn of 128 puts: %d, want 1", pool.gets)
	}
	var got pb.TxnRequest
	if err := codec.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	data.Free()
	if len(got.Success) != 128 || string(got.Success[127].GetRequestPut().Key) != "/q/ch:events/p/127" {
		t.Errorf("round trip: %d ops, last key %q", len(got.Success), got.Success[len(got.Success)-1].GetRequestPut().Key)
	}
	// A small message is not worth a pooled buffer.
	if _, err := codec.Marshal(&pb.PutRequest{Key: []byte("k")}); err != nil || pool.gets != 1 {
		t.Errorf("small message: err %v, buffers taken %d, want still 1", err, pool.gets)
	}
	if _, err := codec.Marshal(42); err == nil {
		t.Errorf("Marshal(42): want an error")
	}
}
