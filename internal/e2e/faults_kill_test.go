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

// TestFaults_queuedKill is acceptance 3: with the default ack=queued a
// put returns once the dispatcher holds the row in memory, so kill -9 of
// the dispatcher loses what it held, and no more: at most the depth its
// /status showed just before the kill, plus the puts it may have
// acknowledged between that read and its death.
//
// Which kill lost a row is not known, only that a row put after kill k-1
// can only be lost at kill k or later; so for every k the lost rows put
// after kill k-1 must fit in the bounds of kills k to the last, and rows
// put after the last kill must all land. For k = 1 that is the total.
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

	start := map[uint64]time.Time{}
	for _, o := range log {
		start[o.ID] = o.Start
	}
	bounds := make([]int, len(kills)) // depth before kill k plus puts acked around its read
	windows := make([]int, len(kills))
	for k, kl := range kills {
		windows[k] = log.AckedOverlapping(kl.sampled, kl.killed)
		bounds[k] = kl.depth + windows[k]
	}
	lostAfter := make([]int, len(kills)+1) // lost rows put after kill k-1 (all of them for k = 0)
	for _, id := range v.Lost {
		for k := 0; k <= len(kills); k++ {
			if k == 0 || !start[id].Before(kills[k-1].killed) {
				lostAfter[k]++
			}
		}
	}
	depths := make([]int, len(kills))
	for k, kl := range kills {
		depths[k] = kl.depth
	}
	worst := -1 // the latest kill whose bound fails
	for k := 0; k <= len(kills); k++ {
		allowed := 0
		for _, b := range bounds[k:] {
			allowed += b
		}
		if lostAfter[k] > allowed {
			worst = k
			t.Errorf("%d acknowledged rows put after kill %d are lost, more than the %d the dispatchers of kills %d to %d held before them (depth_rows %v, puts acked between the /status read and the kill %v)",
				lostAfter[k], k, allowed, k+1, len(kills), depths[k:], windows[k:])
		}
	}
	if worst > 0 {
		var late []uint64
		for _, id := range v.Lost {
			if !start[id].Before(kills[worst-1].killed) {
				late = append(late, id)
			}
		}
		r.logf("lost rows put after kill %d (%s, of %s): %s", worst, r.since(kills[worst-1].killed), kills[worst-1].node, r.describeIDs(log, late))
	}
	if err := v.Check(-1, len(kills)*batch); err != nil {
		t.Error(err)
	}
	sumDepth, sumWindow := 0, 0
	for k := range kills {
		sumDepth += depths[k]
		sumWindow += windows[k]
	}
	r.logf("lost %d acknowledged rows over %d kills; depth_rows before each kill %v (sum %d), acked between the read and the kill %v (sum %d)",
		len(v.Lost), len(kills), depths, sumDepth, windows, sumWindow)
	f := faults.Figures{Scenario: "3", Title: "3. ack=queued (default), kill -9 of the dispatcher", Faults: len(kills), Drain: took,
		Notes: fmt.Sprintf("lost %d <= sum of depth_rows before the kills %d + acked between each read and kill %d; %s",
			len(v.Lost), sumDepth, sumWindow, killNotes(kills, batch))}
	f.FromVerdict(v)
	report(t, f)
}
