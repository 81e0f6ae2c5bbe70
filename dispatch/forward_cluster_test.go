package dispatch

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCluster_forwardKeyNotUTF8: a put whose key is not UTF-8 (etcd
// takes any bytes) cannot be encoded for the dispatcher: the forwarding
// member refuses it InvalidArgument, holds nothing, and its stream goes
// on carrying the next put.
func TestCluster_forwardKeyNotUTF8(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.Put(ctx, "/q/jobs/p/\xff\xfe", "v"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("put of a key not UTF-8 on the forwarder: got %v, want InvalidArgument", err)
	}
	if _, err := b.cli.Put(ctx, "/q/jobs/p/after", "v"); err != nil {
		t.Fatalf("the next put on the forwarder: %v", err)
	}
	for _, q := range b.mgr.Status().Queues {
		if q.Held != 0 {
			t.Errorf("forwarder holds %d copies, want 0", q.Held)
		}
	}
	for _, q := range a.mgr.Status().Queues {
		if q.Name == "jobs" && q.Rows != 2 {
			t.Errorf("dispatcher's rows: got %d, want 2 (first, after)", q.Rows)
		}
	}
}

// TestCluster_keyNotUTF8OnTheDispatcher: the dispatcher's own member
// refuses a key, queue name or consumer id that is not UTF-8 as a
// forwarding member does. It used to keep such a message, which no
// handover, backup or forward can carry: once the queue moved, its
// handover failed for good and the messages after it stayed behind,
// delivered to nobody.
func TestCluster_keyNotUTF8OnTheDispatcher(t *testing.T) {
	cl := newCluster(t)
	a := cl.start("a", nil)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"/q/jobs/p/\xff\xfe", "/q/j\xffobs/p/k"} {
		if _, err := a.cli.Put(ctx, key, "v"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not UTF-8") {
			t.Errorf("put to %q on the dispatcher's member: got %v, want InvalidArgument, not UTF-8", key, err)
		}
	}
	txn := a.cli.Txn(ctx).Then(clientv3.OpPut("/q/jobs/p/ok", "v"), clientv3.OpPut("/q/jobs/p/\xff", "v"))
	if _, err := txn.Commit(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a txn with a key not UTF-8: got %v, want InvalidArgument", err)
	}
	if q, _ := queueOn(a, "jobs"); q.Rows != 1 {
		t.Errorf("the queue's rows: got %d, want 1 (first)", q.Rows)
	}
	resp := <-a.cli.Watch(ctx, "/q/jobs/c/\xff")
	if resp.Err() == nil || !strings.Contains(resp.Err().Error(), "not UTF-8") {
		t.Errorf("a consumer id not UTF-8: watch answered %+v %v (canceled %v), want refused", resp, resp.Err(), resp.Canceled)
	}
}

// TestCluster_forwardedTxnRowsChecked: a forwarding member leaves the
// check of a txn's ClickHouse rows to the queue's dispatcher, yet the
// client sees what it would see from the dispatcher's own member: a txn
// with one row that is not a JSON object fails InvalidArgument naming
// the put's key as the client spelled it, and none of its puts is kept.
// A txn to two queues is checked whole before any is forwarded, a txn
// to a queue nobody dispatches before the queue is claimed, and rows
// held while the dispatcher is unreachable before they are held.
func TestCluster_forwardedTxnRowsChecked(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	for _, q := range []string{"ch:events", "ch:other"} {
		if _, err := a.cli.Put(ctx, "/q/"+q+"/p/first", `{"id":0}`); err != nil { // a dispatches
			t.Fatal(err)
		}
	}
	waitUntil(t, 5*time.Second, "the records on b", func() bool {
		return recordOn(b, "ch:events") != "" && recordOn(b, "ch:other") != ""
	})
	rowsOn := func(m *member, q string) int {
		s, _ := queueOn(m, q)
		return s.Rows + s.Held
	}
	txn := func(ops ...clientv3.Op) error {
		_, err := b.cli.Txn(ctx).Then(ops...).Commit()
		return err
	}
	bad := `{"id":2} trailing`

	err := txn(clientv3.OpPut("/queue/ch:events/producer/k1", `{"id":1}`), clientv3.OpPut("/queue/ch:events/producer/k2", bad), clientv3.OpPut("/queue/ch:events/producer/k3", `{"id":3}`))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/queue/ch:events/producer/k2: ") {
		t.Fatalf("forwarded txn with a bad row: %v, want InvalidArgument naming /queue/ch:events/producer/k2", err)
	}
	err = txn(clientv3.OpPut("/q/ch:events/p/k4", `{"id":4}`), clientv3.OpPut("/q/ch:other/p/k5", bad))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/q/ch:other/p/k5: ") {
		t.Fatalf("txn to two queues with a bad row in the second: %v, want InvalidArgument naming /q/ch:other/p/k5", err)
	}
	for _, q := range []string{"ch:events", "ch:other"} {
		if n := rowsOn(a, q); n != 1 {
			t.Errorf("%s on the dispatcher: %d rows, want 1 (the first put only)", q, n)
		}
	}
	if err := txn(clientv3.OpPut("/q/ch:events/p/k6", `{"id":6}`), clientv3.OpPut("/q/ch:events/p/k7", `{"id":7}`)); err != nil {
		t.Fatalf("a good txn after: %v", err)
	}
	if n := rowsOn(a, "ch:events"); n != 3 {
		t.Errorf("ch:events on the dispatcher after a good txn: %d rows, want 3", n)
	}

	err = txn(clientv3.OpPut("/q/ch:fresh/p/k1", `{"id":1}`), clientv3.OpPut("/q/ch:fresh/p/k2", bad))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/q/ch:fresh/p/k2: ") {
		t.Fatalf("txn with a bad row to a queue nobody dispatches: %v, want InvalidArgument naming /q/ch:fresh/p/k2", err)
	}
	for _, m := range []*member{a, b} {
		if rec := recordOn(m, "ch:fresh"); rec != "" {
			t.Errorf("a refused txn to a new queue claimed it: record %q on %s, want none", rec, m.name)
		}
	}

	a.stop() // still listed by b: its puts are held
	err = txn(clientv3.OpPut("/q/ch:events/p/k8", `{"id":8}`), clientv3.OpPut("/q/ch:events/p/k9", bad))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/q/ch:events/p/k9: ") {
		t.Fatalf("txn with a bad row while the dispatcher is unreachable: %v, want InvalidArgument naming /q/ch:events/p/k9", err)
	}
	if n := rowsOn(b, "ch:events"); n != 0 {
		t.Errorf("b holds %d copies of a refused txn, want 0", n)
	}
	if err := txn(clientv3.OpPut("/q/ch:events/p/k10", `{"id":10}`), clientv3.OpPut("/q/ch:events/p/k11", `{"id":11}`)); err != nil {
		t.Fatalf("a good txn while the dispatcher is unreachable: %v", err)
	}
	if n := rowsOn(b, "ch:events"); n != 2 {
		t.Errorf("b holds %d copies of a good txn, want 2", n)
	}
}

// TestCluster_forwarderFollowsANewAddress: a member back under its name
// at another peer address (its process restarted elsewhere before serf
// reported it gone) is reached there: the reconcile round drops the
// stream to the old address. It was kept, dialing the old address, for
// as long as the member stayed alive.
func TestCluster_forwarderFollowsANewAddress(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	f, err := a.mgr.forwarderFor(b.id)
	if err != nil {
		t.Fatal(err)
	}
	b.stop()
	b2 := cl.start("b", nil)
	connect(a, b2)
	if f.addr == b2.asPeer().Addr {
		t.Fatalf("the restarted member listens at %s, the old address", f.addr)
	}
	a.mgr.reconcile()
	f2, err := a.mgr.forwarderFor(b2.id)
	if err != nil {
		t.Fatal(err)
	}
	if f2 == f || f2.addr != b2.asPeer().Addr {
		t.Fatalf("forwarder to b dials %s after the round, want %s", f2.addr, b2.asPeer().Addr)
	}
}
