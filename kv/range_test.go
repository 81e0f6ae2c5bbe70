package kv

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestKV_Range_options checks each RangeRequest option against what etcd
// returns for the same data.
func TestKV_Range_options(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	// Revisions: k1=2, k2=3, k3=4, k1 again=5 (version 2), x=6.
	for _, kv := range [][2]string{{"k1", "c"}, {"k2", "b"}, {"k3", "a"}, {"k1", "d"}, {"x", "z"}} {
		if _, err := cli.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(r *clientv3.GetResponse) string {
		var ks []string
		for _, kv := range r.Kvs {
			ks = append(ks, string(kv.Key)+"="+string(kv.Value))
		}
		return strings.Join(ks, ",")
	}
	tests := []struct {
		name      string
		key       string
		opts      []clientv3.OpOption
		want      string
		wantCount int64
		wantMore  bool
	}{
		{"exact", "k2", nil, "k2=b", 1, false},
		{"prefix", "k", []clientv3.OpOption{clientv3.WithPrefix()}, "k1=d,k2=b,k3=a", 3, false},
		{"from key", "k2", []clientv3.OpOption{clientv3.WithFromKey()}, "k2=b,k3=a,x=z", 3, false},
		{"range", "k1", []clientv3.OpOption{clientv3.WithRange("k3")}, "k1=d,k2=b", 2, false},
		{"limit", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithLimit(2)}, "k1=d,k2=b", 3, true},
		{"limit exact fit", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithLimit(3)}, "k1=d,k2=b,k3=a", 3, false},
		{"sort value ascend", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByValue, clientv3.SortAscend)}, "k3=a,k2=b,k1=d", 3, false},
		{"sort key descend", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}, "k3=a,k2=b,k1=d", 3, false},
		{"sort mod descend limit", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1)}, "k1=d", 3, true},
		{"sort create", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}, "k3=a,k2=b,k1=d", 3, false},
		{"sort version", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByVersion, clientv3.SortDescend)}, "k1=d,k2=b,k3=a", 3, false},
		{"at old revision", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(3)}, "k1=c,k2=b", 2, false},
		{"min mod revision", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinModRev(4)}, "k1=d,k3=a", 3, false},
		{"max create revision", "k", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(3)}, "k1=d,k2=b", 3, false},
		{"all keys", "\x00", []clientv3.OpOption{clientv3.WithFromKey()}, "k1=d,k2=b,k3=a,x=z", 4, false},
		{"missing", "nope", nil, "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := cli.Get(ctx, tt.key, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(r); got != tt.want {
				t.Errorf("kvs: got %q, want %q", got, tt.want)
			}
			if r.Count != tt.wantCount {
				t.Errorf("count: got %d, want %d", r.Count, tt.wantCount)
			}
			if r.More != tt.wantMore {
				t.Errorf("more: got %v, want %v", r.More, tt.wantMore)
			}
		})
	}

	t.Run("keys only", func(t *testing.T) {
		r, err := cli.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 3 || r.Kvs[0].Value != nil || r.Kvs[0].ModRevision != 5 || r.Kvs[0].Version != 2 {
			t.Fatalf("got %v, want 3 keys without values, k1 at mod 5 version 2", r.Kvs)
		}
		// The stored value is untouched by a keys-only read.
		checkKey(t, cli, "k1", &kvState{"d", 2, 5, 2})
	})
	t.Run("count only", func(t *testing.T) {
		r, err := cli.Get(ctx, "k", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 0 || r.Count != 3 {
			t.Fatalf("got %d kvs count %d, want 0 kvs count 3", len(r.Kvs), r.Count)
		}
	})
}

// TestKV_Put_options checks prev_kv, ignore_value and ignore_lease.
func TestKV_Put_options(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	r, err := cli.Put(ctx, "k", "1", clientv3.WithPrevKV())
	if err != nil {
		t.Fatal(err)
	}
	if r.PrevKv != nil {
		t.Fatalf("first put: got prev %v, want none", r.PrevKv)
	}
	r, err = cli.Put(ctx, "k", "2", clientv3.WithPrevKV())
	if err != nil {
		t.Fatal(err)
	}
	if r.PrevKv == nil || string(r.PrevKv.Value) != "1" {
		t.Fatalf("second put: got prev %v, want value 1", r.PrevKv)
	}
	r, err = cli.Put(ctx, "k", "3")
	if err != nil {
		t.Fatal(err)
	}
	if r.PrevKv != nil {
		t.Fatalf("put without prev_kv returned %v", r.PrevKv)
	}

	l, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "", clientv3.WithIgnoreValue(), clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	g, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if kv := g.Kvs[0]; string(kv.Value) != "3" || kv.Lease != int64(l.ID) || kv.Version != 4 {
		t.Fatalf("after ignore_value: got %v, want value 3, lease %x, version 4", kv, l.ID)
	}
	if _, err := cli.Put(ctx, "k", "4", clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	g, err = cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if kv := g.Kvs[0]; string(kv.Value) != "4" || kv.Lease != int64(l.ID) {
		t.Fatalf("after ignore_lease: got %v, want value 4, lease %x", kv, l.ID)
	}
}

// TestKV_Delete_options checks range deletes and prev_kv.
func TestKV_Delete_options(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	for _, k := range []string{"a/1", "a/2", "a/3", "b"} {
		if _, err := cli.Put(ctx, k, "v"+k); err != nil {
			t.Fatal(err)
		}
	}
	d, err := cli.Delete(ctx, "a/", clientv3.WithPrefix(), clientv3.WithPrevKV())
	if err != nil {
		t.Fatal(err)
	}
	if d.Deleted != 3 || len(d.PrevKvs) != 3 || string(d.PrevKvs[2].Value) != "va/3" {
		t.Fatalf("got deleted %d prev %v, want 3 with values", d.Deleted, d.PrevKvs)
	}
	if d.Header.Revision != 6 {
		t.Fatalf("one delete of three keys: got revision %d, want 6", d.Header.Revision)
	}
	g, err := cli.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	if g.Count != 1 || string(g.Kvs[0].Key) != "b" {
		t.Fatalf("left: got %v, want only b", g.Kvs)
	}
}
