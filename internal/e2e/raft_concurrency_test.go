//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"chute/internal/testutil"
)

// Workers of the recipe tests: two per node, each with its own client
// and session on its node.
const recipeWorkers = 6

// recipeTimeout bounds one worker's whole run.
const recipeTimeout = 60 * time.Second

// workerSessions returns recipeWorkers sessions, worker i on node i%3.
func workerSessions(t *testing.T, nodes []*Proc) []*concurrency.Session {
	t.Helper()
	sessions := make([]*concurrency.Session, recipeWorkers)
	for i := range sessions {
		cli := clusterClient(t, nodes[i%len(nodes)].ClientAddr)
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			t.Fatalf("worker %d: session on %s: %v", i, nodes[i%len(nodes)].Name, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		sessions[i] = s
	}
	return sessions
}

// runTogether runs f for each of n workers, released at once, and
// returns the first error.
func runTogether(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	var first errorOnce
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			if err := f(i); err != nil {
				first.set(fmt.Errorf("worker %d: %w", i, err))
			}
		}()
	}
	close(gate)
	wg.Wait()
	return first.get()
}

// A concurrency.Mutex held from all three nodes excludes: no two holders
// at once, and a counter updated in two steps inside it stays exact.
func TestRaft_mutex(t *testing.T) {
	t.Parallel()
	nodes, _ := newCluster(t).startThreeRaft()
	sessions := workerSessions(t, nodes)
	const rounds = 30
	var holders, overlaps, counter atomic.Int64
	start := time.Now()
	err := runTogether(recipeWorkers, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), recipeTimeout)
		defer cancel()
		m := concurrency.NewMutex(sessions[i], "mutex/")
		for r := range rounds {
			if err := m.Lock(ctx); err != nil {
				return fmt.Errorf("round %d: lock: %w", r, err)
			}
			if holders.Add(1) > 1 {
				overlaps.Add(1)
			}
			v := counter.Load() // read, yield, write: lost updates show
			time.Sleep(time.Millisecond)
			counter.Store(v + 1)
			holders.Add(-1)
			if err := m.Unlock(ctx); err != nil {
				return fmt.Errorf("round %d: unlock: %w", r, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d locks in %v", recipeWorkers*rounds, time.Since(start).Round(time.Millisecond))
	if overlaps.Load() != 0 || counter.Load() != recipeWorkers*rounds {
		t.Errorf("got %d overlaps and counter %d, want 0 and %d", overlaps.Load(), counter.Load(), recipeWorkers*rounds)
	}
}

// `etcdctl lock` from two nodes started together excludes: the command
// it runs never finds the other's mark.
func TestRaft_etcdctlLock(t *testing.T) {
	t.Parallel()
	nodes, _ := newCluster(t).startThreeRaft()
	etcdctl := lookTool(t, "etcdctl")
	dir := t.TempDir()
	held, overlaps := filepath.Join(dir, "held"), filepath.Join(dir, "overlaps")
	// mkdir is atomic: it fails when the other holder's mark is there.
	script := fmt.Sprintf("mkdir %[1]s || echo overlap >> %[2]s; sleep 0.02; rmdir %[1]s", held, overlaps)
	const rounds = 20
	start := time.Now()
	err := runTogether(2, func(i int) error {
		for r := range rounds {
			res, err := runEtcdctl(etcdctl, nodes[i].ClientAddr, "", "lock", "ctllock", "--", "sh", "-c", script)
			if err != nil {
				return fmt.Errorf("round %d: %w", r, err)
			}
			if res.Code != 0 {
				return fmt.Errorf("round %d: etcdctl lock on %s: exit %d: %s", r, nodes[i].Name, res.Code, res.Stderr)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d etcdctl locks in %v", 2*rounds, time.Since(start).Round(time.Millisecond))
	if b, err := os.ReadFile(overlaps); err == nil {
		t.Errorf("got %d overlaps in %d rounds of two contenders, want 0", strings.Count(string(b), "overlap"), rounds)
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// An Election with candidates on every node has one leader at a time,
// as its candidates and observers on every node see it, and every
// Campaign returns in bounded time.
func TestRaft_election(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	sessions := workerSessions(t, nodes)
	const (
		rounds      = 3
		campaignMax = 20 * time.Second
	)

	// Observers, one per node, note every leader they see.
	obsCtx, stopObs := context.WithCancel(context.Background())
	defer stopObs()
	observed := make([][]string, len(nodes))
	var obsWG sync.WaitGroup
	for i, cli := range clis {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			t.Fatalf("observer on %s: %v", nodes[i].Name, err)
		}
		defer s.Close()
		ch := concurrency.NewElection(s, "elect/").Observe(obsCtx)
		obsWG.Add(1)
		go func() {
			defer obsWG.Done()
			for resp := range ch {
				v := string(resp.Kvs[0].Value)
				if n := len(observed[i]); n == 0 || observed[i][n-1] != v {
					observed[i] = append(observed[i], v)
				}
			}
		}()
	}

	var (
		holders, overlaps atomic.Int64
		mu                sync.Mutex
		winners           []string // in the order they won
		longest           time.Duration
	)
	err := runTogether(recipeWorkers, func(i int) error {
		e := concurrency.NewElection(sessions[i], "elect/")
		for r := range rounds {
			val := fmt.Sprintf("cand-%d-%d", i, r)
			ctx, cancel := context.WithTimeout(context.Background(), campaignMax)
			began := time.Now()
			err := e.Campaign(ctx, val)
			cancel()
			if err != nil {
				return fmt.Errorf("round %d: campaign: %w (after %v)", r, err, time.Since(began).Round(time.Millisecond))
			}
			if holders.Add(1) > 1 {
				overlaps.Add(1)
			}
			mu.Lock()
			winners = append(winners, val)
			longest = max(longest, time.Since(began))
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // lead a little while
			holders.Add(-1)
			ctx, cancel = rpcCtx()
			err = e.Resign(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("round %d: resign: %w", r, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stopObs()
	obsWG.Wait()
	t.Logf("%d terms, longest campaign %v", len(winners), longest.Round(time.Millisecond))
	if overlaps.Load() != 0 {
		t.Errorf("got %d times two leaders at once, want 0", overlaps.Load())
	}
	for i, seen := range observed {
		if len(seen) == 0 || !isSubsequence(seen, winners) {
			t.Errorf("observer on %s: saw leaders %v, not in the order they won %v", nodes[i].Name, seen, winners)
		}
	}
}

// isSubsequence reports whether sub's elements appear in seq in order.
func isSubsequence(sub, seq []string) bool {
	j := 0
	for _, s := range sub {
		k := slices.Index(seq[j:], s)
		if k < 0 {
			return false
		}
		j += k + 1
	}
	return true
}

// STM bank transfers from all three nodes keep the total, at both
// serializable isolations.
func TestRaft_stmBank(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	workers := make([]*clientv3.Client, recipeWorkers)
	for i := range workers {
		workers[i] = clusterClient(t, nodes[i%3].ClientAddr)
	}
	const (
		accounts  = 5
		balance   = 100
		transfers = 20
	)
	for _, iso := range []struct {
		name string
		opt  concurrency.Isolation
	}{
		{"serializableSnapshot", concurrency.SerializableSnapshot},
		{"repeatableReads", concurrency.RepeatableReads},
	} {
		prefix := "bank/" + iso.name + "/"
		ctx, cancel := context.WithTimeout(context.Background(), recipeTimeout)
		for a := range accounts {
			if _, err := clis[0].Put(ctx, prefix+strconv.Itoa(a), strconv.Itoa(balance)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		err := runTogether(recipeWorkers, func(i int) error {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for range transfers {
				if err := bankTransfer(ctx, workers[i], rng, prefix, accounts, iso.opt); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", iso.name, err)
		}
		for i, cli := range clis {
			resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
			if err != nil {
				t.Fatalf("%s: %v", nodes[i].Name, err)
			}
			total := 0
			for _, kv := range resp.Kvs {
				v, _ := strconv.Atoi(string(kv.Value))
				if v < 0 {
					t.Errorf("%s: %s on %s: %s = %d, want >= 0", iso.name, nodes[i].Name, iso.name, kv.Key, v)
				}
				total += v
			}
			if total != accounts*balance {
				t.Errorf("%s: total on %s: got %d, want %d", iso.name, nodes[i].Name, total, accounts*balance)
			}
		}
		cancel()
		t.Logf("%s: %d transfers in %v", iso.name, recipeWorkers*transfers, time.Since(start).Round(time.Millisecond))
	}
}

// A counter incremented by compare-and-swap on its mod_revision from all
// three nodes counts exactly its successes.
func TestRaft_casCounter(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	const attempts = 30
	ctx, cancel := context.WithTimeout(context.Background(), recipeTimeout)
	defer cancel()
	if _, err := clis[0].Put(ctx, "cas", "0"); err != nil {
		t.Fatal(err)
	}
	workers := make([]*clientv3.Client, recipeWorkers)
	for i := range workers {
		workers[i] = clusterClient(t, nodes[i%3].ClientAddr)
	}
	var successes atomic.Int64
	err := runTogether(recipeWorkers, func(i int) error {
		for range attempts {
			get, err := workers[i].Get(ctx, "cas")
			if err != nil {
				return err
			}
			v, _ := strconv.Atoi(string(get.Kvs[0].Value))
			txn, err := workers[i].Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision("cas"), "=", get.Kvs[0].ModRevision)).
				Then(clientv3.OpPut("cas", strconv.Itoa(v+1))).
				Commit()
			if err != nil {
				return err
			}
			if txn.Succeeded {
				successes.Add(1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, cli := range clis {
		resp, err := cli.Get(ctx, "cas")
		if err != nil {
			t.Fatal(err)
		}
		if got := string(resp.Kvs[0].Value); got != strconv.FormatInt(successes.Load(), 10) {
			t.Errorf("%s: counter %s after %d successful swaps, want them equal", nodes[i].Name, got, successes.Load())
		}
	}
	t.Logf("%d successful swaps of %d", successes.Load(), recipeWorkers*attempts)
}

// recipeTally counts what the workers of TestRaft_recipesLeaderFrozen
// saw: fenced increments answered as done, answered as fenced out, and
// not answered (their outcome unknown), and bank transfers committed.
type recipeTally struct {
	incremented, fencedOut, unknown, transfers atomic.Int64
}

// A concurrency.Mutex and STM transfers keep their guarantees while the
// raft leader is frozen (SIGSTOP) until the other two elect a leader of
// their own, then resumed (SIGCONT), twice. Lock holders increment a
// counter they read inside the lock, the write fenced by the holder's key
// (Mutex.IsOwner), as a lock's user should: were two holders ever let in
// at once, both would write the same value and the counter would fall
// short of the increments answered as done (a lost update). Transfers
// between accounts must keep the total and leave no balance negative.
// Calls fail while the leader is frozen; the workers retry, and both
// recipes must make progress again once it is resumed.
func TestRaft_recipesLeaderFrozen(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	const (
		accounts = 4
		balance  = 100
		opWait   = 3 * time.Second // one call; the frozen node's calls time out
		maxSteps = 100_000         // per worker; stop comes first
	)
	ctx, cancel := context.WithTimeout(context.Background(), recipeTimeout)
	defer cancel()
	if _, err := clis[0].Put(ctx, "frozen/counter", "0"); err != nil {
		t.Fatal(err)
	}
	for a := range accounts {
		if _, err := clis[0].Put(ctx, "frozen/bank/"+strconv.Itoa(a), strconv.Itoa(balance)); err != nil {
			t.Fatal(err)
		}
	}
	sessions := workerSessions(t, nodes)
	var tally recipeTally
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Workers 0-2 take the lock, 3-5 transfer: each on its own node, as
	// workerSessions places them.
	for i := range recipeWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			m := concurrency.NewMutex(sessions[i], "frozen/mutex/")
			for range maxSteps {
				select {
				case <-stop:
					return
				default:
				}
				var ok bool
				if i < recipeWorkers/2 {
					ok = fencedIncrement(sessions[i], m, opWait, &tally)
				} else {
					ok = transfer(sessions[i].Client(), rng, accounts, opWait, &tally)
				}
				if !ok {
					time.Sleep(50 * time.Millisecond) // a failed call is not retried at once
				}
			}
		})
	}
	stopWorkers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWorkers)
	// Registered after the workers' cleanup, so that its SIGCONT runs
	// first: a frozen node answers no worker.
	freeze := freezeFault(t, nodes, 2*time.Second, false)

	time.Sleep(2 * time.Second) // the recipes at work before the first fault
	runFaultRounds(t, nodes, clis, freeze, t.Logf)
	// Progress after the last fault: a lock taken and a transfer made.
	before := [2]int64{tally.incremented.Load(), tally.transfers.Load()}
	testutil.Eventually(t, 20*time.Second, "increments and transfers after the leader resumed", func() error {
		if tally.incremented.Load() == before[0] || tally.transfers.Load() == before[1] {
			return fmt.Errorf("%d increments and %d transfers since, want some of each",
				tally.incremented.Load()-before[0], tally.transfers.Load()-before[1])
		}
		return nil
	})
	stopWorkers()

	done, unknown := tally.incremented.Load(), tally.unknown.Load()
	t.Logf("%d fenced increments done, %d fenced out, %d of unknown outcome; %d transfers",
		done, tally.fencedOut.Load(), unknown, tally.transfers.Load())
	for i, cli := range clis {
		resp, err := cli.Get(ctx, "frozen/", clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("%s: %v", nodes[i].Name, err)
		}
		total := 0
		for _, kv := range resp.Kvs {
			v, _ := strconv.Atoi(string(kv.Value))
			switch key := string(kv.Key); {
			case key == "frozen/counter":
				// An increment of unknown outcome may have been applied.
				if int64(v) < done || int64(v) > done+unknown {
					t.Errorf("%s: counter %d after %d increments done and %d unknown: want it in [%d, %d]",
						nodes[i].Name, v, done, unknown, done, done+unknown)
				}
			case strings.HasPrefix(key, "frozen/bank/"):
				if v < 0 {
					t.Errorf("%s: %s = %d, want >= 0", nodes[i].Name, key, v)
				}
				total += v
			}
		}
		if total != accounts*balance {
			t.Errorf("%s: bank total %d, want %d", nodes[i].Name, total, accounts*balance)
		}
	}
}

// fencedIncrement takes m and increments the counter it read inside,
// the write fenced by the holder's key, then releases m; each call
// bounded by wait. A release that fails is left to the next Lock, which
// finds the session's key still first. It reports whether every call
// was answered.
func fencedIncrement(s *concurrency.Session, m *concurrency.Mutex, wait time.Duration, tally *recipeTally) bool {
	cli := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := m.Lock(ctx); err != nil {
		return false
	}
	defer func() {
		uctx, ucancel := context.WithTimeout(context.Background(), wait)
		defer ucancel()
		_ = m.Unlock(uctx)
	}()
	get, err := cli.Get(ctx, "frozen/counter")
	if err != nil || len(get.Kvs) == 0 {
		return false
	}
	v, _ := strconv.Atoi(string(get.Kvs[0].Value))
	resp, err := cli.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpPut("frozen/counter", strconv.Itoa(v+1))).Commit()
	switch {
	case err != nil:
		tally.unknown.Add(1)
		return false
	case resp.Succeeded:
		tally.incremented.Add(1)
	default:
		tally.fencedOut.Add(1)
	}
	return true
}

// transfer is bankTransfer between the accounts of "frozen/bank/" at
// serializable snapshot isolation, bounded by wait; it reports whether
// the transfer committed.
func transfer(cli *clientv3.Client, rng *rand.Rand, accounts int, wait time.Duration, tally *recipeTally) bool {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := bankTransfer(ctx, cli, rng, "frozen/bank/", accounts, concurrency.SerializableSnapshot); err != nil {
		return false
	}
	tally.transfers.Add(1)
	return true
}

// bankTransfer moves a random amount (1-30, no more than the balance)
// from one random account of prefix (0..accounts-1) to another in one
// STM transaction at isolation iso, given up when ctx ends.
func bankTransfer(ctx context.Context, cli *clientv3.Client, rng *rand.Rand, prefix string, accounts int, iso concurrency.Isolation) error {
	from, to := rng.IntN(accounts), rng.IntN(accounts-1)
	if to >= from {
		to++
	}
	amount := rng.IntN(30) + 1
	_, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
		fk, tk := prefix+strconv.Itoa(from), prefix+strconv.Itoa(to)
		fv, _ := strconv.Atoi(s.Get(fk))
		tv, _ := strconv.Atoi(s.Get(tk))
		n := min(amount, fv)
		s.Put(fk, strconv.Itoa(fv-n))
		s.Put(tk, strconv.Itoa(tv+n))
		return nil
	}, concurrency.WithIsolation(iso), concurrency.WithAbortContext(ctx))
	return err
}
