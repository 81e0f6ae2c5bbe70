package kv

import (
	"bytes"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"chute/gossip/peer/peerpb"
)

// putTxn is a txn of n puts, as a batch produce sends it.
func putTxn(n int) *pb.TxnRequest {
	r := &pb.TxnRequest{}
	for i := range n {
		r.Success = append(r.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
			Key: fmt.Appendf(nil, "/q/ch:events/p/%d", i), Value: fmt.Appendf(nil, `{"id":%d}`, i),
		}}})
	}
	return r
}

// sameAsProto checks that decodePutTxn either refuses b or decodes it
// as proto.Unmarshal does, nil and empty bytes alike, and reports
// whether it took it.
func sameAsProto(t *testing.T, b []byte) bool {
	t.Helper()
	var got pb.TxnRequest
	a := &putTxnArena{}
	took := decodePutTxn(b, &got, a)
	// Into arenas that held a txn before, of one put and of 150: the
	// one-pass decode, and the count first when the arrays are short.
	for _, before := range []int{1, 150} {
		old, err := proto.Marshal(putTxn(before))
		if err != nil {
			t.Fatal(err)
		}
		reused := &putTxnArena{}
		var r, again pb.TxnRequest
		if !decodePutTxn(old, &r, reused) {
			t.Fatalf("a txn of %d puts not decoded", before)
		}
		if decodePutTxn(b, &again, reused) != took {
			t.Fatalf("decodePutTxn(%x) into an arena that held %d puts: took %v, into a new one %v", b, before, !took, took)
		}
		if took && (!proto.Equal(&again, &got) || reused.size != a.size) {
			t.Fatalf("decodePutTxn(%x) into an arena that held %d puts: got %v (size %d), into a new one %v (size %d)", b, before, &again, reused.size, &got, a.size)
		}
	}
	if !took {
		return false
	}
	var want pb.TxnRequest
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatalf("decodePutTxn took %x, which proto.Unmarshal refuses: %v", b, err)
	}
	if !proto.Equal(&got, &want) {
		t.Fatalf("decodePutTxn(%x): got %v, want %v", b, &got, &want)
	}
	if n, ok := putTxnRequestSize(&got); !ok || n != proto.Size(&want) {
		t.Fatalf("putTxnRequestSize of decodePutTxn(%x): got %d, %v, want %d, true", b, n, ok, proto.Size(&want))
	}
	if a.size != proto.Size(&want) {
		t.Fatalf("decodePutTxn(%x): the arena's size %d, want proto.Size's %d", b, a.size, proto.Size(&want))
	}
	for i, op := range want.Success {
		g, w := got.Success[i].GetRequestPut(), op.GetRequestPut()
		if (g.Key == nil) != (w.Key == nil) || (g.Value == nil) != (w.Value == nil) {
			t.Fatalf("decodePutTxn(%x): put %d: got key %#v value %#v, want key %#v value %#v", b, i, g.Key, g.Value, w.Key, w.Value)
		}
	}
	return true
}

func TestDecodePutTxn(t *testing.T) {
	put := func(p *pb.PutRequest) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: p}}
	}
	withCompare := putTxn(2)
	withCompare.Compare = []*pb.Compare{{Key: []byte("k")}}
	withFailure := putTxn(2)
	withFailure.Failure = []*pb.RequestOp{put(&pb.PutRequest{Key: []byte("k")})}
	withRange := putTxn(2)
	withRange.Success = append(withRange.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}})
	tests := []struct {
		name string
		r    *pb.TxnRequest
		want bool // decoded by decodePutTxn, not left to proto.Unmarshal
	}{
		{"128 puts", putTxn(128), true},
		{"one put", putTxn(1), true},
		{"empty key and value", &pb.TxnRequest{Success: []*pb.RequestOp{put(&pb.PutRequest{}), put(&pb.PutRequest{Key: []byte("k")}), put(&pb.PutRequest{Value: []byte("v")})}}, true},
		{"no ops", &pb.TxnRequest{}, false},
		{"a compare", withCompare, false},
		{"a failure branch", withFailure, false},
		{"a range", withRange, false},
		{"a lease", &pb.TxnRequest{Success: []*pb.RequestOp{put(&pb.PutRequest{Key: []byte("k"), Lease: 1})}}, false},
		{"prev_kv", &pb.TxnRequest{Success: []*pb.RequestOp{put(&pb.PutRequest{Key: []byte("k"), PrevKv: true})}}, false},
		{"ignore_value", &pb.TxnRequest{Success: []*pb.RequestOp{put(&pb.PutRequest{Key: []byte("k"), IgnoreValue: true})}}, false},
		{"a nested txn", &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestTxn{RequestTxn: putTxn(1)}}}}, false},
	}
	for _, tt := range tests {
		b, err := proto.Marshal(tt.r)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameAsProto(t, b); got != tt.want {
			t.Errorf("%s: decodePutTxn took it: got %v, want %v", tt.name, got, tt.want)
		}
		// requestSizeLimit sizes the txn as proto.Size does.
		if got, want := requestSize(tt.r), proto.Size(tt.r); got != want {
			t.Errorf("%s: requestSize: got %d, want %d", tt.name, got, want)
		}
		if _, ok := putTxnRequestSize(tt.r); ok != tt.want && len(tt.r.Success) > 0 {
			t.Errorf("%s: putTxnRequestSize took it: got %v, want %v", tt.name, ok, tt.want)
		}
	}
	// A key sent twice (the last one counts) or an unknown field is left
	// to proto.Unmarshal.
	for name, b := range map[string][]byte{
		"key twice":     {0x12, 0x08, 0x12, 0x06, 0x0a, 0x01, 'a', 0x0a, 0x01, 'b'},
		"unknown field": {0x12, 0x07, 0x12, 0x05, 0x0a, 0x01, 'a', 0x3a, 0x00},
		"truncated":     {0x12, 0x07, 0x12, 0x05, 0x0a, 0x01},
	} {
		if sameAsProto(t, b) {
			t.Errorf("%s: decodePutTxn took %x, want it left to proto.Unmarshal", name, b)
		}
	}
}

// TestDecodePutTxn_allocations checks that a txn of 128 puts costs four
// allocations, not five per put.
func TestDecodePutTxn_allocations(t *testing.T) {
	b, err := proto.Marshal(putTxn(128))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		var r pb.TxnRequest
		if !decodePutTxn(b, &r, &putTxnArena{}) {
			t.Fatal("not decoded")
		}
	}); n > 5 { // and the request itself
		t.Errorf("decoding 128 puts: got %v allocations, want at most 5", n)
	}
}

func FuzzDecodePutTxn(f *testing.F) {
	for _, n := range []int{1, 3} {
		b, err := proto.Marshal(putTxn(n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x12, 0x08, 0x12, 0x06, 0x0a, 0x01, 'a', 0x0a, 0x01, 'b'})
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsProto(t, b)
		// The codec decodes from a copy of its own: gRPC reuses the
		// buffers it hands over, one or several.
		half := len(b) / 2
		for _, in := range []mem.BufferSlice{
			{mem.SliceBuffer(bytes.Clone(b))},
			{mem.SliceBuffer(bytes.Clone(b[:half])), mem.SliceBuffer(bytes.Clone(b[half:]))},
		} {
			var r pb.TxnRequest
			if err := (protoCodec{pool: &bufferPool{}}).Unmarshal(in, &r); err != nil {
				return
			}
			before := fmt.Sprint(&r)
			for _, buf := range in {
				clear(buf.ReadOnlyData())
			}
			if after := fmt.Sprint(&r); after != before {
				t.Fatalf("Unmarshal(%x) from %d buffers: the message changed with gRPC's: got %s, want %s", b, len(in), after, before)
			}
		}
	})
}

// BenchmarkDecodePutTxn decodes a txn of 128 puts with decodePutTxn and
// with proto.Unmarshal.
func BenchmarkDecodePutTxn(b *testing.B) {
	msg, err := proto.Marshal(putTxn(128))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decodePutTxn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r pb.TxnRequest
			if !decodePutTxn(msg, &r, &putTxnArena{}) {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r pb.TxnRequest
			if err := proto.Unmarshal(msg, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// putTxnResponse is produceTxn's answer to n puts at revision rev.
func putTxnResponse(n int, rev int64) *pb.TxnResponse {
	r := &pb.TxnResponse{Header: &pb.ResponseHeader{ClusterId: 7, MemberId: 9, Revision: rev, RaftTerm: 3}, Succeeded: true}
	for range n {
		r.Responses = append(r.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: &pb.ResponseHeader{Revision: rev}}}})
	}
	return r
}

// TestProtoCodec_Marshal_putTxnResponse checks that the codec encodes a
// batch produce's answer, and the answers it leaves to proto.Marshal, as
// proto.Marshal does, in pooled buffers and not.
func TestProtoCodec_Marshal_putTxnResponse(t *testing.T) {
	withPrev := putTxnResponse(2, 5)
	withPrev.Responses[1].GetResponsePut().PrevKv = &mvccpb.KeyValue{Key: []byte("k")}
	withRange := putTxnResponse(2, 5)
	withRange.Responses[0] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Count: 1}}}
	noHeaders := putTxnResponse(3, 0)
	noHeaders.Header = nil
	noHeaders.Responses[1].GetResponsePut().Header = nil
	tests := []struct {
		name string
		r    *pb.TxnResponse
		fast bool // putTxnResponseSize takes it
	}{
		{"128 puts", putTxnResponse(128, 1<<40), true},
		{"one put", putTxnResponse(1, 1), true},
		{"negative revision", putTxnResponse(2, -1), true},
		{"headers missing or zero", noHeaders, true},
		{"not succeeded", &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: 4}, Responses: putTxnResponse(1, 4).Responses}, true},
		{"a previous key-value", withPrev, false},
		{"a range", withRange, false},
		{"no responses", &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: 4}}, false},
		{"a nil put", &pb.TxnResponse{Responses: []*pb.ResponseOp{{Response: &pb.ResponseOp_ResponsePut{}}}}, false},
	}
	codec := protoCodec{pool: &bufferPool{}}
	for _, tt := range tests {
		want, err := proto.Marshal(tt.r)
		if err != nil {
			t.Fatal(err)
		}
		if _, fast := putTxnResponseSize(tt.r); fast != tt.fast {
			t.Errorf("%s: putTxnResponseSize took it: got %v, want %v", tt.name, fast, tt.fast)
		}
		bs, err := codec.Marshal(tt.r)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := bs.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%s: got %x, want %x", tt.name, got, want)
		}
		bs.Free()
	}
}

// TestProtoCodec_Marshal_forwardFrame: the codec encodes the frames a
// forward stream sends (peerpb.SendFrame), small and pooled, as
// proto.Marshal encodes the ForwardFrame of the same batches, and
// refuses one whose batch could not be encoded rather than send
// something else.
func TestProtoCodec_Marshal_forwardFrame(t *testing.T) {
	var _ appendEncoder = (*peerpb.SendFrame)(nil) // the codec's fast path takes frames
	puts := &peerpb.SendBatch{}
	batch := &peerpb.ForwardBatch{Id: 3, Puts: true}
	for i := range 128 {
		m := &peerpb.QueueMessage{Queue: "ch:db.events", Tail: fmt.Sprint(i), Value: []byte(`{"id":1}`), Origin: 9, N: uint64(i + 1)}
		batch.Messages = append(batch.Messages, m)
		puts.AddMessage(m, false)
	}
	puts.Head.Id, puts.Head.Puts = 3, true
	release := &peerpb.SendBatch{}
	release.Head.Id, release.Head.Kind, release.Head.Queue, release.Head.Seqs = 1, peerpb.ForwardKind_RELEASE, "q", []uint64{1, 2}
	codec := protoCodec{pool: &bufferPool{}}
	for name, tt := range map[string]struct {
		sent *peerpb.SendBatch
		want *peerpb.ForwardBatch
	}{
		"128 puts":  {puts, batch},
		"a release": {release, &peerpb.ForwardBatch{Id: 1, Kind: peerpb.ForwardKind_RELEASE, Queue: "q", Seqs: []uint64{1, 2}}},
	} {
		want, err := proto.Marshal(&peerpb.ForwardFrame{Batches: []*peerpb.ForwardBatch{tt.want}})
		if err != nil {
			t.Fatal(err)
		}
		bs, err := codec.Marshal(&peerpb.SendFrame{Batches: []*peerpb.SendBatch{tt.sent}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := bs.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%s: got %x, want %x", name, got, want)
		}
		bs.Free()
	}
	bad := &peerpb.SendBatch{}
	bad.Head.Queue = "\xff"
	if _, err := codec.Marshal(&peerpb.SendFrame{Batches: []*peerpb.SendBatch{bad}}); err == nil {
		t.Errorf("a queue name that is not UTF-8: got no error")
	}
}

// TestProtoCodec_Unmarshal_forwardFrame: the codec decodes a forward
// frame, in one of gRPC's buffers or split over two, to what
// proto.Unmarshal makes of it; the frame holds its bytes after gRPC lets
// go of its buffers, and gives them back to the pool when its receiver
// is done with it for reuse, never when not (something still refers to
// them).
func TestProtoCodec_Unmarshal_forwardFrame(t *testing.T) {
	var _ pooledUnmarshaler = (*peerpb.RecvFrame)(nil) // the codec's fast path takes frames
	batch := &peerpb.ForwardBatch{Id: 3, Puts: true}
	for i := range 128 {
		batch.Messages = append(batch.Messages, &peerpb.QueueMessage{Queue: "ch:db.events", Tail: fmt.Sprint(i), Value: []byte(`{"id":1}`), Origin: 9, N: uint64(i + 1)})
	}
	want := &peerpb.ForwardFrame{Batches: []*peerpb.ForwardBatch{batch}}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	half := len(b) / 2
	for _, reuse := range []bool{true, false} {
		for name, parts := range map[string][][]byte{"one buffer": {b}, "two buffers": {b[:half], b[half:]}} {
			pool := &countingPool{}
			var in mem.BufferSlice
			for _, p := range parts {
				buf := pool.Get(len(p))
				copy(*buf, p)
				in = append(in, mem.NewBuffer(buf, pool))
			}
			var got peerpb.RecvFrame
			if err := (protoCodec{pool: pool}).Unmarshal(in, &got); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			in.Free() // as gRPC does once the codec returns
			if !proto.Equal(&got.ForwardFrame, want) {
				t.Errorf("%s, gRPC's buffers let go: got %v, want %v", name, &got.ForwardFrame, want)
			}
			held := pool.puts
			got.Done(reuse)
			if back := pool.puts - held; reuse && back != 1 || !reuse && back != 0 {
				t.Errorf("%s, done with reuse %v: %d buffers given back to the pool, want %d", name, reuse, back, map[bool]int{true: 1}[reuse])
			}
		}
	}
}

// BenchmarkProtoCodec_Marshal_putTxnResponse encodes the answer to 128
// puts with the codec and with proto.Marshal.
func BenchmarkProtoCodec_Marshal_putTxnResponse(b *testing.B) {
	r := putTxnResponse(128, 1<<30)
	codec := protoCodec{pool: &bufferPool{}}
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bs, err := codec.Marshal(r)
			if err != nil {
				b.Fatal(err)
			}
			bs.Free()
		}
	})
	b.Run("proto.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzPutTxnResponse compares the codec's encoding of answers to txns
// of puts with proto.Marshal's, over sizes, header values and which
// headers are missing.
func FuzzPutTxnResponse(f *testing.F) {
	f.Add(uint8(3), int64(5), uint64(7), uint64(0b010), true)
	f.Add(uint8(200), int64(-1), uint64(1<<63), uint64(1<<64-1), false)
	codec := protoCodec{pool: &bufferPool{}}
	f.Fuzz(func(t *testing.T, n uint8, rev int64, id uint64, missing uint64, succeeded bool) {
		r := putTxnResponse(int(n)+1, rev)
		r.Header.ClusterId, r.Header.MemberId, r.Succeeded = id, id>>7, succeeded
		if missing&1 != 0 {
			r.Header = nil
		}
		for i, op := range r.Responses {
			if missing>>(i%63+1)&1 != 0 {
				op.GetResponsePut().Header = nil
			}
		}
		want, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := codec.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		defer bs.Free()
		if got := bs.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("got %x, want %x", got, want)
		}
	})
}

// BenchmarkRequestSize sizes a txn of 128 puts as requestSizeLimit does
// and with proto.Size.
func BenchmarkRequestSize(b *testing.B) {
	r := putTxn(128)
	b.Run("requestSize", func(b *testing.B) {
		for b.Loop() {
			requestSize(r)
		}
	})
	b.Run("proto.Size", func(b *testing.B) {
		for b.Loop() {
			proto.Size(r)
		}
	})
}
