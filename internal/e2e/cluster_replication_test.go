//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// What TestCluster_putsReplicate writes and requires.
const (
	replicatedPuts     = 1000
	replicationWriters = 4
	replicationP99     = time.Second // the acceptance: a put is on every node within 1 s
)

// arrivals records, per node, the PUT events its watch delivered, in order.
type arrivals struct {
	mu   sync.Mutex
	keys []string
	at   map[string]time.Time // first arrival of each key
	dups []string             // keys that arrived more than once
	full chan struct{}        // closed once want distinct keys arrived
	want int
}

func (a *arrivals) add(key string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.at[key]; ok {
		a.dups = append(a.dups, key)
		return
	}
	a.at[key] = at
	a.keys = append(a.keys, key)
	if len(a.keys) == a.want {
		close(a.full)
	}
}

// watchArrivals watches prefix on cli from now on, waits until the watch
// is set up, and records each PUT event's arrival until the test ends.
func watchArrivals(t *testing.T, cli *clientv3.Client, prefix string, want int) *arrivals {
	t.Helper()
	a := &arrivals{at: make(map[string]time.Time), full: make(chan struct{}), want: want}
	ctx, cancel := context.WithCancel(context.Background())
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	select {
	case resp, ok := <-wch:
		if !ok || !resp.Created {
			cancel()
			t.Fatalf("watch %s: got %+v (open %v), want the created response", prefix, resp, ok)
		}
	case <-time.After(rpcTimeout):
		cancel()
		t.Fatalf("watch %s: not created within %v", prefix, rpcTimeout)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for resp := range wch {
			now := time.Now()
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					a.add(string(ev.Kv.Key), now)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// TestCluster_putsReplicate puts 1,000 keys, round-robin over a, b and c
// with a few concurrent writers, and watches every node. Each key reaches
// the two other nodes with a p99 delay under a second, from the put's
// return on its node to the event on theirs; each node's watch sees a
// node's puts in that node's revision order; every node ends with the
// same keys and values.
func TestCluster_putsReplicate(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	nodes := []*Proc{a, b, cc}
	clis := clientsOf(t, nodes...)
	watches := make([]*arrivals, len(nodes))
	for i, cli := range clientsOf(t, nodes...) {
		watches[i] = watchArrivals(t, cli, "r/", replicatedPuts)
	}

	type put struct {
		node     int
		rev      int64 // the revision the put got on its node
		returned time.Time
	}
	puts := make([]put, replicatedPuts)
	want := make(map[string]string, replicatedPuts)
	key := func(i int) string { return fmt.Sprintf("r/%04d", i) }
	value := func(i int) string { return fmt.Sprintf("v%d@%s", i, nodes[i%len(nodes)].Name) }
	for i := range replicatedPuts {
		want[key(i)] = value(i)
	}
	var next atomic.Int64
	var failed errorOnce
	var wg sync.WaitGroup
	start := time.Now()
	for range replicationWriters {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= replicatedPuts || failed.get() != nil {
					return
				}
				n := i % len(nodes)
				ctx, cancel := rpcCtx()
				resp, err := clis[n].Put(ctx, key(i), value(i))
				returned := time.Now()
				cancel()
				if err != nil {
					failed.set(fmt.Errorf("put %s on %s: %w", key(i), nodes[n].Name, err))
					return
				}
				puts[i] = put{node: n, rev: resp.Header.Revision, returned: returned}
			}
		})
	}
	wg.Wait()
	if err := failed.get(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d puts by %d writers in %v", replicatedPuts, replicationWriters, time.Since(start))

	deadline := time.After(convergeTimeout)
	for i, w := range watches {
		select {
		case <-w.full:
		case <-deadline:
			w.mu.Lock()
			got := len(w.keys)
			w.mu.Unlock()
			t.Fatalf("watch on %s: %d of %d keys within %v", nodes[i].Name, got, replicatedPuts, convergeTimeout)
		}
	}

	var delays []time.Duration
	for n, w := range watches {
		w.mu.Lock()
		for i, p := range puts {
			if p.node == n {
				continue
			}
			delays = append(delays, max(0, w.at[key(i)].Sub(p.returned)))
		}
		if len(w.dups) > 0 {
			t.Errorf("watch on %s: %d keys arrived twice, such as %q", nodes[n].Name, len(w.dups), w.dups[0])
		}
		w.mu.Unlock()
	}
	st := statsOf(delays)
	t.Logf("replication delay, put returned -> event on another node: %v", st)
	if st.p99 >= replicationP99 {
		t.Errorf("replication delay p99 = %v, want < %v (%v)", st.p99, replicationP99, st)
	}

	// Each watch sees each node's puts in the order of that node's revisions.
	for origin := range nodes {
		var byRev []int
		for i, p := range puts {
			if p.node == origin {
				byRev = append(byRev, i)
			}
		}
		slices.SortFunc(byRev, func(x, y int) int { return cmp.Compare(puts[x].rev, puts[y].rev) })
		wantOrder := make([]string, len(byRev))
		for j, i := range byRev {
			wantOrder[j] = key(i)
		}
		for n, w := range watches {
			if n == origin {
				continue
			}
			w.mu.Lock()
			var got []string
			for _, k := range w.keys {
				var i int
				if _, err := fmt.Sscanf(k, "r/%d", &i); err == nil && puts[i].node == origin {
					got = append(got, k)
				}
			}
			w.mu.Unlock()
			if j := firstDifference(got, wantOrder); j >= 0 {
				t.Errorf("watch on %s: %s's puts out of order at #%d: got %q, want %q (in %s's revision order)",
					nodes[n].Name, nodes[origin].Name, j, around(got, j), around(wantOrder, j), nodes[origin].Name)
			}
		}
	}

	waitConverged(t, nodes, clis, want, convergeTimeout)
	requireCtlHashKV(t, nodes)
}

// firstDifference returns the first index where a and b differ, or -1.
func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// around returns up to three elements of s from i.
func around(s []string, i int) []string {
	return s[min(i, len(s)):min(i+3, len(s))]
}

// Writes of TestCluster_concurrentSameKey.
const (
	sameKeyWriters = 2   // per node
	sameKeyWrites  = 150 // per writer
)

// TestCluster_concurrentSameKey writes one key many times at once on a
// and on c, and a second key with puts on a and deletes on c. Last writer
// wins by stamp, so every node ends with the same value of the first key
// (one that was written) and the same state of the second. Then single
// overwrites on c, b, a and c, each once the previous one is everywhere,
// win everywhere.
func TestCluster_concurrentSameKey(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	nodes := []*Proc{a, b, cc}
	clis := clientsOf(t, nodes...)

	written := make(map[string]bool) // values of "same"
	var failed errorOnce
	var wg sync.WaitGroup
	for _, n := range []int{0, 2} {
		for w := range sameKeyWriters {
			vals := make([]string, sameKeyWrites)
			for j := range vals {
				vals[j] = fmt.Sprintf("%s-w%d-%d", nodes[n].Name, w, j)
				written[vals[j]] = true
			}
			wg.Go(func() {
				for j, v := range vals {
					ctx, cancel := rpcCtx()
					_, err := clis[n].Put(ctx, "same", v)
					if err == nil {
						// The other key: a puts, c deletes.
						if n == 0 {
							_, err = clis[n].Put(ctx, "put-or-del", v)
						} else if j%2 == 0 {
							_, err = clis[n].Delete(ctx, "put-or-del")
						}
					}
					cancel()
					if err != nil {
						failed.set(fmt.Errorf("write on %s: %w", nodes[n].Name, err))
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if err := failed.get(); err != nil {
		t.Fatal(err)
	}

	took := waitConverged(t, nodes, clis, nil, convergeTimeout)
	got, err := dump(clis[1])
	if err != nil {
		t.Fatal(err)
	}
	if !written[got["same"]] {
		t.Errorf("same = %q on every node, want one of the values written", got["same"])
	}
	if v, ok := got["put-or-del"]; ok && !written[v] {
		t.Errorf("put-or-del = %q on every node, want one of the values written, or none", v)
	}
	t.Logf("converged %v after the last write: same = %q, put-or-del = %q (present %v)",
		took, got["same"], got["put-or-del"], got["put-or-del"] != "")
	requireCtlHashKV(t, nodes)

	// A write made on a node that has seen the others' writes wins
	// everywhere, whichever node made more writes before: a node's stamps
	// follow the stamps it has applied.
	for _, n := range []int{2, 1, 0, 2} {
		val := "after-all-on-" + nodes[n].Name
		ctx, cancel := rpcCtx()
		_, err := clis[n].Put(ctx, "same", val)
		cancel()
		if err != nil {
			t.Fatalf("put same on %s: %v", nodes[n].Name, err)
		}
		got["same"] = val
		waitConverged(t, nodes, clis, got, convergeTimeout)
	}
}
