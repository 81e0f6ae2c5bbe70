//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"chute/internal/chtest"
)

// authClient returns a clientv3 client of p that authenticates as user
// with password, closed when the test ends.
func authClient(t testing.TB, p *Proc, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{p.ClientAddr},
		DialTimeout: 5 * time.Second,
		Username:    user,
		Password:    password,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("clientv3 as %s on %s: %v", user, p, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// requireDenied fails the test unless err is etcd's permission denied.
func requireDenied(t testing.TB, what string, err error) {
	t.Helper()
	if grpcCode(err) != codes.PermissionDenied || err.Error() != rpctypes.ErrPermissionDenied.Error() {
		t.Errorf("%s: got %v (%v), want %v (PermissionDenied)", what, err, grpcCode(err), rpctypes.ErrPermissionDenied)
	}
}

// keySpace returns every key and value root reads, and the revision.
func keySpace(t testing.TB, root *clientv3.Client) (map[string]string, int64) {
	t.Helper()
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := root.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatalf("root: get every key: %v", err)
	}
	m := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m, resp.Header.Revision
}

// authProducers adds root, prod (role producer: write on
// /q/ch:events/p/) and fresh (role fresh: write on /q/ch:fresh/p/) to p
// with etcdctl, and enables auth.
func authProducers(t testing.TB, p *Proc) {
	t.Helper()
	for _, args := range [][]string{
		{"user", "add", "root", "--new-user-password=" + authRootPass},
		{"user", "add", "prod", "--new-user-password=" + authProdPass},
		{"user", "add", "fresh", "--new-user-password=" + authProdPass},
		{"role", "add", "producer"},
		{"role", "add", "fresh"},
		{"role", "grant-permission", "producer", "write", "/q/ch:events/p/", "--prefix"},
		{"role", "grant-permission", "fresh", "write", "/q/ch:fresh/p/", "--prefix"},
		{"user", "grant-role", "prod", "producer"},
		{"user", "grant-role", "fresh", "fresh"},
		{"auth", "enable"},
	} {
		ctlOK(t, p, "", args...)
	}
}

// deniedOp is a call prod must hear "permission denied" for.
type deniedOp struct {
	what string
	op   clientv3.Op
}

// prodDenied are the calls of TestAuth_producer_rowsLandDeniedNothing
// that prod, with write on /q/ch:events/p/ only, may not make: etcd 3.4
// denies them all too.
func prodDenied() []deniedOp {
	return []deniedOp{
		{"put /q/ch:other/p/1", clientv3.OpPut("/q/ch:other/p/1", `{"id":1,"s":"denied"}`)},
		{"put /q/ch:new/p/1", clientv3.OpPut("/q/ch:new/p/1", `{"id":1,"s":"denied"}`)},
		{"put /config/queues/ch:events", clientv3.OpPut("/config/queues/ch:events", `{"max_bytes":10}`)},
		{"put /config/queues/ch:other", clientv3.OpPut("/config/queues/ch:other", `{"max_bytes":10}`)},
		{"get /config/ --prefix", clientv3.OpGet("/config/", clientv3.WithPrefix())},
		{"get /q/ch:events", clientv3.OpGet("/q/ch:events")},
		{"get /q/ch:events/p/0", clientv3.OpGet("/q/ch:events/p/0")},
		{"del /q/ch:events", clientv3.OpDelete("/q/ch:events")},
		{"del /q/ch:events/dlq/ --prefix", clientv3.OpDelete("/q/ch:events/dlq/", clientv3.WithPrefix())},
	}
}

// TestAuth_producer_rowsLandDeniedNothing runs a node with ClickHouse and
// auth enabled. prod's role may write /q/ch:events/p/ only: its puts, a
// batch produce txn and etcdctl puts land as rows of default.events. Its
// put to another queue, to a new queue, to the queue's settings, its get
// of /config/, its delete of the queue's record and of its dead letters,
// and a txn mixing an allowed and a denied put, answer etcd's permission
// denied; afterwards the key space and its revision are as before, no
// denied row is in any table and /status knows no other queue. A user
// with write on /q/ch:fresh/p/ but not on the record /q/ch:fresh cannot
// create that queue; once granted the record it can.
func TestAuth_producer_rowsLandDeniedNothing(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	for _, table := range []string{"events", "other", "new", "fresh"} {
		ch.Exec(t, "CREATE TABLE default."+table+" (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	}
	p := StartChute(t, chFlags(ch)...)
	authProducers(t, p)
	root := authClient(t, p, "root", authRootPass)
	prod := authClient(t, p, "prod", authProdPass)

	// root's put creates the queue: creating one is a write on its record.
	ctx, cancel := rpcCtx()
	_, err := root.Put(ctx, "/q/ch:events/p/0", `{"id":0,"s":"root"}`)
	cancel()
	if err != nil {
		t.Fatalf("root: put /q/ch:events/p/0: %v", err)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.events", "1")
	waitDrained(t, "ch:events", p)

	before, beforeRev := keySpace(t, root)
	for _, d := range prodDenied() {
		ctx, cancel := rpcCtx()
		_, err := prod.Do(ctx, d.op)
		cancel()
		requireDenied(t, "prod: "+d.what, err)
	}
	ctx, cancel = rpcCtx()
	_, err = prod.Txn(ctx).Then(
		clientv3.OpPut("/q/ch:events/p/1000", `{"id":1000,"s":"denied"}`),
		clientv3.OpPut("/q/ch:other/p/1000", `{"id":1000,"s":"denied"}`),
	).Commit()
	cancel()
	requireDenied(t, "prod: txn putting to ch:events and ch:other", err)
	res, err := runEtcdctl(lookTool(t, "etcdctl"), p.ClientAddr, "", "--user", authProd, "put", "/q/ch:other/p/2", `{"id":2,"s":"denied"}`)
	if err != nil || res.Code != 1 || !strings.Contains(res.Stderr, "Error: etcdserver: permission denied") {
		t.Errorf("etcdctl --user prod put /q/ch:other/p/2: got %+v, %v; want exit 1 and permission denied", res, err)
	}

	// fresh may write the producer keys of ch:fresh, not its record.
	fresh := authClient(t, p, "fresh", authProdPass)
	ctx, cancel = rpcCtx()
	_, err = fresh.Put(ctx, "/q/ch:fresh/p/1", `{"id":1,"s":"denied"}`)
	cancel()
	requireDenied(t, "fresh: put /q/ch:fresh/p/1 creating the queue", err)

	after, afterRev := keySpace(t, root)
	if d := dumpDiff(before, after); d != "" || afterRev != beforeRev {
		t.Errorf("key space after the denied calls: revision %d, want %d; %s", afterRev, beforeRev, d)
	}

	// prod's allowed puts: clientv3 puts, a batch produce, etcdctl.
	for i := 1; i <= 50; i++ {
		ctx, cancel := rpcCtx()
		_, err := prod.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", i), fmt.Sprintf(`{"id":%d,"s":"prod"}`, i))
		cancel()
		if err != nil {
			t.Fatalf("prod: put /q/ch:events/p/%d: %v", i, err)
		}
	}
	var batch []clientv3.Op
	for i := 51; i <= 100; i++ {
		batch = append(batch, clientv3.OpPut(fmt.Sprintf("/q/ch:events/p/%d", i), fmt.Sprintf(`{"id":%d,"s":"prod"}`, i)))
	}
	ctx, cancel = rpcCtx()
	_, err = prod.Txn(ctx).Then(batch...).Commit()
	cancel()
	if err != nil {
		t.Fatalf("prod: batch produce of ids 51..100: %v", err)
	}
	for i := 101; i <= 105; i++ {
		ctlOK(t, p, "", "--user", authProd, "put", fmt.Sprintf("/q/ch:events/p/%d", i), fmt.Sprintf(`{"id":%d,"s":"prod"}`, i))
	}
	waitQuery(t, ch, rowsTimeout,
		"SELECT count(), uniqExact(id), min(id), max(id), countIf(s = 'prod'), countIf(s = 'denied') FROM default.events",
		"106\t106\t0\t105\t105\t0")
	waitDrained(t, "ch:events", p)

	// Granted the record, fresh creates ch:fresh.
	ctlOK(t, p, "", "--user", authRoot, "role", "grant-permission", "fresh", "write", "/q/ch:fresh")
	ctx, cancel = rpcCtx()
	_, err = fresh.Put(ctx, "/q/ch:fresh/p/2", `{"id":2,"s":"fresh"}`)
	cancel()
	if err != nil {
		t.Fatalf("fresh with write on /q/ch:fresh: put /q/ch:fresh/p/2: %v", err)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT count(), any(id), any(s) FROM default.fresh", "1\t2\tfresh")
	waitDrained(t, "ch:fresh", p)

	for _, table := range []string{"other", "new"} {
		if got := ch.Query(t, "SELECT count() FROM default."+table); got != "0" {
			t.Errorf("default.%s after the denied puts: got %s rows, want 0", table, got)
		}
	}
	for _, q := range []string{"ch:other", "ch:new"} {
		if got, ok, err := queueOn(p, q); err != nil || ok {
			t.Errorf("/status: queue %s: got %+v, known %v, %v; want unknown", q, got, ok, err)
		}
	}
	ctx, cancel = rpcCtx()
	defer cancel()
	for _, prefix := range []string{"/q/ch:other", "/q/ch:new", "/config/"} {
		resp, err := root.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil || len(resp.Kvs) != 0 {
			t.Errorf("root: get %s --prefix: got %v, %v; want no keys", prefix, resp, err)
		}
	}
}
