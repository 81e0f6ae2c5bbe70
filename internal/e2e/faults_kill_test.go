//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"chute/internal/faults"
)

// Fault scenarios 1-3: kill -9 of the dispatcher at random points
// while 4 producers, spread over the three nodes, put unique ids.

// Parameters of the kill scenarios: kills, the stretch of load before each
// (random in [killGapMin, killGapMax)), and each producer's puts per
// second.
var (
	killCount  = pick(3, 20)
	killGapMin = 500 * time.Millisecond
	killGapMax = pick(1500*time.Millisecond, 3*time.Second)
	killRate   = pick(50.0, 100.0)
)

// killNotes describes the kills for the report.
func killNotes(kills []kill, batch int) string {
	var moved time.Duration
	depth := 0
	for _, k := range kills {
		moved = max(moved, k.moved)
		depth = max(depth, k.depth)
	}
	return fmt.Sprintf("largest depth_rows before a kill %d; next dispatcher agreed within %v; largest insert %d rows",
		depth, moved.Round(time.Millisecond), batch)
}

// TestFaults_replicatedKill is acceptance 1: with ack=replicated every
// put is held by a second node before it returns, so kill -9 of the
// dispatcher, 20 times at random points (3 in the short form), loses no
// acknowledged row; the backup inserts what the dead dispatcher held.
// Extra copies are allowed, at most one batch (the largest insert) per
// kill.
func TestFaults_replicatedKill(t *testing.T) {
	faultsParallel(t)
	r := newFaultRig(t, rigOptions{settings: &faults.QueueSettings{Ack: "replicated", BatchRows: 500}})
	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.Rate = 4, killRate
	w := r.workload(cfg, 0, 1, 2)
	r.waitFlowing(w, 100)
	kills := r.killDispatchers(killCount, killGapMin, killGapMax)
	time.Sleep(killGapMin) // load after the last kill, through the restarted node
	log := w.Stop()
	r.logf("puts: %d acked, failed by code: %s, %d timed out", log.Count(faults.Acked), codesOf(log), log.Count(faults.TimedOut))
	v, took, batch := r.settle(log)
	if err := v.Check(0, len(kills)*batch); err != nil {
		t.Error(err)
	}
	f := faults.Figures{Scenario: "1", Title: "1. ack=replicated, kill -9 of the dispatcher", Faults: len(kills), Drain: took,
		Notes: killNotes(kills, batch)}
	f.FromVerdict(v)
	report(t, f)
}

// TestFaults_insertedKill is acceptance 2: with ack=inserted a put
// returns once its row is in ClickHouse, so neither kill -9 of the
// dispatcher at random points nor kill -9 of all three nodes at once
// loses an acknowledged row. Extra copies: at most one batch per kill.
func TestFaults_insertedKill(t *testing.T) {
	faultsParallel(t)
	r := newFaultRig(t, rigOptions{settings: &faults.QueueSettings{Ack: "inserted", BatchRows: 500}})
	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.Rate = 4, killRate
	w := r.workload(cfg, 0, 1, 2)
	r.waitFlowing(w, 100)
	kills := r.killDispatchers(killCount, killGapMin, killGapMax)
	time.Sleep(between(r.rng, killGapMin, killGapMax)) // load before the last kill
	acked, _, _ := w.Counts()
	r.killAll()
	r.waitFlowing(w, acked+100) // puts go on through the restarted nodes
	log := w.Stop()
	r.logf("puts: %d acked, failed by code: %s, %d timed out", log.Count(faults.Acked), codesOf(log), log.Count(faults.TimedOut))
	v, took, batch := r.settle(log)
	if err := v.Check(0, (len(kills)+1)*batch); err != nil {
		t.Error(err)
	}
	f := faults.Figures{Scenario: "2", Title: "2. ack=inserted, kill -9 of the dispatcher, then of every node at once",
		Faults: len(kills) + 1, Drain: took, Notes: killNotes(kills, batch) + "; then all three nodes at once"}
	f.FromVerdict(v)
	report(t, f)
}

// TestFaults_queuedKill is scenario 3 of docs/reliability.md, as the
// queue log makes it: with the default ack=queued a put returns once the
// row is on the dispatcher's disk, so kill -9 of the dispatcher,
// restarted on its data dir, loses nothing; duplicates stay within one
// batch per kill.
// The depth each dispatcher held before its kill is logged and reported:
// what an in-memory queue would have lost.
func TestFaults_queuedKill(t *testing.T) {
	faultsParallel(t)
	r := newFaultRig(t, rigOptions{})
	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.Rate = 4, killRate
	w := r.workload(cfg, 0, 1, 2)
	r.waitFlowing(w, 100)
	kills := r.killDispatchers(killCount, killGapMin, killGapMax)
	time.Sleep(killGapMin) // load after the last kill, through the restarted node
	log := w.Stop()
	r.logf("puts: %d acked, failed by code: %s, %d timed out", log.Count(faults.Acked), codesOf(log), log.Count(faults.TimedOut))
	v, took, batch := r.settle(log)
	if len(v.Lost) > 0 {
		r.logf("lost rows: %s", r.describeIDs(log, v.Lost))
	}
	if err := v.Check(0, len(kills)*batch); err != nil {
		t.Error(err)
	}
	depths := make([]int, len(kills))
	sumDepth := 0
	for k, kl := range kills {
		depths[k] = kl.depth
		sumDepth += kl.depth
	}
	r.logf("lost %d acknowledged rows over %d kills; depth_rows before each kill %v (sum %d)", len(v.Lost), len(kills), depths, sumDepth)
	f := faults.Figures{Scenario: "3", Title: "3. ack=queued (default), kill -9 of the dispatcher", Faults: len(kills), Drain: took,
		Notes: fmt.Sprintf("depth_rows on the dispatchers' disks before the kills: %d; %s", sumDepth, killNotes(kills, batch))}
	f.FromVerdict(v)
	report(t, f)
}
