//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A client that writes through one node and reads through the next reads
// its own write, at a revision that never goes back.
func TestRaft_readYourWrites(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	const rounds = 1000
	var lastRev int64
	stale, backwards := 0, 0
	monotonic := func(rev int64) {
		if rev < lastRev {
			backwards++
		}
		lastRev = rev
	}
	start := time.Now()
	for i := range rounds {
		w, r := i%len(clis), (i+1)%len(clis)
		val := strconv.Itoa(i)
		ctx, cancel := rpcCtx()
		put, err := clis[w].Put(ctx, "ryw", val)
		if err != nil {
			cancel()
			t.Fatalf("round %d: put on %s: %v", i, nodes[w].Name, err)
		}
		monotonic(put.Header.Revision)
		get, err := clis[r].Get(ctx, "ryw")
		cancel()
		if err != nil {
			t.Fatalf("round %d: get on %s: %v", i, nodes[r].Name, err)
		}
		monotonic(get.Header.Revision)
		if len(get.Kvs) != 1 || string(get.Kvs[0].Value) != val || get.Kvs[0].ModRevision != put.Header.Revision {
			stale++
			if stale <= 3 {
				t.Errorf("round %d: get on %s after put on %s (rev %d): got %v, want %q at mod rev %d",
					i, nodes[r].Name, nodes[w].Name, put.Header.Revision, get.Kvs, val, put.Header.Revision)
			}
		}
	}
	t.Logf("%d rounds of put and get in %v", rounds, time.Since(start).Round(time.Millisecond))
	if stale != 0 || backwards != 0 {
		t.Errorf("got %d stale reads and %d header revisions going back in %d rounds, want 0 and 0", stale, backwards, rounds)
	}
}

// A watch opened on b from a revision of a put on a sees exactly the
// later events, with a's revisions.
func TestRaft_watch_resumeOnAnotherNode(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	a, b, c := clis[0], clis[1], clis[2]
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()

	var revs []int64
	put := func(cli *clientv3.Client, key, val string) {
		t.Helper()
		resp, err := cli.Put(ctx, key, val)
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	for i := range 5 {
		put(a, fmt.Sprintf("w/%d", i), "a")
	}
	from := revs[2] + 1 // the watch starts after the third put
	wch := b.Watch(ctx, "w/", clientv3.WithPrefix(), clientv3.WithRev(from))
	put(c, "w/5", "c")
	put(a, "w/6", "a")
	put(b, "w/end", "b")

	type event struct {
		key string
		rev int64
	}
	want := []event{{"w/3", revs[3]}, {"w/4", revs[4]}, {"w/5", revs[5]}, {"w/6", revs[6]}, {"w/end", revs[7]}}
	var got []event
	for len(got) == 0 || got[len(got)-1].key != "w/end" {
		resp, ok := <-wch
		if !ok {
			t.Fatalf("watch on %s from rev %d: closed after %v: %v", nodes[1].Name, from, got, ctx.Err())
		}
		if err := resp.Err(); err != nil {
			t.Fatalf("watch on %s from rev %d: %v", nodes[1].Name, from, err)
		}
		for _, ev := range resp.Events {
			got = append(got, event{string(ev.Kv.Key), ev.Kv.ModRevision})
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("watch on %s from rev %d (a put's on %s): got %v, want %v", nodes[1].Name, from, nodes[0].Name, got, want)
	}
}

// A compaction through a compacts b and c: reads below it fail there.
func TestRaft_compaction_clusterWide(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	var revs []int64
	for i := range 6 {
		resp, err := clis[i%3].Put(ctx, "compact/k", strconv.Itoa(i))
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	at := revs[3]
	if _, err := clis[0].Compact(ctx, at); err != nil {
		t.Fatalf("compact on %s at %d: %v", nodes[0].Name, at, err)
	}
	for i, cli := range clis {
		_, err := cli.Get(ctx, "compact/k", clientv3.WithRev(revs[1]))
		if !errors.Is(err, rpctypes.ErrCompacted) {
			t.Errorf("%s: get at rev %d after compaction at %d: got %v, want %v", nodes[i].Name, revs[1], at, err, rpctypes.ErrCompacted)
		}
		resp, err := cli.Get(ctx, "compact/k", clientv3.WithRev(at))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "3" {
			t.Errorf("%s: get at the compaction's rev %d: got %v, %v; want value 3", nodes[i].Name, at, resp, err)
		}
	}
	// Compacting again at the same revision is refused on every node.
	for i, cli := range clis {
		if _, err := cli.Compact(ctx, at); !errors.Is(err, rpctypes.ErrCompacted) {
			t.Errorf("%s: compact again at %d: got %v, want %v", nodes[i].Name, at, err, rpctypes.ErrCompacted)
		}
	}
}
