package kv

import (
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestKV_errorsAreEtcds checks that bad requests get the error etcd gives,
// as clientv3 decodes it, and change nothing.
func TestKV_errorsAreEtcds(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 20*time.Second)
	if _, err := cli.Put(ctx, "k", "v"); err != nil { // rev 2
		t.Fatal(err)
	}
	raw := pb.NewKVClient(cli.ActiveConnection())
	tooManyOps := make([]clientv3.Op, 129)
	for i := range tooManyOps {
		tooManyOps[i] = clientv3.OpPut("t"+strings.Repeat("x", i), "v")
	}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"empty key", func() error { _, err := cli.Put(ctx, "", "v"); return err }, rpctypes.ErrEmptyKey},
		{"1.6 MiB value", func() error {
			_, err := cli.Put(ctx, "big", strings.Repeat("v", 1600*1024))
			return err
		}, rpctypes.ErrRequestTooLarge},
		{"txn of puts of 1.6 MiB", func() error {
			v := strings.Repeat("v", 800*1024)
			_, err := cli.Txn(ctx).Then(clientv3.OpPut("big1", v), clientv3.OpPut("big2", v)).Commit()
			return err
		}, rpctypes.ErrRequestTooLarge},
		{"129-op txn", func() error { _, err := cli.Txn(ctx).Then(tooManyOps...).Commit(); return err }, rpctypes.ErrTooManyOps},
		{"unknown lease", func() error { _, err := cli.Put(ctx, "k", "v", clientv3.WithLease(0x7777)); return err }, rpctypes.ErrLeaseNotFound},
		{"future revision", func() error { _, err := cli.Get(ctx, "k", clientv3.WithRev(100)); return err }, rpctypes.ErrFutureRev},
		{"ignore value on missing key", func() error { _, err := cli.Put(ctx, "missing", "", clientv3.WithIgnoreValue()); return err }, rpctypes.ErrKeyNotFound},
		// etcd judges a put's lease first, a txn's put's key first.
		{"ignore value on missing key, unknown lease", func() error {
			_, err := cli.Put(ctx, "missing", "", clientv3.WithIgnoreValue(), clientv3.WithLease(0x7777))
			return err
		}, rpctypes.ErrLeaseNotFound},
		{"txn: ignore value on missing key, unknown lease", func() error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut("missing", "", clientv3.WithIgnoreValue(), clientv3.WithLease(0x7777))).Commit()
			return err
		}, rpctypes.ErrKeyNotFound},
		{"duplicate key in txn", func() error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut("d", "1"), clientv3.OpPut("d", "2")).Commit()
			return err
		}, rpctypes.ErrDuplicateKey},
		{"put over a deleted range in txn", func() error {
			_, err := cli.Txn(ctx).Then(clientv3.OpDelete("d", clientv3.WithPrefix()), clientv3.OpPut("d1", "2")).Commit()
			return err
		}, rpctypes.ErrDuplicateKey},
		{"revoke unknown lease", func() error { _, err := cli.Revoke(ctx, 0x7777); return err }, rpctypes.ErrLeaseNotFound},
		{"txn with unknown lease changes nothing", func() error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut("txn-a", "1"), clientv3.OpPut("txn-b", "1", clientv3.WithLease(0x7777))).Commit()
			return err
		}, rpctypes.ErrLeaseNotFound},
		// Requests clientv3 never makes, sent raw, answered with etcd's
		// gRPC errors.
		{"129 compares", func() error {
			cmps := make([]*pb.Compare, 129)
			for i := range cmps {
				cmps[i] = &pb.Compare{Key: []byte("k"), Target: pb.Compare_VERSION, Result: pb.Compare_GREATER}
			}
			_, err := raw.Txn(ctx, &pb.TxnRequest{Compare: cmps})
			return err
		}, rpctypes.ErrGRPCTooManyOps},
		{"compare of the empty key", func() error {
			_, err := raw.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{{Target: pb.Compare_VERSION, Result: pb.Compare_GREATER}}})
			return err
		}, rpctypes.ErrGRPCEmptyKey},
		{"ignore value with a value", func() error {
			_, err := raw.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("x"), IgnoreValue: true})
			return err
		}, rpctypes.ErrGRPCValueProvided},
		{"ignore lease with a lease", func() error {
			_, err := raw.Put(ctx, &pb.PutRequest{Key: []byte("k"), Lease: 1, IgnoreLease: true})
			return err
		}, rpctypes.ErrGRPCLeaseProvided},
		{"unknown sort target", func() error {
			_, err := raw.Range(ctx, &pb.RangeRequest{Key: []byte("k"), SortOrder: pb.RangeRequest_ASCEND, SortTarget: 99})
			return err
		}, rpctypes.ErrGRPCInvalidSortOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}

	t.Run("key one byte over the limit", func(t *testing.T) {
		_, err := cli.Put(ctx, strings.Repeat("k", 1025), "v")
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "etcdserver: key is too large") {
			t.Fatalf("got %v, want InvalidArgument etcdserver: key is too large", err)
		}
		if _, err := cli.Put(ctx, strings.Repeat("k", 1024), "v"); err != nil {
			t.Fatalf("a key of exactly 1024 bytes: %v", err)
		}
	})

	t.Run("nothing changed", func(t *testing.T) {
		r, err := cli.Get(ctx, "txn-a")
		if err != nil {
			t.Fatal(err)
		}
		// rev 2 was k; the 1024-byte key is rev 3; nothing else was written.
		if r.Header.Revision != 3 || r.Count != 0 {
			t.Fatalf("got revision %d, txn-a count %d; want revision 3 and no txn-a", r.Header.Revision, r.Count)
		}
	})

	t.Run("compacted revision", func(t *testing.T) {
		if _, err := cli.Compact(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Get(ctx, "k", clientv3.WithRev(2)); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatalf("get at compacted revision: got %v, want %v", err, rpctypes.ErrCompacted)
		}
		if _, err := cli.Compact(ctx, 3); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatalf("compact again: got %v, want %v", err, rpctypes.ErrCompacted)
		}
		if _, err := cli.Compact(ctx, 99); !errors.Is(err, rpctypes.ErrFutureRev) {
			t.Fatalf("compact future: got %v, want %v", err, rpctypes.ErrFutureRev)
		}
		checkKey(t, cli, "k", &kvState{"v", 2, 2, 1}, clientv3.WithRev(3))
	})
}
