package gcfloor

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name            string
		live, minGrowth uint64
		percent, want   int
	}{
		{"no collection yet", 0, 64 * mib, 100, 100},
		{"collector off", 4 * mib, 64 * mib, -1, -1},
		{"small live heap", 4 * mib, 64 * mib, 100, 1600},
		{"tens of MiB live", 34 * mib, 64 * mib, 100, 189},
		{"the live heap is the floor", 64 * mib, 64 * mib, 100, 100},
		{"live heap above the floor", 200 * mib, 64 * mib, 100, 100},
		{"GOGC of its own above the floor", 32 * mib, 64 * mib, 400, 400},
		{"GOGC of its own below the floor", 32 * mib, 64 * mib, 50, 200},
		{"a live heap of 1 MiB, under the runtime's least goal", 1 * mib, 64 * mib, 100, 1625},
		{"almost nothing live", 1, 64 * mib, 100, 1601},
		{"almost nothing live, GOGC of its own above the floor", 1, 64 * mib, 2000, 2000},
		{"a floor of 1 TiB", 1 * mib, 1 << 40, 100, maxPercent},
	} {
		if got := Percent(tc.live, tc.minGrowth, tc.percent); got != tc.want {
			t.Errorf("%s: Percent(%d, %d, %d) = %d, want %d", tc.name, tc.live, tc.minGrowth, tc.percent, got, tc.want)
		}
	}
}

// TestFloor_raisesHeapGoal: with a live heap of a few MiB, and with one
// of 24 MiB (to which a floor of 64 MiB on the heap goal alone would
// give 40 MiB of growth), the heap goal after a collection is the floor
// above the live heap, and not much more (the runtime's least goal grows
// with GOGC: at a live heap under 4 MiB a GOGC made for the live heap
// alone gave a goal of hundreds of MiB); Stop gives GOGC back.
func TestFloor_raisesHeapGoal(t *testing.T) {
	const floor = 64 << 20
	before := gogc()
	f := Start(Config{MinGrowth: floor})
	for _, size := range []int{0, 24 << 20} {
		live := make([]byte, size)
		for i := range live {
			live[i] = byte(i)
		}
		settle(t, func() string {
			if goal, heap := read(t, "/gc/heap/goal:bytes"), read(t, liveHeap); goal < heap+floor*9/10 || goal > heap+floor*5/4 {
				return fmt.Sprintf("%d bytes held: heap goal %d bytes with a live heap of %d, want about the floor %d above it", size, goal, heap, floor)
			}
			if p := gogc(); p <= 100 {
				return fmt.Sprintf("%d bytes held: GOGC %d under the floor, want above 100", size, p)
			}
			return ""
		})
		runtime.KeepAlive(live)
	}
	f.Stop()
	if p := gogc(); p != before {
		t.Errorf("GOGC %d after Stop, want %d as before Start", p, before)
	}
}

// TestFloor_liveHeapAboveFloor: once the live heap passes the floor,
// GOGC is the percent given.
func TestFloor_liveHeapAboveFloor(t *testing.T) {
	const floor = 16 << 20
	f := Start(Config{MinGrowth: floor, Percent: 100})
	defer f.Stop()
	live := make([]byte, 24<<20) // above the floor
	for i := range live {
		live[i] = byte(i)
	}
	settle(t, func() string {
		if p := gogc(); p != 100 {
			return fmt.Sprintf("GOGC %d with %d bytes live and a floor of %d, want 100", p, read(t, liveHeap), floor)
		}
		return ""
	})
	runtime.KeepAlive(live)
}

// settle runs collections, one at a time and at most 20, until wrong
// finds nothing wrong, and fails t with what it found after the last.
// A collection's cleanup tunes GOGC some time after it ends, and until
// then the runtime's goal is of the new live heap at the old GOGC: one
// reading can catch that gap (a loaded machine, -race), twenty in a row
// cannot.
func settle(t *testing.T, wrong func() string) {
	t.Helper()
	msg := ""
	for range 20 {
		churn(t, 1)
		if msg = wrong(); msg == "" {
			return
		}
	}
	t.Error(msg)
}

// churn allocates garbage until n more collections have ended and the
// cleanup after the last one had time to run, within a bound.
func churn(t *testing.T, n uint64) {
	t.Helper()
	start := read(t, "/gc/cycles/total:gc-cycles")
	deadline := time.Now().Add(30 * time.Second)
	var sink []byte
	for i := 0; read(t, "/gc/cycles/total:gc-cycles") < start+n; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d collections in 30s, want %d", read(t, "/gc/cycles/total:gc-cycles")-start, n)
		}
		sink = make([]byte, 64<<10)
		sink[0] = byte(i)
	}
	_ = sink
	// The cleanup runs on its own goroutine after the collection.
	for i := 0; i < 100; i++ {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func read(t *testing.T, name string) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("runtime metric %s: kind %v", name, s[0].Value.Kind())
	}
	return s[0].Value.Uint64()
}
