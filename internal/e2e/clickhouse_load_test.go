//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// TestClickHouse_threeNodes30k runs three nodes, each with the ClickHouse
// flags, and 12 producers, four on each node, that put 30,000 rows with
// unique ids to ch:events in transactions of up to 128 puts: the queue's
// one dispatcher inserts 30,000 rows, each id once, and every node's
// /status shows the queue empty. The end-to-end rate and the latency of
// the transactions are logged.
func TestClickHouse_threeNodes30k(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, node String, producer UInt8, s String) ENGINE = MergeTree ORDER BY id")
	c := newCluster(t)
	a, b, cc := c.startThree(chFlags(ch)...)
	nodes := []*Proc{a, b, cc}
	clis := clientsOf(t, nodes...)
	const total, producers, batch = 30000, 12, 128
	per := total / producers

	var mu sync.Mutex
	var lat []time.Duration
	var errs errorOnce
	var wg sync.WaitGroup
	start := time.Now()
	for g := range producers {
		node := g % len(nodes)
		cli := clis[node]
		wg.Go(func() {
			ops := make([]clientv3.Op, 0, batch)
			var mine []time.Duration
			flush := func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
				defer cancel()
				t0 := time.Now()
				_, err := cli.Txn(ctx).Then(ops...).Commit()
				mine = append(mine, time.Since(t0))
				if err != nil {
					errs.set(fmt.Errorf("producer %d on %s: txn of %d puts: %w", g, nodes[node].Name, len(ops), err))
					return false
				}
				ops = ops[:0]
				return true
			}
			for i := range per {
				id := g*per + i
				v := fmt.Sprintf(`{"id":%d,"node":%q,"producer":%d,"s":"message %d of producer %d"}`, id, nodes[node].Name, g, i, g)
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:events/p/%d", id), v))
				if len(ops) == batch && !flush() {
					return
				}
			}
			if len(ops) > 0 {
				flush()
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	putsTook := time.Since(start)
	if err := errs.get(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d ids in ClickHouse", total), func() error {
		if n, _ := strconv.Atoi(ch.Query(t, "SELECT uniqExact(id) FROM default.events")); n < total {
			return fmt.Errorf("%d ids", n)
		}
		return nil
	})
	took := time.Since(start)
	waitDrained(t, "ch:events", nodes...)
	if got := ch.Query(t, "SELECT count(), uniqExact(id) FROM default.events"); got != fmt.Sprintf("%d\t%d", total, total) {
		t.Errorf("count(), uniqExact(id): got %q, want %d rows, each id once; ids inserted more than once, by producer:\n%s", got, total,
			ch.Query(t, "SELECT producer, any(node), count(), min(id), max(id), max(c) FROM "+
				"(SELECT id, any(producer) AS producer, any(node) AS node, count() AS c FROM default.events GROUP BY id HAVING c > 1) "+
				"GROUP BY producer ORDER BY producer"))
	}
	if got, want := ch.Query(t, "SELECT min(id), max(id), uniqExact(producer), uniqExact(node) FROM default.events"),
		fmt.Sprintf("0\t%d\t%d\t3", total-1, producers); got != want {
		t.Errorf("min(id), max(id), producers, nodes: got %q, want %q", got, want)
	}
	// Every insert writes one part of level 0; merges leave them inactive
	// for minutes, so they count the inserts.
	inserts := ch.Query(t, "SELECT countIf(level = 0) FROM system.parts WHERE database = 'default' AND table = 'events'")
	t.Logf("%d rows from %d producers on 3 nodes: puts done in %v (%.0f rows/s), all rows in ClickHouse after %v (%.0f rows/s end to end); "+
		"txn latency (up to %d puts) %v; %s inserts",
		total, producers, putsTook.Round(time.Millisecond), float64(total)/putsTook.Seconds(),
		took.Round(time.Millisecond), float64(total)/took.Seconds(), batch, statsOf(lat), inserts)
}

// TestClickHouse_outage kills ClickHouse (SIGKILL) for 20 s while a
// producer puts about 100 rows/s, then restarts it with the producer
// stopped: every row whose put succeeded lands, with no put after the
// restart. Rows inserted twice (a batch whose answer the kill lost) are
// counted and logged; they must fit in one batch, a contiguous run of ids
// of at most a second of load.
func TestClickHouse_outage(t *testing.T) {
	t.Parallel()
	const (
		outage = 20 * time.Second
		rate   = 100 // puts per second
	)
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.outage (id UInt64) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	cli := clusterClient(t, p.ClientAddr)

	var mu sync.Mutex
	var ok []int
	var failed []string
	var lat []time.Duration
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		for id := 0; ; id++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
			t0 := time.Now()
			_, err := cli.Put(ctx, "/q/ch:outage/p/"+strconv.Itoa(id), fmt.Sprintf(`{"id":%d}`, id))
			d := time.Since(t0)
			cancel()
			mu.Lock()
			lat = append(lat, d)
			if err != nil {
				failed = append(failed, fmt.Sprintf("%d: %v", id, err))
			} else {
				ok = append(ok, id)
			}
			mu.Unlock()
		}
	}()
	stopProducer := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	t.Cleanup(stopProducer)

	testutil.Eventually(t, rowsTimeout, "rows flowing before the outage", func() error {
		if n := ch.Count(t, "default.outage"); n < rate {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
	ch.Kill(t)
	killed := time.Now()
	line := waitLogLine(t, p, "insert failed", "queue=ch:outage")
	if !strings.Contains(line, "level=WARN") {
		t.Errorf("log line of the outage %q: want a warning", line)
	}
	depthAtFailure, _ := depthOf(p, "ch:outage")
	time.Sleep(time.Until(killed.Add(outage))) // the outage itself, not a wait for a condition
	stopProducer()
	depth, err := depthOf(p, "ch:outage")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	put, putFailed, putLat := slices.Clone(ok), slices.Clone(failed), statsOf(lat)
	mu.Unlock()
	if len(putFailed) > 0 {
		t.Errorf("%d puts failed during the outage, first %q", len(putFailed), putFailed[:min(3, len(putFailed))])
	}
	if depth < rate*int(outage/time.Second)/2 {
		t.Errorf("depth_rows after %v without ClickHouse: got %d, want the rows put meanwhile (~%d)", outage, depth, rate*int(outage/time.Second))
	}

	ch.Restart(t)
	restarted := time.Now()
	want := len(put)
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d rows put before the restart in ClickHouse", want), func() error {
		if n, _ := strconv.Atoi(ch.Query(t, "SELECT uniqExact(id) FROM default.outage")); n < want {
			return fmt.Errorf("%d ids", n)
		}
		return nil
	})
	recovered := time.Since(restarted)
	waitDrained(t, "ch:outage", p)
	waitLogLine(t, p, "inserts into ClickHouse succeed again", "queue=ch:outage")
	if lines := logLines(t, p, "insert failed", "queue=ch:outage"); len(lines) > 3 {
		t.Errorf("%d log lines of failed inserts during the outage, want a few (once per change of state): first %q", len(lines), lines[:3])
	}

	var got []int
	for f := range strings.FieldsSeq(ch.Query(t, "SELECT id FROM default.outage ORDER BY id")) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("id %q: %v", f, err)
		}
		got = append(got, id)
	}
	seen := make(map[int]int, len(got))
	var dups []int
	for _, id := range got {
		if seen[id]++; seen[id] == 2 {
			dups = append(dups, id)
		}
	}
	var missing []int
	for _, id := range put {
		if seen[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d rows whose put succeeded are missing, first %v", len(missing), want, missing[:min(10, len(missing))])
	}
	if len(got)-len(dups) != len(seen) || len(seen) != want {
		t.Errorf("rows: got %d (%d ids), want %d ids", len(got), len(seen), want)
	}
	if len(dups) > 0 && (dups[len(dups)-1]-dups[0] >= rate || len(dups) != dups[len(dups)-1]-dups[0]+1) {
		t.Errorf("ids inserted twice: %v; want at most one batch, a contiguous run of fewer than %d ids", dups, rate)
	}
	t.Logf("outage of %v under %d puts/s: %d puts ok, %d failed, put latency %v; depth %d at the first failed insert, %d at the restart; "+
		"all rows in %v after the restart; %d ids inserted twice %v",
		outage, rate, want, len(putFailed), putLat, depthAtFailure, depth, recovered.Round(time.Millisecond), len(dups), dups)
}

// TestClickHouse_firstPutsOnThreeNodes starts puts to a new ClickHouse
// queue on three nodes at once, so that more than one node claims it and
// the losers hand their rows to the winner while their drainers insert:
// in each of ten rounds 12 producers, four per node, put four
// transactions of 128 rows each to a new queue. Every row lands once.
func TestClickHouse_firstPutsOnThreeNodes(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	c := newCluster(t)
	a, b, cc := c.startThree(chFlags(ch)...)
	nodes := []*Proc{a, b, cc}
	clis := clientsOf(t, nodes...)
	const rounds, producers, txns, batch = 10, 12, 4, 128
	const rows = producers * txns * batch
	for r := range rounds {
		table := fmt.Sprintf("race_%d", r)
		ch.Exec(t, "CREATE TABLE default."+table+" (id UInt64, node String) ENGINE = MergeTree ORDER BY id")
		var errs errorOnce
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for g := range producers {
			node := g % len(nodes)
			wg.Go(func() {
				<-begin
				for x := range txns {
					ops := make([]clientv3.Op, batch)
					for i := range ops {
						id := (g*txns+x)*batch + i
						ops[i] = clientv3.OpPut(fmt.Sprintf("/q/ch:%s/p/%d", table, id), fmt.Sprintf(`{"id":%d,"node":%q}`, id, nodes[node].Name))
					}
					ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
					_, err := clis[node].Txn(ctx).Then(ops...).Commit()
					cancel()
					if err != nil {
						errs.set(fmt.Errorf("round %d: producer %d on %s: %w", r, g, nodes[node].Name, err))
						return
					}
				}
			})
		}
		close(begin)
		wg.Wait()
		if err := errs.get(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, rowsTimeout, fmt.Sprintf("%d ids in %s", rows, table), func() error {
			if n, _ := strconv.Atoi(ch.Query(t, "SELECT uniqExact(id) FROM default."+table)); n < rows {
				return fmt.Errorf("%d ids", n)
			}
			return nil
		})
		waitDrained(t, "ch:"+table, nodes...)
		if got, want := ch.Query(t, "SELECT count(), uniqExact(id) FROM default."+table), fmt.Sprintf("%d\t%d", rows, rows); got != want {
			t.Errorf("round %d: count(), uniqExact(id) of %s: got %q, want %q; ids inserted twice, by the node that took the put:\n%s\nthe nodes' lines about the queue:\n%s",
				r, table, got, want,
				ch.Query(t, "SELECT node, count(), min(id), max(id) FROM (SELECT id, any(node) AS node, count() AS c FROM default."+table+
					" GROUP BY id HAVING c > 1) GROUP BY node ORDER BY node"),
				nodeLines(t, nodes, "queue=ch:"+table))
			return // one round shows it; the others would repeat it
		}
	}
}

// nodeLines returns the lines of the nodes' logs that contain sub, each
// after its node's name.
func nodeLines(t testing.TB, nodes []*Proc, sub string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range nodes {
		for _, l := range logLines(t, p, sub) {
			fmt.Fprintf(&b, "%s: %s\n", p.Name, l)
		}
	}
	return b.String()
}
