package dispatch

import (
	"bytes"
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

// TestManager_ProduceDetached_keeps: what keeps the puts' bytes is never
// detached: a node without a data dir (its queue holds the values as
// put), and a put forwarded to another member.
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
	t.Run("forwarded", func(t *testing.T) {
		cl := newCluster(t)
		withDir := func(c *Config) { c.DataDir = t.TempDir() }
		a, b := cl.start("a", withDir), cl.start("b", withDir)
		connect(a, b)
		if _, err := a.cli.Put(ctx, "/q/jobs/p/first", "v"); err != nil { // a dispatches
			t.Fatal(err)
		}
		puts, buf, _ := txnPuts("jobs", 3)
		if detached, err := b.mgr.ProduceDetached(ctx, puts); err != nil || detached {
			t.Fatalf("forwarded: detached %v, err %v; want false, nil", detached, err)
		}
		if !bytes.HasPrefix(buf, []byte("value-000")) {
			t.Fatalf("the puts' bytes changed: %q", buf)
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
