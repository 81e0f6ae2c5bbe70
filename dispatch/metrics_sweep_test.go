package dispatch

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPutCounts_sweepLosesNoPut: puts to a queue this member does not
// hold, counted while sweeps run, never land in a series a sweep deleted
// (no longer exported): a put that looked its series up just before a
// sweep deleted it added to it after, in 4 runs of 4 before the add
// moved under the read lock.
func TestPutCounts_sweepLosesNoPut(t *testing.T) {
	im, err := newInsertMetrics(nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	c := im.puts
	ctx := context.Background()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				im.countPuts(ctx, "fwd", nil, 1)
				for range i % 2000 {
					runtime.Gosched()
				}
			}
		}()
	}
	orphans := map[*putCount]int64{}
	for range 200000 {
		c.mu.RLock()
		before := map[*putCount]bool{}
		for _, pc := range c.m {
			before[pc] = true
		}
		c.mu.RUnlock()
		c.sweep(func(string) bool { return false })
		c.mu.RLock()
		for pc := range before {
			found := false
			for _, p := range c.m {
				found = found || p == pc
			}
			if !found {
				orphans[pc] = pc.n.Load()
			}
		}
		c.mu.RUnlock()
	}
	stop.Store(true)
	wg.Wait()
	lost := int64(0)
	for pc, at := range orphans {
		lost += pc.n.Load() - at
	}
	t.Logf("series dropped %d times; puts added to dropped series afterwards: %d", len(orphans), lost)
	if lost > 0 {
		t.Fatalf("%d puts counted into series already dropped (never exported)", lost)
	}
}
