package dispatch

import (
	"fmt"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// txnPuts returns n puts to queue, their values cut from one buffer, so
// that a caller can overwrite every value at once, as kv does when it
// reuses a batch produce's memory.
func txnPuts(queue string, n int) (puts []*pb.PutRequest, buf []byte, want []string) {
	for i := range n {
		v := fmt.Sprintf("value-%03d", i)
		want = append(want, v)
		buf = append(buf, v...)
	}
	off := 0
	for i, v := range want {
		puts = append(puts, &pb.PutRequest{Key: fmt.Appendf(nil, "/q/%s/p/%03d", queue, i), Value: buf[off : off+len(v) : off+len(v)]})
		off += len(v)
	}
	return puts, buf, want
}

// TestManager_ProduceDetached_dataDir: with a data dir, a batch produce
// to a queue dispatched here is detached, and the queue delivers the
// values as they were put after the puts' bytes are overwritten (its
// values are their records in the log).
func TestManager_ProduceDetached_dataDir(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DataDir = t.TempDir() })
	if !n.mgr.Detaches() {
		t.Fatal("Detaches with a data dir: false, want true")
	}
	ctx := testCtx(t, 30*time.Second)
	puts, buf, want := txnPuts("jobs", 5)
	detached, err := n.mgr.ProduceDetached(ctx, puts)
	if err != nil || !detached {
		t.Fatalf("ProduceDetached: detached %v, err %v; want true, nil", detached, err)
	}
	for i := range buf {
		buf[i] = 'X'
	}
	cli := n.client(t)
	var got []string
	for _, ev := range collectN(t, cli.Watch(ctx, "/q/jobs/c/w"), len(want), 10*time.Second) {
		got = append(got, string(ev.Kv.Value))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %q after the puts' bytes were overwritten, want %q", got, want)
	}
}

// TestManager_ProduceDetached_forwarded: a batch produce forwarded to
// the queue's dispatcher and answered is detached: the dispatcher
// delivers the values as put after the forwarder's bytes of them are
// overwritten.
func TestManager_ProduceDetached_forwarded(t *testing.T) {
	a, b := pairWithDirs(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/first", "first"); err != nil { // a dispatches
		t.Fatal(err)
	}
	puts, buf, want := txnPuts("jobs", 5)
	if detached, err := b.mgr.ProduceDetached(ctx, puts); err != nil || !detached {
		t.Fatalf("forwarded: detached %v, err %v; want true, nil", detached, err)
	}
	for i := range buf {
		buf[i] = 'X'
	}
	var got []string
	for _, ev := range collectN(t, a.cli.Watch(ctx, "/q/jobs/c/w"), len(want)+1, 10*time.Second) {
		got = append(got, string(ev.Kv.Value))
	}
	want = append(want, "first")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %q after the forwarder's bytes were overwritten, want %q", got, want)
	}
}

// TestManager_ProduceDetached_keeps: what keeps the puts' bytes is never
// detached: a node without a data dir (its queue holds the values as
// put), copies held while the dispatcher is unreachable, and a refused
// txn.
func TestManager_ProduceDetached_keeps(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	t.Run("memory", func(t *testing.T) {
		n := startNode(t, nil)
		if n.mgr.Detaches() {
			t.Error("Detaches without a data dir: true, want false")
		}
		puts, _, _ := txnPuts("jobs", 3)
		if detached, err := n.mgr.ProduceDetached(ctx, puts); err != nil || detached {
			t.Fatalf("without a data dir: detached %v, err %v; want false, nil", detached, err)
		}
	})
	t.Run("held", func(t *testing.T) {
		cl := newCluster(t)
		a, b := cl.start("a", nil), cl.start("b", nil)
		connect(a, b)
		if _, err := a.cli.Put(ctx, "/q/jobs/p/first", "v"); err != nil { // a dispatches
			t.Fatal(err)
		}
		waitUntil(t, 5*time.Second, "the record on b", func() bool { return recordOn(b, "jobs") != "" })
		a.stop() // still listed by b: its puts are held
		puts, _, _ := txnPuts("jobs", 3)
		if detached, err := b.mgr.ProduceDetached(ctx, puts); err != nil || detached {
			t.Fatalf("held: detached %v, err %v; want false, nil", detached, err)
		}
		if q, _ := queueOn(b, "jobs"); q.Held != 3 {
			t.Fatalf("b holds %d copies, want 3", q.Held)
		}
	})
	t.Run("refused", func(t *testing.T) {
		n := startNode(t, func(c *Config) { c.DataDir = t.TempDir() })
		puts, _, _ := txnPuts("jobs", 3)
		puts[2].Key = []byte("/q/jobs/p/a/b") // not one segment
		if detached, err := n.mgr.ProduceDetached(ctx, puts); err == nil || detached {
			t.Fatalf("a refused txn: detached %v, err %v; want false and an error", detached, err)
		}
	})
}
