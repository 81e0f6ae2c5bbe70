package kv

import (
	"bytes"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
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
	if !decodePutTxn(b, &got) {
		return false
	}
	var want pb.TxnRequest
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatalf("decodePutTxn took %x, which proto.Unmarshal refuses: %v", b, err)
	}
	if !proto.Equal(&got, &want) {
		t.Fatalf("decodePutTxn(%x): got %v, want %v", b, &got, &want)
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

// TestDecodePutTxn_allocations checks that a txn of 128 puts costs six
// allocations, not five per put.
func TestDecodePutTxn_allocations(t *testing.T) {
	b, err := proto.Marshal(putTxn(128))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		var r pb.TxnRequest
		if !decodePutTxn(b, &r) {
			t.Fatal("not decoded")
		}
	}); n > 7 {
		t.Errorf("decoding 128 puts: got %v allocations, want at most 7", n)
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
		// The decoded bytes are copies: the input's buffer is reused.
		in := bytes.Clone(b)
		var r pb.TxnRequest
		if !decodePutTxn(in, &r) {
			return
		}
		before := fmt.Sprint(&r)
		for i := range in {
			in[i] = 0xff
		}
		if after := fmt.Sprint(&r); after != before {
			t.Fatalf("decodePutTxn(%x): the message changed with its input: got %s, want %s", b, after, before)
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
			if !decodePutTxn(msg, &r) {
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
