package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultMinGrowth is how far a Floor lets the heap grow at least
// between collections.
const DefaultMinGrowth = 64 << 20

// maxPercent bounds the GOGC a Floor sets, for a floor of many GiB.
const maxPercent = 1 << 20

// runtimeHeapMinimum is the runtime's least heap goal at GOGC 100
// (defaultHeapMinimum in runtime/mgcpacer.go); the runtime scales it
// with GOGC, so that at a GOGC of p the goal is never under this times
// p/100, whatever the live heap.
const runtimeHeapMinimum = 4 << 20

// liveHeap is the runtime metric of the heap the last collection marked
// live.
const liveHeap = "/gc/heap/live:bytes"

// Config is a Floor's settings.
type Config struct {
	// MinGrowth is the least the heap may grow by between collections,
	// in bytes: the heap goal is at least the live heap plus this.
	// Zero: DefaultMinGrowth.
	MinGrowth uint64
	// Percent is the GOGC once the live heap times Percent/100 is above
	// MinGrowth. Zero: the GOGC in force when the Floor starts (100
	// unless the environment or a caller changed it).
	Percent int
}

// Floor keeps the heap goal at least Config.MinGrowth above the live
// heap. Start one, Stop it once.
type Floor struct {
	minGrowth uint64
	percent   int // the GOGC above the floor
	found     int // the GOGC when started, restored by Stop

	stopped atomic.Bool

	mu     sync.Mutex // guards sample and set; cleanups may run at once
	sample []metrics.Sample
	set    int // the GOGC last set
}

// mark is allocated for one collection: its cleanup runs once a
// collection found it unreachable, and allocates the next one. It is
// neither of zero size nor small enough for the tiny allocator, whose
// objects' cleanups may run late or never.
type mark struct{ _ [32]byte }

// Start sets GOGC for the live heap now and after every collection from
// now on, until Stop.
func Start(cfg Config) *Floor {
	f := &Floor{minGrowth: cfg.MinGrowth, percent: cfg.Percent, sample: []metrics.Sample{{Name: liveHeap}}}
	if f.minGrowth == 0 {
		f.minGrowth = DefaultMinGrowth
	}
	f.found = gogc()
	f.set = f.found
	if f.percent == 0 {
		f.percent = f.found
	}
	f.tune()
	f.arm()
	return f
}

// Stop stops setting GOGC and restores the GOGC found by Start. A
// collection's cleanup already running may set GOGC once more before it
// sees Stop; it then sets it back.
func (f *Floor) Stop() {
	f.stopped.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	debug.SetGCPercent(f.found)
	f.set = f.found
}

// arm allocates a mark whose cleanup tunes GOGC after the collection
// that frees it, and arms the next.
func (f *Floor) arm() {
	runtime.AddCleanup(&mark{}, func(f *Floor) {
		if f.stopped.Load() {
			return
		}
		f.tune()
		f.arm()
	}, f)
}

// tune sets GOGC so that the heap goal is at least the floor above the
// live heap, and f.percent once that is more.
func (f *Floor) tune() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Load() {
		return
	}
	metrics.Read(f.sample)
	var live uint64
	if s := f.sample[0]; s.Value.Kind() == metrics.KindUint64 {
		live = s.Value.Uint64()
	}
	p := Percent(live, f.minGrowth, f.percent)
	if p != f.set {
		debug.SetGCPercent(p)
		f.set = p
	}
}

// Percent is the GOGC that lets a live heap of live bytes grow by at
// least minGrowth before the next collection: percent when that is
// enough, when percent is negative (the collector is off), or when live
// is zero (no collection has ended yet: its goal is not of the live
// heap, and the first collection must come to show it).
//
// Below a live heap of about 4 MiB the runtime's least goal, which grows
// with GOGC, is what gives the floor: the GOGC is then the one whose
// least goal is the live heap and the floor. Without that bound a live
// heap of 360 KiB and a floor of 64 MiB made GOGC 17726 and a goal of
// 709 MiB, and a live heap growing before the next collection's
// cleanup ran could take the heap to GiBs.
func Percent(live, minGrowth uint64, percent int) int {
	if percent < 0 || live == 0 {
		return percent
	}
	l, m := float64(live), float64(minGrowth)
	if l*float64(percent)/100 >= m {
		return percent
	}
	p := min(math.Ceil(m*100/l), math.Ceil((l+m)*100/runtimeHeapMinimum), maxPercent)
	return max(int(p), percent)
}

// gogc is the GOGC in force, negative when the collector is off.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	return int(int32(s[0].Value.Uint64())) // the runtime's int32, -1 for off
}
