//go:build e2e

package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"chute/internal/faults"
)

// Parameters of the freeze scenario: how long the dispatcher stays
// stopped, and how long after SIGSTOP the producers on the other nodes
// may stall (serf reports the frozen node failed within fastDetection;
// a put already forwarded to it may wait out its timeout).
var (
	freezeDispatcherFor = pick(12*time.Second, 30*time.Second)
	freezeGrace         = fastDetection + faultPutTimeout
	freezeRate          = 50.0
)

// TestFaults_frozenDispatcher is acceptance 4: the dispatcher a is frozen
// with SIGSTOP for 30 s (12 s in the short form) while 4 producers on b
// and c put: after a grace (failure detection and one put timeout) every
// producer's puts succeed in every second of the freeze. After SIGCONT
// the three nodes agree on one dispatcher (b or c, a later epoch), a
// hands over what it held, and no acknowledged row is lost or inserted
// twice beyond one batch.
func TestFaults_frozenDispatcher(t *testing.T) {
	faultsParallel(t)
	r := newFaultRig(t, rigOptions{})
	log := r.seed(0)
	_, before := r.dispatcher()
	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.Rate = 4, freezeRate
	w := r.workload(cfg, 1, 2)
	r.waitFlowing(w, 100)

	a := r.nodes[0]
	depth, err := r.depth(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP a: %v", err)
	}
	frozen := time.Now()
	r.logf("SIGSTOP of the dispatcher a, holding depth_rows %d", depth.Rows)
	time.Sleep(freezeDispatcherFor) // the fault itself, not a wait for a condition
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT a: %v", err)
	}
	resumed := time.Now()
	_, after := r.waitMoved(before)
	agreed := time.Since(resumed)
	r.logf("SIGCONT after %v; all three agree on %q (was %q) %v later", freezeDispatcherFor, after.raw, before.raw, agreed.Round(time.Millisecond))
	if after.member == memberID(t, a) {
		t.Errorf("record after the freeze %q names a, which was frozen; want b or c", after.raw)
	}
	time.Sleep(pick(2*time.Second, 5*time.Second)) // load on the resumed cluster
	wlog := w.Stop()
	log = append(log, wlog...)

	// Progress of each producer during the freeze, past the grace.
	type stall struct {
		producer int
		second   time.Time
	}
	var stalls []stall
	pastGrace := wlog.Between(frozen.Add(freezeGrace), resumed)
	bad := len(pastGrace) - pastGrace.Count(faults.Acked)
	for p := range cfg.Producers {
		for s := frozen.Add(freezeGrace); s.Add(time.Second).Before(resumed); s = s.Add(time.Second) {
			n := 0
			for _, o := range wlog {
				if o.Producer == p && o.Result == faults.Acked && !o.End.Before(s) && o.End.Before(s.Add(time.Second)) {
					n++
				}
			}
			if n == 0 {
				stalls = append(stalls, stall{p, s})
			}
		}
	}
	for _, s := range stalls[:min(5, len(stalls))] {
		t.Errorf("producer %d had no put acknowledged in the second from %v after SIGSTOP", s.producer, s.second.Sub(frozen).Round(time.Millisecond))
	}
	if bad > 0 {
		t.Errorf("%d puts sent more than %v after SIGSTOP did not succeed: failed by code %s, %d timed out", bad, freezeGrace, codesOf(pastGrace), pastGrace.Count(faults.TimedOut))
	}
	inFreeze := wlog.Between(frozen, resumed)
	var slowest time.Duration
	for _, o := range inFreeze {
		slowest = max(slowest, o.End.Sub(o.Start))
	}
	r.logf("puts during the freeze: %d acked, failed by code: %s, %d timed out; all puts: %d acked, failed %s, %d timed out",
		inFreeze.Count(faults.Acked), codesOf(inFreeze), inFreeze.Count(faults.TimedOut), log.Count(faults.Acked), codesOf(log), log.Count(faults.TimedOut))

	v, took, batch := r.settle(log)
	if err := v.Check(0, batch); err != nil {
		t.Error(err)
	}
	f := faults.Figures{Scenario: "4", Title: "4. ack=queued, dispatcher frozen (SIGSTOP)", Faults: 1, Drain: took,
		Notes: fmt.Sprintf("frozen %v holding %d rows; puts on b and c during it: %d acked, %d failed, %d timed out, slowest %v; one dispatcher %v after SIGCONT; largest insert %d rows",
			freezeDispatcherFor, depth.Rows, inFreeze.Count(faults.Acked), inFreeze.Count(faults.Failed), inFreeze.Count(faults.TimedOut),
			slowest.Round(time.Millisecond), agreed.Round(time.Millisecond), batch)}
	f.FromVerdict(v)
	report(t, f)
}
