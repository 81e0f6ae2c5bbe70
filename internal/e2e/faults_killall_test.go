//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"chute/internal/faults"
	"chute/internal/testutil"
)

// Fault scenarios 7 and 8: kill -9 of all three nodes at once, at random
// points, while producers on every node put to a ClickHouse queue and to a
// plain queue, whose consumers, one on every node, acknowledge what they
// receive. Every node keeps its queues in the queue log under its data dir
// (fsynced: the nodes run without --unsafe-no-fsync) and recovers them when
// it starts again.

// Parameters of the kill-all scenarios: kills, the stretch of load before
// each (random in [killAllGapMin, killAllGapMax), counted from the moment
// puts and acknowledgements flow again after the previous one), and each
// producer's puts per second.
var (
	killAllCount  = pick(3, 10)
	killAllGapMin = 500 * time.Millisecond
	killAllGapMax = pick(1500*time.Millisecond, 3*time.Second)
	killAllRate   = 50.0
)

const (
	killAllPlain     = "jobs" // the plain queue
	killAllConsumers = 3      // one consumer watch on every node
	killAllPrefetch  = 16     // deliveries one consumer holds unacknowledged at most
	// killAllFlowing is how many more puts of each queue, and
	// acknowledgements of deliveries, say that the cluster is back.
	killAllFlowing = 50
	killAllBack    = 60 * time.Second // the cluster to be back after a kill
	killAllReady   = 30 * time.Second // a node to serve after a restart: one whose data dir is gone catches up first
)

// killAllOptions are what tell the two scenarios apart.
type killAllOptions struct {
	ack  string // both queues' ack mode
	wipe bool   // delete one node's data dir before each restart
}

// killAllRound is one kill -9 of every node.
type killAllRound struct {
	killed time.Time
	wiped  string        // the node whose data dir was deleted, "" for none
	back   time.Duration // from the kill until both queues' puts and the acknowledgements flowed again
}

// killAllLoad is the scenario's producers and consumers.
type killAllLoad struct {
	ch, plain *faults.Workload
	consumer  *faults.Consumer
}

// acked returns the puts of both workloads and the acknowledgements of
// deliveries so far.
func (l killAllLoad) acked() (ch, plain, acks int) {
	ch, _, _ = l.ch.Counts()
	plain, _, _ = l.plain.Counts()
	return ch, plain, l.consumer.Receipts().Count().Acked
}

// TestFaults_queuedKillAll is scenario 7 of docs/reliability.md: with
// the default ack=queued a put returns once its message is fsynced to
// the dispatcher's queue log, so kill -9 of all three nodes at once, 10
// times at random points (3 in the short form), each time started again
// on the same data dirs, loses no acknowledged row of the ClickHouse
// queue and no acknowledged message of the plain queue. Extra copies: at
// most one batch per queue per kill (the largest insert; what the
// consumers hold unacknowledged).
func TestFaults_queuedKillAll(t *testing.T) {
	faultsParallel(t)
	f := runKillAll(t, killAllOptions{ack: "queued"})
	f.Scenario, f.Title = "7", "7. ack=queued, kill -9 of every node at once, restarted on the same data dirs"
	report(t, f)
}

// TestFaults_replicatedKillAllWipe is scenario 8 of docs/reliability.md:
// with ack=replicated a put returns once its message is fsynced on the
// dispatcher's disk and its backup's, so kill -9 of all three nodes at
// once, with one node's data dir deleted before the restart (in turn the
// dispatcher of the ClickHouse queue and of the plain queue, as the
// records named them), still loses nothing acknowledged: the other disk
// has it.
func TestFaults_replicatedKillAllWipe(t *testing.T) {
	faultsParallel(t)
	f := runKillAll(t, killAllOptions{ack: "replicated", wipe: true})
	f.Scenario, f.Title = "8", "8. ack=replicated, kill -9 of every node at once, one node's data dir deleted"
	report(t, f)
}

// runKillAll runs a kill-all scenario, checks it and returns its figures.
func runKillAll(t *testing.T, o killAllOptions) faults.Figures {
	r := newFaultRig(t, rigOptions{settings: &faults.QueueSettings{Ack: o.ack, BatchRows: 500}})
	r.setSettingsOf(killAllPlain, faults.QueueSettings{Ack: o.ack, Prefetch: killAllPrefetch})
	ccfg := faults.DefaultConsumerConfig()
	ccfg.Queue, ccfg.Endpoints, ccfg.Consumers = killAllPlain, r.endpoints(0, 1, 2), killAllConsumers
	ccfg.Duration = 30 * time.Minute // a bound; the test stops it long before
	consumer, err := faults.StartConsumer(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consumer.Stop() })
	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.Rate = 3, killAllRate
	load := killAllLoad{ch: r.workload(cfg, 0, 1, 2), consumer: consumer}
	cfg.Queue, cfg.Endpoints, cfg.FirstProducer = killAllPlain, r.endpoints(0, 1, 2), 100
	cfg.PutTimeout, cfg.Duration = faultPutTimeout, 30*time.Minute
	if load.plain, err = faults.StartWorkload(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { load.plain.Stop() })
	r.waitFlowing(load.ch, 100)
	r.waitBack(load, 0, 0, 0)

	rounds := make([]killAllRound, 0, killAllCount)
	for k := range killAllCount {
		time.Sleep(between(r.rng, killAllGapMin, killAllGapMax)) // the load between two kills: a schedule, not a wait for a condition
		wipe := -1
		if o.wipe {
			// In turn the dispatcher of each queue: its disk held every
			// message of it, the backup's holds them too.
			name := r.queue
			if k%2 == 1 {
				name = killAllPlain
			}
			wipe = r.dispatcherOf(name)
		}
		r.logf("kill %d/%d: before it: %s; %s", k+1, killAllCount, r.queueLine(), r.queueLineOf(killAllPlain))
		ch, plain, acks := load.acked()
		rd := r.killAll9(wipe)
		if wipe >= 0 {
			rd.wiped = r.nodes[wipe].Name
		}
		r.logf("kill %d/%d: kill -9 of all three nodes at %s, data dir of %q deleted; all three serve again %v later",
			k+1, killAllCount, r.since(rd.killed), rd.wiped, time.Since(rd.killed).Round(time.Millisecond))
		r.waitBack(load, ch, plain, acks)
		rd.back = time.Since(rd.killed)
		rounds = append(rounds, rd)
		r.logf("kill %d/%d: puts and acknowledgements flow again %v after the kill; %s; %s",
			k+1, killAllCount, rd.back.Round(time.Millisecond), r.queueLine(), r.queueLineOf(killAllPlain))
	}
	time.Sleep(killAllGapMin) // load after the last kill
	chLog, plainLog := load.ch.Stop(), load.plain.Stop()
	r.logf("%s puts: %d acked, failed by code: %s, %d timed out", r.queue, chLog.Count(faults.Acked), codesOf(chLog), chLog.Count(faults.TimedOut))
	r.logf("%s puts: %d acked, failed by code: %s, %d timed out", killAllPlain, plainLog.Count(faults.Acked), codesOf(plainLog), plainLog.Count(faults.TimedOut))

	chV, chDrain, batch := r.settle(chLog)
	plainV, sum, plainDrain := r.settlePlain(killAllPlain, consumer, plainLog)
	window := killAllConsumers * killAllPrefetch
	if err := chV.Check(0, len(rounds)*batch); err != nil {
		t.Errorf("%s: %v", r.queue, err)
	}
	if err := plainV.Check(0, len(rounds)*window); err != nil {
		t.Errorf("%s: %v", killAllPlain, err)
	}
	if f := consumer.Foreign(); len(f) != 0 {
		t.Errorf("%s: %d deliveries of no put, first %q", killAllPlain, len(f), f[:min(5, len(f))])
	}
	if err := consumer.Err(); err != nil {
		r.logf("%s: the consumers' first error (the message is delivered again): %v", killAllPlain, err)
	}

	var slowest time.Duration
	for _, rd := range rounds {
		slowest = max(slowest, rd.back)
	}
	f := faults.Figures{Faults: len(rounds), Drain: max(chDrain, plainDrain),
		Puts: chV.Puts + plainV.Puts, Acked: chV.Acked + plainV.Acked, Lost: len(chV.Lost) + len(plainV.Lost),
		Duplicates: chV.Extra + plainV.Extra, Indeterminate: chV.Indeterminate + plainV.Indeterminate,
		Notes: fmt.Sprintf("%s: %d acked, lost %d, extra copies %d (largest insert %d rows); %s: %d acked, lost %d, deliveries beyond the first %d (%d consumers × prefetch %d), acknowledgements that deleted nothing %d; back within %v of a kill",
			r.queue, chV.Acked, len(chV.Lost), chV.Extra, batch,
			killAllPlain, plainV.Acked, len(plainV.Lost), plainV.Extra, killAllConsumers, killAllPrefetch, sum.AckedNothing,
			slowest.Round(100*time.Millisecond))}
	if o.wipe {
		var wiped []string
		for _, rd := range rounds {
			wiped = append(wiped, rd.wiped)
		}
		f.Notes += "; data dirs deleted: " + strings.Join(wiped, " ")
	}
	return f
}

// dispatcherOf returns the index of the node the alive nodes agree
// dispatches the queue called name.
func (r *faultRig) dispatcherOf(name string) int {
	r.t.Helper()
	var idx int
	testutil.Eventually(r.t, faultRecordTimeout, "one dispatcher record of "+name, func() error {
		var first queueRecord
		for k, i := range r.alive() {
			rec, err := r.recordOf(i, name)
			if err != nil {
				return err
			}
			if k == 0 {
				first = rec
			} else if rec.raw != first.raw {
				return fmt.Errorf("%s: %q, %s: %q", r.nodes[r.alive()[0]].Name, first.raw, r.nodes[i].Name, rec.raw)
			}
		}
		i, ok := r.byID[first.member]
		if !ok {
			return fmt.Errorf("record %q names no node of the test", first.raw)
		}
		idx = i
		return nil
	})
	return idx
}

// killAll9 kills every node with SIGKILL at once, deletes the data dir of
// node wipe (none when negative), and starts all three again at once: a
// node without its data dir catches the key space up from the other two,
// which need each other for a quorum, so none waits for another to serve.
func (r *faultRig) killAll9(wipe int) killAllRound {
	r.t.Helper()
	for _, p := range r.nodes {
		p.markSignaled()
		_ = p.cmd.Process.Kill() // fails only if it already exited
	}
	rd := killAllRound{killed: time.Now()}
	for _, p := range r.nodes {
		<-p.Done()
	}
	if wipe >= 0 {
		dir := r.nodes[wipe].DataDir
		if err := os.RemoveAll(dir); err != nil {
			r.t.Fatalf("delete the data dir of %s: %v", r.nodes[wipe].Name, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			r.t.Fatal(err)
		}
	}
	for _, p := range r.nodes {
		if err := p.start(r.t); err != nil {
			r.t.Fatalf("restart %s: %v", p.Name, err)
		}
	}
	for _, p := range r.nodes {
		if err := p.waitReady(killAllReady); err != nil {
			r.t.Fatalf("restart %s: %v", p.Name, err)
		}
	}
	waitMembers(r.t, r.nodes, r.nodes)
	return rd
}

// waitBack waits until both workloads have killAllFlowing more puts
// acknowledged than ch and plain, and the consumers as many more
// acknowledgements than acks.
func (r *faultRig) waitBack(l killAllLoad, ch, plain, acks int) {
	r.t.Helper()
	testutil.Eventually(r.t, killAllBack, "puts to both queues and acknowledgements flowing", func() error {
		c, p, a := l.acked()
		if c < ch+killAllFlowing || p < plain+killAllFlowing || a < acks+killAllFlowing {
			return fmt.Errorf("%s puts acked %d (from %d), %s puts acked %d (from %d), deliveries acknowledged %d (from %d); first errors: %v, %v; consumers: %v",
				r.queue, c, ch, killAllPlain, p, plain, a, acks, l.ch.FirstErrors(), l.plain.FirstErrors(), l.consumer.Err())
		}
		return nil
	})
}

// queueLineOf is queueLine for the queue called name: the dispatcher
// each alive node knows, and the messages it dispatches, holds, has out
// unacknowledged and keeps as a backup.
func (r *faultRig) queueLineOf(name string) string {
	var parts []string
	for _, i := range r.alive() {
		q, backup, err := r.holdsOf(i, name)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", r.nodes[i].Name, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s@%d rows %d held %d unacked %d backup %d", r.nodes[i].Name, q.Dispatcher, q.Epoch, q.Rows, q.Held, q.Unacked, backup))
	}
	return name + " " + strings.Join(parts, ", ")
}

// settlePlain waits until no alive node holds messages of the plain
// queue called name (queued, held, out unacknowledged or as a backup),
// the consumers have no acknowledgement pending, and they acknowledged
// every acknowledged put of log or have acknowledged nothing new for
// faultQuiet. Then it stops the consumers and judges log. It returns the
// verdict, the consumers' sums and how long the wait took. A queue that
// does not drain fails the test, after the judgement is logged.
func (r *faultRig) settlePlain(name string, c *faults.Consumer, log faults.Log) (faults.Verdict, faults.Received, time.Duration) {
	r.t.Helper()
	start := time.Now()
	deadline := start.Add(faultSettleTimeout)
	acked := log.AckedIDs()
	var lastAcks int
	var stableSince time.Time
	var drainErr error
	for {
		var busy []string
		for _, i := range r.alive() {
			q, backup, err := r.holdsOf(i, name)
			if err != nil || q.Rows != 0 || q.Held != 0 || q.Unacked != 0 || q.Bytes != 0 || backup != 0 {
				busy = append(busy, fmt.Sprintf("%s: %+v, %d backup rows, %v", r.nodes[i].Name, q, backup, err))
			}
		}
		got := c.Receipts()
		acks := got.Count().Acked
		if acks != lastAcks {
			lastAcks, stableSince = acks, time.Now()
		}
		found := got.Found()
		all := true
		for _, id := range acked {
			if found[id] == 0 {
				all = false
				break
			}
		}
		if len(busy) == 0 && c.Pending() == 0 && (all || time.Since(stableSince) >= faultQuiet) {
			break
		}
		if time.Now().After(deadline) {
			drainErr = fmt.Errorf("queue %s not drained within %v: %d deliveries pending; %s",
				name, faultSettleTimeout, c.Pending(), strings.Join(busy, "; "))
			break
		}
		time.Sleep(faultPoll)
	}
	took := time.Since(start)
	receipts := c.Stop()
	sum := receipts.Count()
	v := faults.JudgeReceipts(log, receipts)
	r.logf("oracle of %s: %v; %d deliveries, %d acknowledged, %d acknowledgements deleted nothing, %d given up; %d watches created; drained %v after the puts' queue",
		name, v, sum.Deliveries, sum.Acked, sum.AckedNothing, sum.AckFailed, c.Watches(), took.Round(time.Millisecond))
	if len(v.Lost) > 0 {
		r.logf("%s lost: %s", name, r.describeIDs(log, v.Lost))
		var undelivered, unacked int
		for _, id := range v.Lost {
			if rc := receipts[id]; rc.Deliveries == 0 {
				undelivered++
			} else {
				unacked++
			}
		}
		r.logf("%s lost: %d never delivered, %d delivered but never acknowledged", name, undelivered, unacked)
	}
	if len(v.Duplicated) > 0 {
		r.logf("%s delivered more than once: %s", name, r.describeIDs(log, v.Duplicated))
	}
	if drainErr != nil {
		r.t.Error(drainErr)
	}
	return v, sum, took
}
