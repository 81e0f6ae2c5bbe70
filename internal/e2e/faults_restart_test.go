//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"chute/internal/faults"
)

// Parameters of the graceful restart scenario: rounds over the three
// nodes, and the stretch of load before each restart.
var (
	restartRounds = pick(1, 3)
	restartGapMin = 500 * time.Millisecond
	restartGapMax = pick(1500*time.Millisecond, 3*time.Second)
	restartRate   = 50.0
)

// TestFaults_gracefulRestarts is acceptance 6: every node in turn gets
// SIGTERM (and must exit 0), then starts again with empty memory, while
// 4 producers spread over the three nodes put. A dispatcher that gets
// SIGTERM hands its queues over before it leaves, so no acknowledged row
// is lost and none is inserted twice.
func TestFaults_gracefulRestarts(t *testing.T) {
	f := runGracefulRestarts(t, nil)
	f.Scenario, f.Title = "6", "6. ack=queued, graceful restart (SIGTERM) of every node in turn"
	report(t, f)
}

// TestFaults_replicatedGracefulRestarts is scenario 9: scenario 6 with
// ack=replicated, where every row also has a copy on the dispatcher's
// backup, which a leaving dispatcher has drop them (resetBackup) after
// its hand-over: no acknowledged row is lost or inserted twice either.
// (The race it guards against, a RESET lost at the exit with releases
// still on their way, is too narrow to show at this rate: the dispatch
// package's TestHandoff_backupDropsAcknowledgedCopies shows it.)
func TestFaults_replicatedGracefulRestarts(t *testing.T) {
	f := runGracefulRestarts(t, &faults.QueueSettings{Ack: "replicated", BatchRows: 500})
	f.Scenario, f.Title = "9", "9. ack=replicated, graceful restart (SIGTERM) of every node in turn"
	report(t, f)
}

// runGracefulRestarts runs the graceful restart scenario with the queue
// settings given (nil: the defaults), checks that no acknowledged row is
// lost or inserted twice, and returns its figures, for the caller to name.
func runGracefulRestarts(t *testing.T, settings *faults.QueueSettings) faults.Figures {
	t.Helper()
	faultsParallel(t)
	r := newFaultRig(t, rigOptions{settings: settings})
	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.Rate = 4, restartRate
	w := r.workload(cfg, 0, 1, 2)
	r.waitFlowing(w, 100)
	restarts, dispatcherRestarts := 0, 0
	for round := range restartRounds {
		for i, p := range r.nodes {
			time.Sleep(between(r.rng, restartGapMin, restartGapMax)) // load between restarts: a schedule, not a wait
			d, rec := r.dispatcher()
			q, err := r.depth(i)
			if err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			if err := p.Stop(); err != nil {
				t.Errorf("round %d: SIGTERM of %s: %v, want exit status 0", round+1, p.Name, err)
			}
			took := time.Since(stopped)
			if d == i {
				dispatcherRestarts++
			}
			r.logf("round %d: SIGTERM of %s (dispatcher %v, record %q, depth_rows %d): exited after %v",
				round+1, p.Name, d == i, rec.raw, q.Rows, took.Round(time.Millisecond))
			r.restart(i)
			restarts++
			r.logf("round %d: %s restarted; queue: %s", round+1, p.Name, r.queueLine())
		}
	}
	time.Sleep(restartGapMin) // load after the last restart
	log := w.Stop()
	r.logf("puts: %d acked, failed by code: %s, %d timed out", log.Count(faults.Acked), codesOf(log), log.Count(faults.TimedOut))
	v, took, batch := r.settle(log)
	if err := v.Check(0, 0); err != nil {
		t.Error(err)
	}
	f := faults.Figures{Faults: restarts, Drain: took,
		Notes: fmt.Sprintf("%d rounds over the three nodes, %d of the restarts of the dispatcher; largest insert %d rows", restartRounds, dispatcherRestarts, batch)}
	f.FromVerdict(v)
	return f
}
