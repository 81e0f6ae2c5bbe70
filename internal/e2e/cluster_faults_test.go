//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// fastDetection bounds how long the fast gossip profile takes to report a
// killed node failed; gossip/config.go expects 0.3-0.6 s for three nodes.
const fastDetection = 3 * time.Second

// writer puts and deletes keys on the nodes of a cluster and keeps what
// every node must end with. It is meant for one goroutine.
type writer struct {
	t     *testing.T
	nodes []*Proc
	clis  []*clientv3.Client
	want  map[string]string
	n     int // writes so far
}

func newWriter(t *testing.T, nodes []*Proc, clis []*clientv3.Client) *writer {
	return &writer{t: t, nodes: nodes, clis: clis, want: make(map[string]string)}
}

// put writes key on node i.
func (w *writer) put(i int, key string) {
	w.t.Helper()
	if err := w.tryPut(i, key); err != nil {
		w.t.Fatal(err)
	}
}

// tryPut writes key on node i; unlike put, it may run on a goroutine of
// its own.
func (w *writer) tryPut(i int, key string) error {
	w.n++
	val := fmt.Sprintf("%s#%d@%s", key, w.n, w.nodes[i].Name)
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := w.clis[i].Put(ctx, key, val); err != nil {
		return fmt.Errorf("put %s on %s: %w", key, w.nodes[i].Name, err)
	}
	w.want[key] = val
	return nil
}

// del deletes key on node i.
func (w *writer) del(i int, key string) {
	w.t.Helper()
	w.n++
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := w.clis[i].Delete(ctx, key); err != nil {
		w.t.Fatalf("delete %s on %s: %v", key, w.nodes[i].Name, err)
	}
	delete(w.want, key)
}

// mixed puts n keys prefix/000, prefix/001, ... on the nodes on,
// round-robin; then it deletes every fifth key of old and overwrites every
// third of the others.
func (w *writer) mixed(prefix string, n int, on []int, old []string) {
	w.t.Helper()
	for i := range n {
		w.put(on[i%len(on)], fmt.Sprintf("%s/%03d", prefix, i))
	}
	for j, key := range old {
		switch {
		case j%5 == 0:
			w.del(on[j%len(on)], key)
		case j%3 == 0:
			w.put(on[j%len(on)], key)
		}
	}
}

// keys returns the keys w wants, sorted.
func (w *writer) keys() []string { return slices.Sorted(maps.Keys(w.want)) }

// waitGoneFrom polls the member lists of the nodes on until none lists
// name, and returns for each node how long after since it took.
func waitGoneFrom(t *testing.T, name string, on []*Proc, clis []*clientv3.Client, since time.Time, timeout time.Duration) []time.Duration {
	t.Helper()
	took := make([]time.Duration, len(on))
	deadline := time.Now().Add(timeout)
	for pending := len(on); pending > 0; {
		for i, cli := range clis {
			if took[i] != 0 {
				continue
			}
			names, err := memberNames(cli)
			if err != nil {
				t.Fatalf("member list of %s: %v", on[i].Name, err)
			}
			if !slices.Contains(names, name) {
				took[i] = time.Since(since)
				pending--
			}
		}
		if pending > 0 && time.Now().After(deadline) {
			t.Fatalf("%s still in a member list %v after it stopped (gone after %v)", name, timeout, took)
		}
		time.Sleep(clusterPoll)
	}
	return took
}

// TestCluster_killAndRejoin kills b with SIGKILL: a and c drop it from
// their member lists within fastDetection (the time is logged). Keys are
// written before, during (before and after the detection) and while b
// restarts with empty memory and --join; then b holds every key and value
// the others hold, and etcdctl endpoint hashkv agrees on all three.
func TestCluster_killAndRejoin(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	all := []*Proc{a, b, cc}
	clis := clientsOf(t, all...)
	w := newWriter(t, all, clis)
	w.mixed("before", 60, []int{0, 1, 2}, nil)
	waitConverged(t, all, clis, w.want, convergeTimeout)
	before := w.keys()

	killed := time.Now()
	b.Kill()
	w.mixed("killed", 30, []int{0, 2}, nil) // while a and c may still count b in
	gone := waitGoneFrom(t, "b", []*Proc{a, cc}, []*clientv3.Client{clis[0], clis[2]}, killed, membershipTimeout)
	t.Logf("kill -9 b: gone from a's member list after %v, from c's after %v (fast gossip profile)", gone[0], gone[1])
	for i, d := range gone {
		if d > fastDetection {
			t.Errorf("b left %s's member list %v after kill -9, want within %v", []string{"a", "c"}[i], d, fastDetection)
		}
	}
	waitMembers(t, []*Proc{a, cc}, []*Proc{a, cc})
	w.mixed("absent", 60, []int{0, 2}, before)

	// b restarts (same name, addresses and --join) while a and c take writes.
	restarting := newWriter(t, []*Proc{a, cc}, []*clientv3.Client{clis[0], clis[2]})
	restarted := make(chan struct{})
	writesDone := make(chan error, 1)
	go func() {
		pace := time.NewTicker(5 * time.Millisecond) // a steady rate, not a condition
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-restarted:
				writesDone <- nil
				return
			case <-pace.C:
			}
			if err := restarting.tryPut(i%2, fmt.Sprintf("restart/%04d", i)); err != nil {
				writesDone <- err
				return
			}
		}
	}()
	restartAt := time.Now()
	b.Restart(t)
	close(restarted)
	if err := <-writesDone; err != nil {
		t.Fatal(err)
	}
	for k, v := range restarting.want {
		w.want[k] = v
	}
	w.mixed("back", 30, []int{0, 2}, nil) // while b pulls
	clis[1] = clusterClient(t, b.ClientAddr)
	waitMembers(t, all, all)
	waitConverged(t, all, clis, w.want, convergeTimeout)
	t.Logf("b restarted with empty memory and --join: all three hold the same %d keys (%d written while b started) %v after the restart began",
		len(w.want), len(restarting.want), time.Since(restartAt))
	requireCtlHashKV(t, all)
}

// freezeFor is how long TestCluster_frozenNodeConverges keeps b stopped:
// the acceptance's 30 s. That is also past the fast profile's serf reap
// timeout (10 s), so a and c have forgotten b, not only declared it
// failed, when it resumes. The test runs in parallel with the others; the
// whole e2e package takes about 2 minutes on 2 cores. 5 s would still
// cover the failed-and-back path, not the reaped one.
const freezeFor = 30 * time.Second

// TestCluster_frozenNodeConverges stops b with SIGSTOP for freezeFor while
// a and c take puts, overwrites and deletes of keys b holds, then resumes
// it: within convergeTimeout all three hold the same keys and values,
// etcdctl endpoint hashkv agrees, and b answers for single keys written,
// overwritten and deleted while it was frozen.
func TestCluster_frozenNodeConverges(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	all := []*Proc{a, b, cc}
	clis := clientsOf(t, all...)
	w := newWriter(t, all, clis)
	w.mixed("before", 60, []int{0, 1, 2}, nil)
	waitConverged(t, all, clis, w.want, convergeTimeout)
	before := w.keys()

	if err := b.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP b: %v", err)
	}
	frozen := time.Now()
	pace := time.NewTicker(10 * time.Millisecond) // writes at a steady rate, not a condition
	defer pace.Stop()
	var droppedAfter time.Duration
	for i := 0; time.Since(frozen) < freezeFor; i++ {
		<-pace.C
		switch on := []int{0, 2}[i%2]; {
		case i < len(before) && i%4 == 0:
			w.del(on, before[i])
		case i < len(before) && i%4 == 1:
			w.put(on, before[i])
		default:
			w.put(on, fmt.Sprintf("frozen/%05d", i))
		}
		if droppedAfter == 0 && i%10 == 0 && !listsMember(t, clis[0], "b") && !listsMember(t, clis[2], "b") {
			droppedAfter = time.Since(frozen)
		}
	}
	if droppedAfter == 0 {
		t.Logf("a and c still listed b at the end of the %v freeze", freezeFor)
	} else {
		t.Logf("a and c dropped the frozen b from their member lists after %v", droppedAfter)
	}
	if err := b.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT b: %v", err)
	}
	resumed := time.Now()
	clis[1] = clusterClient(t, b.ClientAddr)
	waitConverged(t, all, clis, w.want, convergeTimeout)
	t.Logf("b frozen %v while a and c made %d writes; all three converged %v after SIGCONT",
		freezeFor, w.n, time.Since(resumed))
	requireCtlHashKV(t, all)
	waitMembers(t, all, all)

	// Spot checks through etcdctl on b: a key deleted, one overwritten and
	// the last one written during the freeze.
	etcdctl := lookTool(t, "etcdctl")
	keys := w.keys()
	for _, key := range []string{before[0], before[1], keys[len(keys)-1]} {
		res, err := runEtcdctl(etcdctl, b.ClientAddr, "", "get", key)
		want := ""
		if v, ok := w.want[key]; ok {
			want = key + "\n" + v + "\n"
		}
		if err != nil || res.Code != 0 || res.Stdout != want {
			t.Errorf("etcdctl get %s on b: got %q (%v, %+v), want %q", key, res.Stdout, err, res, want)
		}
	}
}

// listsMember reports whether cli's node lists name as a member.
func listsMember(t *testing.T, cli *clientv3.Client, name string) bool {
	t.Helper()
	names, err := memberNames(cli)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	return slices.Contains(names, name)
}
