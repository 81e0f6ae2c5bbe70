package faults

import (
	"sync"
	"time"

	"chute/internal/bench"
)

// RSS returns the resident memory of process pid in bytes, from VmRSS in
// /proc/<pid>/status (Linux only).
func RSS(pid int) (int64, error) { return bench.ReadRSS(pid) }

// Sampler reads a process's resident memory at a fixed interval and keeps
// the largest value. Its methods may be called from any goroutine.
type Sampler struct {
	pid  int
	stop chan struct{}
	once sync.Once
	done chan struct{}

	mu      sync.Mutex // guards max, samples, lastErr
	max     int64
	samples int
	lastErr error
}

// SampleRSS starts sampling pid every interval (at least 1 ms), beginning
// now.
func SampleRSS(pid int, interval time.Duration) *Sampler {
	s := &Sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	interval = max(interval, time.Millisecond)
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
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

func (s *Sampler) sample() {
	rss, err := RSS(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr = err
		return
	}
	s.samples++
	s.max = max(s.max, rss)
}

// Max returns the largest resident memory seen so far, in bytes, and how
// many samples were read; with none, the last error.
func (s *Sampler) Max() (int64, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == 0 {
		return 0, 0, s.lastErr
	}
	return s.max, s.samples, nil
}

// Stop ends the sampling and returns Max. It may be called more than
// once.
func (s *Sampler) Stop() (int64, int, error) {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	return s.Max()
}
