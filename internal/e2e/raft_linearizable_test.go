//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/faults"
)

// Bounds of the linearizability scenario.
const (
	linClients    = 10
	linKeys       = 4
	linOpTimeout  = 3 * time.Second  // one client call; none answered by then is unknown
	linCheckLimit = 60 * time.Second // porcupine's search
	linMinOps     = 100              // answered gets and writes a history needs to say much
	linMoreTime   = 30 * time.Second // the workload's extension on a machine too loaded to reach linMinOps
)

// startRaftThree plans a, b and c, each naming the other two as seeds,
// starts them at once with --bootstrap-expect 3 (so that they bootstrap
// one raft cluster of three voters together) and waits until each is
// ready. extra flags go to every node.
func (c *cluster) startRaftThree(extra ...string) []*Proc {
	c.t.Helper()
	plans := []nodePlan{c.plan("a"), c.plan("b"), c.plan("c")}
	nodes := make([]*Proc, len(plans))
	for i, pl := range plans {
		var seeds []string
		for j, other := range plans {
			if j != i {
				seeds = append(seeds, other.GossipAddr)
			}
		}
		args := append([]string{"--join", strings.Join(seeds, ","), "--bootstrap-expect", "3"}, extra...)
		p, err := launchChute(c.t, c.args(pl, args...), c.env)
		if err != nil {
			c.t.Fatalf("e2e: start %s: %v", pl.Name, err)
		}
		nodes[i] = p
	}
	for _, p := range nodes {
		if err := p.waitReady(readyTimeout); err != nil {
			c.t.Fatalf("e2e: start %s: %v", p.Name, err)
		}
	}
	return nodes
}

// raftLeader returns the index of the node the alive nodes of nodes name
// as the raft leader, once every one of them answers Status with the
// same leader and that leader says it leads (its header's member id).
func raftLeader(t testing.TB, nodes []*Proc, clis []*clientv3.Client, alive []int) int {
	t.Helper()
	deadline := time.Now().Add(leaderTimeout)
	for {
		idx, err := agreedLeader(nodes, clis, alive)
		if err == nil {
			return idx
		}
		if time.Now().After(deadline) {
			t.Fatalf("e2e: no raft leader agreed within %v: %v", leaderTimeout, err)
		}
		time.Sleep(clusterPoll)
	}
}

func agreedLeader(nodes []*Proc, clis []*clientv3.Client, alive []int) (int, error) {
	byMember := make(map[uint64]int)
	var leader uint64
	var seen []string
	for k, i := range alive {
		ctx, cancel := rpcCtx()
		st, err := clis[i].Status(ctx, nodes[i].ClientAddr)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("status of %s: %w", nodes[i].Name, err)
		}
		byMember[st.Header.MemberId] = i
		seen = append(seen, fmt.Sprintf("%s: leader %x", nodes[i].Name, st.Leader))
		if k == 0 {
			leader = st.Leader
		} else if st.Leader != leader {
			return 0, fmt.Errorf("leaders differ: %s", strings.Join(seen, ", "))
		}
	}
	i, ok := byMember[leader]
	if leader == 0 || !ok {
		return 0, fmt.Errorf("no alive node is the leader: %s", strings.Join(seen, ", "))
	}
	return i, nil
}

// registerClient is one client of the register workload: a clientv3
// client of one or all endpoints, and the last value it saw of each key,
// which its compare-and-swaps expect.
type registerClient struct {
	id   int
	cli  *clientv3.Client
	rng  *rand.Rand
	last map[string]string
	n    int // writes so far: values are c<id>-<n>, unique in the run
}

// step does one random operation and records it in h.
func (rc *registerClient) step(h *faults.History) {
	key := fmt.Sprintf("/lin/k%d", rc.rng.IntN(linKeys))
	ctx, cancel := context.WithTimeout(context.Background(), linOpTimeout)
	defer cancel()
	var in faults.KVInput
	var out faults.KVOutput
	call := h.Now()
	switch r := rc.rng.IntN(10); {
	case r < 4:
		in = faults.KVInput{Op: faults.Get, Key: key}
		resp, err := rc.cli.Get(ctx, key)
		if err != nil {
			out.Unknown = true
			break
		}
		out.Revision = resp.Header.Revision
		if len(resp.Kvs) > 0 {
			out.Found, out.Value = true, string(resp.Kvs[0].Value)
			rc.last[key] = out.Value
		}
	case r < 7:
		rc.n++
		in = faults.KVInput{Op: faults.Put, Key: key, Value: fmt.Sprintf("c%d-%d", rc.id, rc.n)}
		resp, err := rc.cli.Put(ctx, key, in.Value)
		if err != nil {
			out.Unknown = true
			break
		}
		out.Revision = resp.Header.Revision
	default:
		rc.n++
		in = faults.KVInput{Op: faults.CAS, Key: key, Expect: rc.last[key], Value: fmt.Sprintf("c%d-%d", rc.id, rc.n)}
		resp, err := rc.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(key), "=", in.Expect)).
			Then(clientv3.OpPut(key, in.Value)).
			Commit()
		if err != nil {
			out.Unknown = true
			break
		}
		out.Swapped, out.Revision = resp.Succeeded, resp.Header.Revision
		if resp.Succeeded {
			rc.last[key] = in.Value
		}
	}
	// Every error counts as unknown: even etcd's "request timed out"
	// may have been applied.
	h.Add(rc.id, in, call, h.Now(), out)
}

// linWorkload is the register workload of the linearizability
// scenarios: linClients clients doing gets, puts and compare-and-swaps on
// linKeys keys of a three-node raft cluster, clients 0-5 on one node each
// (two per node), 6-9 on all three, each recording its calls in one
// history, while watches of the keys record every event (linWatches).
type linWorkload struct {
	t       *testing.T
	h       *faults.History
	nodes   []*Proc
	watches *linWatches
	probe   *clientv3.Client // of all three nodes: reads the store's revision at the end
	seed    uint64
	t0      time.Time
	stop    chan struct{}
	wg      sync.WaitGroup
	counts  [linClients]int // calls per client; read once wg is done
}

// startLinWorkload starts the clients on nodes (three) and lets them
// build up history for a few seconds before it returns, so that the
// first fault falls among answered calls. They run until check.
func startLinWorkload(t *testing.T, nodes []*Proc) *linWorkload {
	t.Helper()
	w := &linWorkload{t: t, h: faults.NewHistory(), nodes: nodes, seed: uint64(time.Now().UnixNano()), t0: time.Now(), stop: make(chan struct{})}
	w.watches = startLinWatches(t, nodes)
	w.probe = clusterClient(t, nodes[0].ClientAddr, nodes[1].ClientAddr, nodes[2].ClientAddr)
	t.Logf("client randomness from seed %d", w.seed)
	for i := range linClients {
		eps := []string{nodes[i%3].ClientAddr}
		if i >= 6 {
			eps = []string{nodes[0].ClientAddr, nodes[1].ClientAddr, nodes[2].ClientAddr}
		}
		rc := &registerClient{id: i, cli: clusterClient(t, eps...), rng: rand.New(rand.NewPCG(w.seed, uint64(i))), last: make(map[string]string)}
		w.wg.Go(func() {
			// Bounded by stop, which comes after the workload's time, and
			// by a count no run of it reaches.
			for n := 0; n < 1_000_000; n++ {
				select {
				case <-w.stop:
					return
				default:
				}
				rc.step(w.h)
				w.counts[i]++
			}
		})
	}
	// A test that fails early still ends its clients.
	t.Cleanup(w.end)
	time.Sleep(4 * time.Second) // clients build up history before the first fault
	return w
}

// end stops the clients and waits for them; it may be called again.
func (w *linWorkload) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// logf logs with the time since the workload started.
func (w *linWorkload) logf(format string, args ...any) {
	w.t.Helper()
	w.t.Logf("+%.3fs "+format, append([]any{time.Since(w.t0).Seconds()}, args...)...)
}

// check ends the workload, waits for the watches to catch up and checks
// what they received (faults.CheckWatch) and the answers' revisions
// (faults.CheckRevisions), and has porcupine check the history per key.
// The faults take a fixed time; a machine too loaded to answer linMinOps
// of each kind in it gets up to linMoreTime more, with every node up,
// before the history counts as too thin. A non-linearizable history
// fails the test and leaves porcupine's visualization in the system's
// temporary directory (the test's own is removed when it ends), named by
// the clients' seed.
func (w *linWorkload) check() {
	t := w.t
	t.Helper()
	more := time.Now().Add(linMoreTime)
	for !tallyOps(w.h.Operations()).enough() && time.Now().Before(more) {
		time.Sleep(100 * time.Millisecond)
	}
	w.end()
	ops := w.h.Operations()
	w.logf("workload ended: %d operations recorded, per client %v", len(ops), w.counts)

	last := w.watches.catchUp(t, w.probe)
	w.logf("watches caught up at revision %d", last)
	if err := faults.CheckWatch(w.watches.streams(), ops, last); err != nil {
		t.Errorf("watches: %v", err)
	}
	if err := faults.CheckRevisions(ops); err != nil {
		t.Errorf("revisions: %v", err)
	}
	w.checkHashes(last)

	n := tallyOps(ops)
	w.logf("history: %d gets, %d puts, %d compare-and-swaps (%d swapped); %d writes of unknown outcome",
		n.gets, n.puts, n.cas, n.swapped, n.unknown)
	if !n.enough() {
		t.Errorf("history too thin to say much after %v more: %d gets, %d writes answered; want at least %d each",
			linMoreTime, n.gets, n.answeredWrites(), linMinOps)
	}
	// CheckKV writes it only for a history that did not pass.
	viz := filepath.Join(os.TempDir(), fmt.Sprintf("chute-linearizable-%d.html", w.seed))
	start := time.Now()
	err := faults.CheckKV(ops, linCheckLimit, viz)
	w.logf("porcupine took %v", time.Since(start).Round(time.Millisecond))
	switch {
	case errors.Is(err, faults.ErrNotLinearizable):
		t.Fatalf("the history of %d operations is not linearizable; porcupine's visualization: %s", len(ops), viz)
	case err != nil:
		t.Fatalf("porcupine: %v; visualization: %s", err, viz)
	}
}

// checkHashes has every node hash its key space at rev (HashKV), as
// etcd's robustness tests end: the members applied one log, so the
// hashes must be equal.
func (w *linWorkload) checkHashes(rev int64) {
	w.t.Helper()
	var seen []string
	var first uint32
	differ := false
	for i, p := range w.nodes {
		ctx, cancel := rpcCtx()
		resp, err := w.probe.HashKV(ctx, p.ClientAddr, rev)
		cancel()
		if err != nil {
			w.t.Errorf("hashkv of %s at revision %d: %v", p.Name, rev, err)
			return
		}
		seen = append(seen, fmt.Sprintf("%s %08x", p.Name, resp.Hash))
		if i == 0 {
			first = resp.Hash
		}
		differ = differ || resp.Hash != first
	}
	w.logf("hashkv at revision %d: %s", rev, strings.Join(seen, ", "))
	if differ {
		w.t.Errorf("hashkv at revision %d differs between nodes: %s", rev, strings.Join(seen, ", "))
	}
}

// othersThan returns the indexes of a three-node cluster but i.
func othersThan(i int) []int {
	var others []int
	for j := range 3 {
		if j != i {
			others = append(others, j)
		}
	}
	return others
}

// linFault is a fault of the linearizability scenarios, done to the
// raft leader, or with onFollower to a follower: begin starts it (named
// by did in the log), end ends it (named by undid) once the other two
// agree on a leader (after a leader's fault, one of their own) and lasted
// more.
type linFault struct {
	did, undid string
	begin, end func(node int) error
	more       time.Duration
	onFollower bool
}

// runLinScenario runs the register workload on the three nodes through
// two rounds of f (runFaultRounds) and has porcupine check the history.
func runLinScenario(t *testing.T, nodes []*Proc, f linFault) {
	t.Helper()
	w := startLinWorkload(t, nodes)
	runFaultRounds(t, nodes, clientsOf(t, nodes...), f, w.logf)
	w.check()
}

// runFaultRounds does two rounds of f to the three nodes, each logged
// with logf and followed by four seconds with every node up. A
// follower's fault falls on each follower in turn.
func runFaultRounds(t *testing.T, nodes []*Proc, clis []*clientv3.Client, f linFault, logf func(string, ...any)) {
	t.Helper()
	all := []int{0, 1, 2}
	for round := range 2 {
		leader := raftLeader(t, nodes, clis, all)
		victim, role := leader, "leader"
		if f.onFollower {
			victim, role = othersThan(leader)[round], "follower"
		}
		if err := f.begin(victim); err != nil {
			t.Fatalf("%s %s: %v", f.did, nodes[victim].Name, err)
		}
		logf("round %d: the %s %s %s", round+1, role, nodes[victim].Name, f.did)
		next := raftLeader(t, nodes, clis, othersThan(victim))
		logf("round %d: %s leads", round+1, nodes[next].Name)
		time.Sleep(f.more)
		if err := f.end(victim); err != nil {
			t.Fatalf("%s %s: %v", f.undid, nodes[victim].Name, err)
		}
		logf("round %d: %s %s", round+1, nodes[victim].Name, f.undid)
		time.Sleep(4 * time.Second)
	}
}

// TestLinearizable_leaderKilled runs the register workload while the raft
// leader is killed with SIGKILL and restarted two seconds after the
// others elect a leader (its clients fail meanwhile), twice, and has
// porcupine check the history.
func TestLinearizable_leaderKilled(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := c.startRaftThree()
	runLinScenario(t, nodes, linFault{
		did: "killed with SIGKILL", undid: "restarted", more: 2 * time.Second,
		begin: func(i int) error { nodes[i].Kill(); return nil },
		end:   func(i int) error { nodes[i].Restart(t); return nil },
	})
}

// TestLinearizable_leaderFrozen runs the register workload while the raft
// leader is frozen with SIGSTOP until the other two elect a leader of
// their own and take writes for two seconds, then resumed with SIGCONT,
// twice. A resumed leader still believes it leads until it hears of the
// new term: whatever it answers its clients meanwhile (a read served from
// its own state would be stale) must fit the history porcupine checks.
func TestLinearizable_leaderFrozen(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := c.startRaftThree()
	runLinScenario(t, nodes, freezeFault(t, nodes, 2*time.Second, false))
}

// freezeFault is the fault of freezing a node with SIGSTOP for more once
// the others agree on a leader, then resuming it with SIGCONT; on a
// follower with onFollower.
func freezeFault(t *testing.T, nodes []*Proc, more time.Duration, onFollower bool) linFault {
	// Runs before the cluster's cleanup stops the nodes: a stopped
	// process takes no SIGTERM.
	t.Cleanup(func() {
		for _, p := range nodes {
			_ = p.Signal(syscall.SIGCONT)
		}
	})
	return linFault{
		did: "frozen with SIGSTOP", undid: "resumed with SIGCONT", more: more, onFollower: onFollower,
		begin: func(i int) error { return nodes[i].Signal(syscall.SIGSTOP) },
		end:   func(i int) error { return nodes[i].Signal(syscall.SIGCONT) },
	}
}

// TestLinearizable_leaderPartitioned runs the register workload on three
// nodes in network namespaces of their own while the raft leader is cut
// off from the other two (its clients still reach it) until they elect a
// leader of their own and take writes for three seconds, then joined
// again, twice. The cut-off member must answer its clients' reads with
// an error or with what the majority holds, never from its own state.
func TestLinearizable_leaderPartitioned(t *testing.T) {
	t.Parallel()
	nc := newNSCluster(t, nil)
	runLinScenario(t, nc.nodes, linFault{
		did: "cut off", undid: "joined again", more: 3 * time.Second,
		begin: nc.net.Isolate,
		end:   nc.net.Heal,
	})
}

// TestLinearizable_followerFrozen runs the register workload while a
// follower is frozen with SIGSTOP for three seconds, longer than raft's
// heartbeat timeout, then resumed with SIGCONT; the first round freezes
// one follower, the second the other. The calls its clients made
// meanwhile are answered (or time out) once it runs again, from a state
// that may be seconds behind the leader's: a read it serves must still
// see every write answered before the read began.
func TestLinearizable_followerFrozen(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := c.startRaftThree()
	runLinScenario(t, nodes, freezeFault(t, nodes, 3*time.Second, true))
}

// TestLinearizable_followerPartitioned runs the register workload on
// three nodes in network namespaces of their own while a follower is cut
// off from the other two (its clients still reach it) for three seconds,
// long enough for it to give up on the leader and stand for election,
// then joined again; each follower in turn. The cut-off follower must not
// answer a read from its own state, and its return, with a term of its
// own, must not undo anything the leader acknowledged.
func TestLinearizable_followerPartitioned(t *testing.T) {
	t.Parallel()
	nc := newNSCluster(t, nil)
	runLinScenario(t, nc.nodes, linFault{
		did: "cut off", undid: "joined again", more: 3 * time.Second, onFollower: true,
		begin: nc.net.Isolate,
		end:   nc.net.Heal,
	})
}

// opTally counts the operations of a register history by kind.
type opTally struct {
	gets, puts, cas int // answered gets; puts and compare-and-swaps
	swapped         int // compare-and-swaps that swapped
	unknown         int // writes of unknown outcome (History leaves such gets out)
}

func tallyOps(ops []porcupine.Operation) opTally {
	var n opTally
	for _, op := range ops {
		out := op.Output.(faults.KVOutput)
		if out.Unknown {
			n.unknown++
		}
		if out.Swapped {
			n.swapped++
		}
		switch op.Input.(faults.KVInput).Op {
		case faults.Get:
			n.gets++
		case faults.Put:
			n.puts++
		case faults.CAS:
			n.cas++
		}
	}
	return n
}

// answeredWrites is the number of writes whose outcome is known.
func (n opTally) answeredWrites() int { return n.puts + n.cas - n.unknown }

// enough reports whether the history has linMinOps answered gets and
// linMinOps answered writes.
func (n opTally) enough() bool { return n.gets >= linMinOps && n.answeredWrites() >= linMinOps }
