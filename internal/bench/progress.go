package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progressPeriod is how often a progress line is redrawn.
const progressPeriod = 250 * time.Millisecond

// progressWidth is the width of the bar, in characters.
const progressWidth = 24

// progress redraws one line on a terminal: a label, a bar, how much of
// total is done, the rate and the time spent. Its goroutine is its own;
// end stops it and erases the line.
type progress struct {
	w       io.Writer
	label   string
	total   int64
	budget  time.Duration
	unit    string
	count   func() int64 // safe to call from the progress goroutine
	start   time.Time
	stopc   chan struct{}
	endOnce sync.Once
	done    chan struct{}
}

// startProgress draws the progress of count towards total (or of the time
// spent towards budget, whichever is further along) on w until end.
func startProgress(w io.Writer, label string, total int64, budget time.Duration, unit string, count func() int64) *progress {
	p := &progress{
		w: w, label: label, total: total, budget: budget, unit: unit, count: count,
		start: time.Now(), stopc: make(chan struct{}), done: make(chan struct{}),
	}
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.done)
	tick := time.NewTicker(progressPeriod)
	defer tick.Stop()
	for {
		_, _ = io.WriteString(p.w, "\r"+p.line(p.count(), time.Since(p.start))+"\x1b[K")
		select {
		case <-p.stopc:
			_, _ = io.WriteString(p.w, "\r\x1b[K")
			return
		case <-tick.C:
		}
	}
}

// line is the progress line after elapsed with n done.
func (p *progress) line(n int64, elapsed time.Duration) string {
	frac := 0.0
	if p.total > 0 {
		frac = float64(n) / float64(p.total)
	}
	if p.budget > 0 && p.budget < MaxRunDuration {
		frac = max(frac, float64(elapsed)/float64(p.budget))
	}
	frac = min(max(frac, 0), 1)
	filled := int(frac * progressWidth)
	rate := 0.0
	if elapsed > 0 {
		rate = float64(n) / elapsed.Seconds()
	}
	return fmt.Sprintf("%s [%s%s] %3.0f%% %d/%d %s %.0f/s %s", p.label,
		strings.Repeat("#", filled), strings.Repeat(".", progressWidth-filled), 100*frac,
		n, p.total, p.unit, rate, elapsed.Truncate(100*time.Millisecond))
}

// end stops the redrawing and erases the line. It is idempotent.
func (p *progress) end() {
	p.endOnce.Do(func() { close(p.stopc) })
	<-p.done
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
