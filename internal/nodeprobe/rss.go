package nodeprobe

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ReadRSS returns the resident memory of process pid in bytes: VmRSS of
// /proc/<pid>/status (Linux only; elsewhere an error).
func ReadRSS(pid int) (int64, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("nodeprobe: rss: %w", err)
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
			return 0, fmt.Errorf("nodeprobe: rss: %s: line %q, want VmRSS: <n> kB", path, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("nodeprobe: rss: %s: %w", path, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("nodeprobe: rss: %s: %w", path, err)
	}
	return 0, fmt.Errorf("nodeprobe: rss: %s has no VmRSS line", path)
}

// RSSPeak is the largest resident memory of one process an RSSSampler
// read, in bytes, from Samples reads; while Samples is 0, Err is the last
// read's error.
type RSSPeak struct {
	Pid     int
	Bytes   int64
	Samples int
	Err     error
}

// RSSSampler reads the resident memory of some processes at a fixed
// interval and keeps each one's peak. Its goroutine is its own: Stop ends
// it and waits for it. Its methods may be called from any goroutine.
type RSSSampler struct {
	stop chan struct{}
	once sync.Once
	done chan struct{}

	mu    sync.Mutex // guards peaks
	peaks []RSSPeak
}

// SampleRSS starts sampling pids every interval (at least 1 ms),
// beginning now.
func SampleRSS(interval time.Duration, pids ...int) *RSSSampler {
	s := &RSSSampler{stop: make(chan struct{}), done: make(chan struct{}), peaks: make([]RSSPeak, len(pids))}
	for i, pid := range pids {
		s.peaks[i].Pid = pid
	}
	tick := time.NewTicker(max(interval, time.Millisecond))
	go func() {
		defer close(s.done)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *RSSSampler) sample() {
	for i := range s.peaks { // the length never changes
		rss, err := ReadRSS(s.peaks[i].Pid)
		s.mu.Lock()
		p := &s.peaks[i]
		if err != nil {
			p.Err = err
		} else {
			p.Samples++
			p.Bytes = max(p.Bytes, rss)
		}
		s.mu.Unlock()
	}
}

// Peaks returns the peaks so far, in the order of SampleRSS's pids.
func (s *RSSSampler) Peaks() []RSSPeak {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RSSPeak, len(s.peaks))
	for i, p := range s.peaks {
		if p.Samples > 0 {
			p.Err = nil
		}
		out[i] = p
	}
	return out
}

// Stop ends the sampling and returns Peaks. It may be called more than
// once.
func (s *RSSSampler) Stop() []RSSPeak {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	return s.Peaks()
}
