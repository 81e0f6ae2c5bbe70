package kv

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestLimits_checkTxn_duplicatePuts checks duplicate keys among the puts
// of a txn of puts only (distinctPuts) and of one with other ops too
// (writtenKeys), and that a txn of 128 distinct puts is checked in a
// few allocations, not one per key.
func TestLimits_checkTxn_duplicatePuts(t *testing.T) {
	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
	}
	rng := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("r")}}}
	l := limits{maxTxnOps: 128, maxKeyBytes: 1024}
	tests := []struct {
		name string
		ops  []*pb.RequestOp
		want error
	}{
		{"puts, distinct", []*pb.RequestOp{put("a"), put("b"), put("ab")}, nil},
		{"puts, one twice", []*pb.RequestOp{put("a"), put("b"), put("a")}, ErrDuplicateKey},
		{"with a range, distinct", []*pb.RequestOp{put("a"), rng, put("b")}, nil},
		{"with a range, one twice", []*pb.RequestOp{put("a"), rng, put("a")}, ErrDuplicateKey},
	}
	for _, tt := range tests {
		for _, branch := range []string{"success", "failure"} {
			r := &pb.TxnRequest{Success: tt.ops}
			if branch == "failure" {
				r = &pb.TxnRequest{Failure: tt.ops}
			}
			if err := l.checkTxn(r); !errors.Is(err, tt.want) {
				t.Errorf("%s, in %s: got %v, want %v", tt.name, branch, err, tt.want)
			}
		}
	}
	r := putTxn(128)
	check := func() {
		if err := l.checkTxn(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(20, check); n > 4 {
		t.Errorf("checking 128 puts: got %v allocations, want at most 4", n)
	}
}

// TestLimits_distinctPuts_reusedSet: the server's limits reuse the set of
// keys from one txn to the next; a key of the txn before is no duplicate.
func TestLimits_distinctPuts_reusedSet(t *testing.T) {
	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
	}
	l := limits{maxTxnOps: 128, maxKeyBytes: 1024, keySets: &sync.Pool{}}
	for i := range 50 { // the race detector's pools drop some of what they are given
		if err := l.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{put("a"), put("b")}}); err != nil {
			t.Fatalf("round %d, a and b: %v", i, err)
		}
		if err := l.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{put("b"), put("c")}}); err != nil {
			t.Fatalf("round %d, b and c after a and b: %v", i, err)
		}
		if err := l.checkTxn(&pb.TxnRequest{Success: []*pb.RequestOp{put("c"), put("c")}}); !errors.Is(err, ErrDuplicateKey) {
			t.Fatalf("round %d, c twice: got %v, want %v", i, err, ErrDuplicateKey)
		}
	}
}

// TestLimits_checkTxnRequest_nestedOps: a txn's ops, nested txns'
// included, are bounded together at nestedOpsFactor times MaxTxnOps:
// nesting took a txn within the request limit to about 190,000 ops, and
// comparing each put with each delete before it cost minutes of CPU.
// The bound is counted before anything else is looked at; a nested txn
// at the bound passes.
func TestLimits_checkTxnRequest_nestedOps(t *testing.T) {
	l := limits{maxTxnOps: 128, maxKeyBytes: 1024}
	// nested returns a txn of n nested txns of per ops each, made by op.
	nested := func(n, per int, op func(i int) *pb.RequestOp) *pb.RequestOp {
		outer := &pb.TxnRequest{}
		for i := range n {
			inner := &pb.TxnRequest{}
			for j := range per {
				inner.Success = append(inner.Success, op(i*per+j))
			}
			outer.Success = append(outer.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: inner}})
		}
		return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: outer}}
	}
	del := func(int) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("a")}}}
	}
	put := func(i int) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: fmt.Appendf(nil, "k%d", i)}}}
	}
	// The review's request: deletes, then puts, each in nested txns of 128.
	attack := &pb.TxnRequest{Success: []*pb.RequestOp{nested(860, 128, del), nested(600, 128, put)}}
	if err := l.checkTxnRequest(attack); !errors.Is(err, ErrTooManyOps) {
		t.Fatalf("a txn of 186,880 nested ops: got %v, want %v", err, ErrTooManyOps)
	}
	// At the bound: 8 nested txns of 127 ops, 1024 in all; one compare
	// more is one past it.
	atBound := nested(8, 127, put).GetRequestTxn()
	if err := l.checkTxnRequest(atBound); err != nil {
		t.Fatalf("a txn of 1024 ops in all: got %v, want it accepted", err)
	}
	atBound.Compare = []*pb.Compare{{Key: []byte("c")}}
	if err := l.checkTxnRequest(atBound); !errors.Is(err, ErrTooManyOps) {
		t.Fatalf("a txn of 1025 ops in all: got %v, want %v", err, ErrTooManyOps)
	}
}
