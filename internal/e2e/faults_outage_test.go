//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"chute/dispatch"
	"chute/internal/faults"
	"chute/internal/gcfloor"
	"chute/internal/nodeprobe"
)

// Parameters of the ClickHouse outage scenario.
var (
	outageSlowFor   = pick(2*time.Second, 10*time.Second)  // ClickHouse behind 300 ms of latency first
	outageLatency   = 300 * time.Millisecond               //
	outageDownFor   = pick(10*time.Second, 60*time.Second) // then killed at least this long,
	outageCapWithin = 90 * time.Second                     // and until a put was refused over the cap, at most this long
	outagePad       = 16 << 10                             // bytes of filler per row, to reach the cap with few puts
	outageBatch     = 8                                    // puts per transaction
)

// Byte caps of the outage scenario: the one its settings ask for, and the
// node's default, which applies where the settings key is not read yet.
const (
	outageCap  = 8 << 20
	defaultCap = 64 << 20
)

// The dispatcher's memory bound: its resident size may grow over what it
// was before the load by at most outageMemFactor times the cap plus
// outageMemFixed. A held row costs its bytes plus its key and index
// entries, Go's collector lets the heap grow to twice what is live, and
// returns freed pages to the system lazily; the fixed part is the
// requests in flight (gRPC buffers, forwarded frames) and the batch being
// inserted, and chute's heap floor: the heap may grow by the floor
// over what is live, and the spans one collection frees are not all
// reused before the next takes new ones, so up to about twice the floor.
// Measured on 2 cores before the floor: 27 MiB before, 78 MiB at most
// with the 8 MiB cap; 242 MiB at most with the 64 MiB default cap.
const (
	outageMemFactor = 3
	outageMemFixed  = 64<<20 + 2*gcfloor.DefaultMinGrowth
)

// TestFaults_clickhouseOutage is acceptance 5: 4 producers on the three
// nodes put rows of 16 KiB as fast as they can; ClickHouse is first slowed
// (300 ms per insert, through a proxy), then killed for 60 s (10 s in the
// short form, and in both until a put was refused over the cap). Puts
// beyond the queue's byte cap get ResourceExhausted and no other error;
// the queue never holds more than the cap and the dispatcher's memory
// grows by at most outageMemFactor times it and outageMemFixed; after ClickHouse restarts the
// backlog drains with no acknowledged row lost and at most one batch
// (the one the kill interrupted) inserted twice.
func TestFaults_clickhouseOutage(t *testing.T) {
	faultsParallel(t)
	r := newFaultRig(t, rigOptions{proxy: true, settings: &faults.QueueSettings{MaxBytes: outageCap, RetryMax: "2s"}})
	log := r.seed(0)
	a := r.nodes[0]
	base, err := nodeprobe.ReadRSS(a.pid())
	if err != nil {
		t.Fatal(err)
	}
	mem := nodeprobe.SampleRSS(100*time.Millisecond, a.pid())
	defer mem.Stop()

	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.Batch, cfg.Pad, cfg.PutTimeout = 4, outageBatch, outagePad, 10*time.Second
	w := r.workload(cfg, 0, 1, 2)
	r.waitFlowing(w, 100)

	r.proxy.SetLatency(outageLatency)
	r.logf("ClickHouse slowed by %v for %v", outageLatency, outageSlowFor)
	time.Sleep(outageSlowFor) // the fault itself
	r.ch.Kill(t)
	down := time.Now()
	r.proxy.SetLatency(0)
	var maxDepth dispatch.QueueStatus
	var firstRefusal time.Duration
	for {
		q, err := r.depth(0)
		if err == nil && q.Bytes > maxDepth.Bytes {
			maxDepth = q
		}
		if _, ok := w.FirstErrors()[codes.ResourceExhausted]; ok && firstRefusal == 0 {
			firstRefusal = time.Since(down)
		}
		if since := time.Since(down); since >= outageDownFor && firstRefusal > 0 || since >= outageCapWithin {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	log = append(log, w.Stop()...)
	downFor := time.Since(down)
	r.ch.Restart(t)
	restarted := time.Now()
	r.logf("ClickHouse killed for %v; the first put over the cap %v after the kill; largest depth on a: %d rows, %d bytes",
		downFor.Round(time.Millisecond), firstRefusal.Round(time.Millisecond), maxDepth.Rows, maxDepth.Bytes)
	v, _, batch := r.settle(log)
	drain := time.Since(restarted)
	peak := mem.Stop()[0]
	maxRSS, samples := peak.Bytes, peak.Samples
	if samples == 0 {
		t.Fatalf("resident memory of a: %v", peak.Err)
	}

	refused := log.Codes()[codes.ResourceExhausted]
	others := len(log) - log.Count(faults.Acked) - refused
	r.logf("puts: %d acked, failed by code: %s, %d timed out; a's RSS %d MiB before the load, at most %d MiB (%d samples)",
		log.Count(faults.Acked), codesOf(log), log.Count(faults.TimedOut), base>>20, maxRSS>>20, samples)
	if refused == 0 {
		t.Errorf("no put was refused with ResourceExhausted in %v without ClickHouse", downFor)
	}
	if others > 0 {
		t.Errorf("%d puts failed otherwise than ResourceExhausted: %s, %d timed out; first errors %v", others, codesOf(log), log.Count(faults.TimedOut), w.FirstErrors())
	}
	capacity, capNote := int64(outageCap), fmt.Sprintf("max_bytes %d MiB", outageCap>>20)
	slack := int64(outageBatch * (outagePad + 256)) // one request
	if maxDepth.Bytes > capacity+slack {
		capacity, capNote = defaultCap, fmt.Sprintf("max_bytes %d MiB not applied (the per-queue settings key), the default cap %d MiB held", outageCap>>20, defaultCap>>20)
		t.Logf("depth_bytes reached %d, over the %d asked for with max_bytes: checking against the default cap of %d", maxDepth.Bytes, outageCap, defaultCap)
	}
	if maxDepth.Bytes > capacity+slack {
		t.Errorf("depth_bytes of a reached %d, over the cap %d", maxDepth.Bytes, capacity)
	}
	if grew := maxRSS - base; grew > outageMemFactor*capacity+outageMemFixed {
		t.Errorf("a's resident memory grew by %d MiB (from %d to %d MiB), more than %d times the cap of %d MiB and %d MiB",
			grew>>20, base>>20, maxRSS>>20, outageMemFactor, capacity>>20, outageMemFixed>>20)
	}
	if err := v.Check(0, batch); err != nil {
		t.Error(err)
	}
	f := faults.Figures{Scenario: "5", Title: "5. ack=queued, ClickHouse slowed then down, under the byte cap", Faults: 1, Drain: drain, MaxRSS: maxRSS,
		Notes: fmt.Sprintf("%v slowed by %v, then killed %v; %s; depth at most %d rows, %.1f MiB; %d puts ResourceExhausted, the first %v into the outage; RSS %d MiB before the load; drain from the restart, largest insert %d rows",
			outageSlowFor, outageLatency, downFor.Round(time.Second), capNote, maxDepth.Rows, float64(maxDepth.Bytes)/(1<<20),
			refused, firstRefusal.Round(100*time.Millisecond), base>>20, batch)}
	f.FromVerdict(v)
	report(t, f)
}
