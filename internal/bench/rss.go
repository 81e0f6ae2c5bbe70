package bench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rssPeriod is how often a run samples its nodes' resident memory.
const rssPeriod = 50 * time.Millisecond

// ReadRSS returns the resident memory of process pid in bytes: VmRSS of
// /proc/<pid>/status (Linux only; elsewhere an error). The fault tests
// read it too.
func ReadRSS(pid int) (int64, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("bench: rss: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("bench: rss: %s: line %q, want VmRSS: <n> kB", path, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: rss: %s: %w", path, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("bench: rss: %s: %w", path, err)
	}
	return 0, fmt.Errorf("bench: rss: %s has no VmRSS line", path)
}

// proc is a process whose memory a run samples.
type proc struct {
	name string
	pid  int
}

// rssSampler keeps the largest resident memory of some processes, read
// every period from the moment it starts until stop. Its goroutine is its
// own; stop ends it and waits for it.
type rssSampler struct {
	procs    []proc
	stopc    chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// peak is written by the goroutine only; read it once done is closed.
	peak []int64
}

// sampleRSS starts sampling procs every period.
func sampleRSS(procs []proc, period time.Duration) *rssSampler {
	s := &rssSampler{procs: procs, stopc: make(chan struct{}), done: make(chan struct{}), peak: make([]int64, len(procs))}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			for i, p := range s.procs {
				if rss, err := ReadRSS(p.pid); err == nil { // gone or not Linux: no sample
					s.peak[i] = max(s.peak[i], rss)
				}
			}
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak of every process that gave
// a sample. It is idempotent.
func (s *rssSampler) stop() []NodeRSS {
	s.stopOnce.Do(func() { close(s.stopc) })
	<-s.done
	var out []NodeRSS
	for i, p := range s.procs {
		if s.peak[i] > 0 {
			out = append(out, NodeRSS{Node: p.name, Bytes: s.peak[i]})
		}
	}
	return out
}
