package bench

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestNoopServer_answers(t *testing.T) {
	addr := startNoop(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: smallConfig(addr).DialTimeout})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx := testContext(t)

	put, err := cli.Put(ctx, "k", "v")
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if put.Header.GetRevision() != 1 || put.Header.GetClusterId() != 1 {
		t.Errorf("Put header: got %v, want revision 1, cluster 1", put.Header)
	}
	get, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(get.Kvs) != 0 || get.Header.GetMemberId() != 1 {
		t.Errorf("Get: got %d kvs, header %v; want none, member 1", len(get.Kvs), get.Header)
	}
	txn, err := cli.Txn(ctx).Then(clientv3.OpPut("k", "v")).Commit()
	if err != nil {
		t.Fatalf("Txn: %v", err)
	}
	if !txn.Succeeded {
		t.Errorf("Txn: got succeeded false, want true")
	}
	st, err := cli.Status(ctx, addr)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Header.GetRaftTerm() != 1 {
		t.Errorf("Status header: got %v, want raft term 1", st.Header)
	}
	if _, err := cli.Delete(ctx, "k"); err == nil {
		t.Errorf("Delete: got nil error, want Unimplemented")
	}
}

func TestNoopServer_Stop_idempotent(t *testing.T) {
	srv := NewNoopServer(NoopDelays{})
	srv.Stop()
	srv.Stop()
}

// A delayed no-op holds puts and txns for their own delays, and answers
// reads at once.
func TestNoopServer_delays(t *testing.T) {
	d := NoopDelays{Put: 150 * time.Millisecond, Txn: 300 * time.Millisecond}
	addr := startDelayedNoop(t, d)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: smallConfig(addr).DialTimeout})
	if err != nil {
		t.Fatalf("clientv3.New: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx := testContext(t)
	if _, err := cli.Get(ctx, "warm"); err != nil { // connects
		t.Fatalf("Get: %v", err)
	}
	took := func(what string, call func() error) time.Duration {
		start := time.Now()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return time.Since(start)
	}
	if got := took("Put", func() error { _, err := cli.Put(ctx, "k", "v"); return err }); got < d.Put || got >= d.Txn {
		t.Errorf("Put took %v, want %v and less than %v", got, d.Put, d.Txn)
	}
	if got := took("Txn", func() error { _, err := cli.Txn(ctx).Then(clientv3.OpPut("k", "v")).Commit(); return err }); got < d.Txn {
		t.Errorf("Txn took %v, want at least %v", got, d.Txn)
	}
	if got := took("Get", func() error { _, err := cli.Get(ctx, "k"); return err }); got >= d.Put {
		t.Errorf("Get took %v, want less than %v (reads are not held)", got, d.Put)
	}
}
