package bench

import (
	"time"

	"chute/internal/nodeprobe"
)

// rssPeriod is how often a run samples its nodes' resident memory.
const rssPeriod = 50 * time.Millisecond

// proc is a process whose memory a run samples.
type proc struct {
	name string
	pid  int
}

// rssSampler keeps the largest resident memory of some processes, read
// every period from the moment it starts until stop.
type rssSampler struct {
	procs   []proc
	sampler *nodeprobe.RSSSampler
}

// sampleRSS starts sampling procs every period.
func sampleRSS(procs []proc, period time.Duration) *rssSampler {
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	return &rssSampler{procs: procs, sampler: nodeprobe.SampleRSS(period, pids...)}
}

// stop ends the sampling and returns the peak of every process that gave
// a sample (one gone, or not on Linux, gives none). It is idempotent.
func (s *rssSampler) stop() []NodeRSS {
	var out []NodeRSS
	for i, p := range s.sampler.Stop() {
		if p.Samples > 0 {
			out = append(out, NodeRSS{Node: s.procs[i].name, Bytes: p.Bytes})
		}
	}
	return out
}
