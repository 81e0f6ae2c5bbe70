package kv

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// kvState is what a test expects of one key.
type kvState struct {
	value                string
	create, mod, version int64
}

func checkKey(t *testing.T, cli *clientv3.Client, key string, want *kvState, opts ...clientv3.OpOption) {
	t.Helper()
	resp, err := cli.Get(testCtx(t, 5*time.Second), key, opts...)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if want == nil {
		if len(resp.Kvs) != 0 {
			t.Fatalf("get %s: got %v, want nothing", key, resp.Kvs[0])
		}
		return
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("get %s: got %d kvs, want 1", key, len(resp.Kvs))
	}
	kv := resp.Kvs[0]
	got := kvState{string(kv.Value), kv.CreateRevision, kv.ModRevision, kv.Version}
	if got != *want {
		t.Fatalf("get %s: got %+v, want %+v", key, got, *want)
	}
}

// TestKV_revisionsFollowEtcdRules runs a scripted sequence and checks every
// revision, version and header against etcd's rules: the store starts at
// revision 1, each write that changes something takes the next revision, a
// txn is one revision, reads and no-op writes take none, a delete ends a
// generation and the next put starts one at version 1.
func TestKV_revisionsFollowEtcdRules(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)

	get, err := cli.Get(ctx, "nothing")
	if err != nil {
		t.Fatal(err)
	}
	if get.Header.Revision != 1 || get.Header.ClusterId != 0x1234 || get.Header.MemberId != 0xabcd || get.Header.RaftTerm != 1 {
		t.Fatalf("fresh header: got %+v, want revision 1, cluster 0x1234, member 0xabcd, term 1", get.Header)
	}

	steps := []struct {
		name    string
		op      clientv3.Op
		wantRev int64
	}{
		{"put a=1", clientv3.OpPut("a", "1"), 2},
		{"put a=2", clientv3.OpPut("a", "2"), 3},
		{"put b=1", clientv3.OpPut("b", "1"), 4},
		{"get a", clientv3.OpGet("a"), 4},
		{"del a", clientv3.OpDelete("a"), 5},
		{"del missing", clientv3.OpDelete("missing"), 5},
		{"put a=3", clientv3.OpPut("a", "3"), 6},
		{"txn put c,d", clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Version("a"), "=", 1)},
			[]clientv3.Op{clientv3.OpPut("c", "1"), clientv3.OpPut("d", "1")}, nil), 7},
		{"txn read only", clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpGet("c")}, nil), 7},
		{"txn failed compare", clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value("a"), "=", "nope")},
			[]clientv3.Op{clientv3.OpPut("e", "1")}, nil), 7},
	}
	for _, s := range steps {
		got, err := doRev(ctx, cli, s.op)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got != s.wantRev {
			t.Fatalf("%s: header revision got %d, want %d", s.name, got, s.wantRev)
		}
	}

	checkKey(t, cli, "a", &kvState{"3", 6, 6, 1})
	checkKey(t, cli, "b", &kvState{"1", 4, 4, 1})
	checkKey(t, cli, "c", &kvState{"1", 7, 7, 1})
	checkKey(t, cli, "d", &kvState{"1", 7, 7, 1})
	// Reads in the past see the key as it was.
	checkKey(t, cli, "a", &kvState{"1", 2, 2, 1}, clientv3.WithRev(2))
	checkKey(t, cli, "a", &kvState{"2", 2, 3, 2}, clientv3.WithRev(4))
	checkKey(t, cli, "a", nil, clientv3.WithRev(5))
	checkKey(t, cli, "c", nil, clientv3.WithRev(6))
}

// doRev runs op and returns the revision of its response header.
func doRev(ctx context.Context, cli *clientv3.Client, op clientv3.Op) (int64, error) {
	r, err := cli.Do(ctx, op)
	if err != nil {
		return 0, err
	}
	var h *pb.ResponseHeader
	switch {
	case r.Put() != nil:
		h = r.Put().Header
	case r.Get() != nil:
		h = r.Get().Header
	case r.Del() != nil:
		h = r.Del().Header
	case r.Txn() != nil:
		h = r.Txn().Header
	}
	if h == nil {
		return 0, fmt.Errorf("response without header")
	}
	return h.Revision, nil
}
