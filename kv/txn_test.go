package kv

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestKV_Txn_compares checks each compare target and result against a key
// put twice (create 2, mod 3, version 2, value "v2").
func TestKV_Txn_compares(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cmp  clientv3.Cmp
		want bool
	}{
		{"value equal", clientv3.Compare(clientv3.Value("k"), "=", "v2"), true},
		{"value not equal", clientv3.Compare(clientv3.Value("k"), "!=", "v2"), false},
		{"value greater", clientv3.Compare(clientv3.Value("k"), ">", "v1"), true},
		{"value less", clientv3.Compare(clientv3.Value("k"), "<", "v1"), false},
		{"version", clientv3.Compare(clientv3.Version("k"), "=", 2), true},
		{"create", clientv3.Compare(clientv3.CreateRevision("k"), "=", 2), true},
		{"mod", clientv3.Compare(clientv3.ModRevision("k"), "=", 3), true},
		{"mod less", clientv3.Compare(clientv3.ModRevision("k"), "<", 3), false},
		{"lease", clientv3.Compare(clientv3.LeaseValue("k"), "=", 0), true},
		{"missing key has version 0", clientv3.Compare(clientv3.Version("missing"), "=", 0), true},
		{"missing key has create 0", clientv3.Compare(clientv3.CreateRevision("missing"), "=", 0), true},
		{"value compare on missing key fails", clientv3.Compare(clientv3.Value("missing"), "!=", "x"), false},
		{"range compare all hold", clientv3.Compare(clientv3.Version("k"), ">", 0).WithPrefix(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := cli.Txn(ctx).If(tt.cmp).Commit()
			if err != nil {
				t.Fatal(err)
			}
			if r.Succeeded != tt.want {
				t.Fatalf("succeeded: got %v, want %v", r.Succeeded, tt.want)
			}
		})
	}
}

// TestKV_Txn_branchesAndNesting checks that the chosen branch runs as one
// revision, reads inside it see its own writes, and nested txns evaluate
// against the state before the outer txn.
func TestKV_Txn_branchesAndNesting(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "flag", "on"); err != nil { // rev 2
		t.Fatal(err)
	}
	r, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value("flag"), "=", "off")).
		Then(clientv3.OpPut("then", "1")).
		Else(
			clientv3.OpPut("else", "1"),
			clientv3.OpGet("else"),
			clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Version("else"), "=", 0)},
				[]clientv3.Op{clientv3.OpPut("nested", "saw-before")},
				[]clientv3.Op{clientv3.OpPut("nested", "saw-after")}),
		).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if r.Succeeded {
		t.Fatal("txn succeeded, want the else branch")
	}
	if r.Header.Revision != 3 {
		t.Fatalf("revision: got %d, want 3 (one txn, one revision)", r.Header.Revision)
	}
	got := r.Responses[1].GetResponseRange()
	if got == nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "1" || got.Kvs[0].ModRevision != 3 {
		t.Fatalf("read inside txn: got %v, want else=1 at revision 3", got)
	}
	// A nested txn's answer has a header, all zero, as etcd 3.4's (code
	// reading its revision must not find it nil); its ops' are set.
	if nested := r.Responses[2].GetResponseTxn(); nested == nil || nested.Header == nil || nested.Header.Revision != 0 || nested.Responses[0].GetResponsePut().GetHeader() == nil {
		t.Errorf("nested txn's answer %v: want a zero header of its own, its put's header set", nested)
	}
	checkKey(t, cli, "nested", &kvState{"saw-before", 3, 3, 1})
	checkKey(t, cli, "then", nil)
}
