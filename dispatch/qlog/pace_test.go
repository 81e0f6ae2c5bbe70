package qlog

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"chute/internal/testutil"
)

// pacedLog is a log whose writer paces fsyncs by a fake clock at 10ms,
// with Config.SyncBatch syncBatch (zero: the default), its fsyncs
// announced on fl.syncing, for the tests of pacing.
type pacedLog struct {
	t   *testing.T
	l   *Log
	clk *clockwork.FakeClock
	fl  *faults
}

func newPacedLog(t *testing.T, syncBatch int) *pacedLog {
	cfg, _ := testConfig(t)
	cfg.SegmentBytes, cfg.SyncBatch = 1<<20, syncBatch
	clk := clockwork.NewFakeClock()
	cfg.Clock, cfg.SyncInterval = clk, 10*time.Millisecond
	fl := &faults{syncing: make(chan struct{}, 1)}
	l, _ := openLog(t, cfg, fl.hooks())
	fl.waitSync(t) // the new segment's header
	return &pacedLog{t: t, l: l, clk: clk, fl: fl}
}

// appendAsync appends record i and returns where its answer comes.
func (p *pacedLog) appendAsync(i int) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := p.l.Append(context.Background(), rec(i, 100))
		done <- err
	}()
	return done
}

// wait waits up to 5s for the answer of the append called name.
func (p *pacedLog) wait(name string, done <-chan error) {
	p.t.Helper()
	select {
	case err := <-done:
		if err != nil {
			p.t.Fatalf("append %s: %v", name, err)
		}
	case <-time.After(5 * time.Second):
		p.t.Fatalf("append %s not answered within 5s", name)
	}
}

// paced waits up to 5s for the writer to wait on the clock.
func (p *pacedLog) paced() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.clk.BlockUntilContext(ctx, 1); err != nil {
		p.t.Fatalf("the writer never waited on the clock: %v", err)
	}
}

// pacedTogether checks that first, an append the writer has taken or
// is about to take, waits for the interval, and that record i, appended
// meanwhile as second, goes in the same fsync once the interval passes.
func (p *pacedLog) pacedTogether(firstName string, first <-chan error, secondName string, i int) {
	p.t.Helper()
	before := p.l.Stats().Fsyncs
	p.paced()
	second := p.appendAsync(i)
	testutil.EventuallyTrue(p.t, 5*time.Second, secondName+" waiting", func() bool { return p.l.Stats().Waiting == 1 })
	if got := p.l.Stats().Fsyncs; got != before {
		p.t.Fatalf("fsyncs went from %d to %d before the interval passed, want none", before, got)
	}
	p.clk.Advance(10 * time.Millisecond)
	p.wait(firstName, first)
	p.wait(secondName, second)
	if got := p.l.Stats().Fsyncs - before; got != 1 {
		p.t.Errorf("%s and %s took %d fsyncs, want 1", firstName, secondName, got)
	}
}

// After an fsync that covered appends of several callers, the next one
// waits for SyncInterval from its start, and what comes meanwhile shares
// it; once the interval has passed, an append goes at once.
func TestLog_Append_pacedAfterSharedFsync(t *testing.T) {
	p := newPacedLog(t, 0)
	l, clk, fl, appendAsync, wait, paced := p.l, p.clk, p.fl, p.appendAsync, p.wait, p.paced

	// a alone, its fsync held while b and c come: they share the next,
	// after the interval (they came while a's ran).
	hold := make(chan struct{})
	fl.hold.Store(&hold)
	a := appendAsync(0)
	fl.waitSync(t)
	b, c := appendAsync(1), appendAsync(2)
	testutil.EventuallyTrue(t, 5*time.Second, "b and c waiting", func() bool { return l.Stats().Waiting == 2 })
	fl.hold.Store(nil)
	close(hold)
	wait("a", a)
	paced()
	clk.Advance(10 * time.Millisecond)
	wait("b", b)
	wait("c", c)

	// d comes right after the shared fsync: it waits for the interval,
	// and e, coming meanwhile, shares d's fsync.
	p.pacedTogether("d", appendAsync(3), "e", 4)

	// Once the interval has passed, an append waits for nothing.
	clk.Advance(10 * time.Millisecond)
	f := appendAsync(5)
	wait("f", f)
}

// The paced wait ends, the interval not yet passed, once the appends
// waiting for the fsync hold SyncBatch records, those the writer took
// included: records, not appends, so that a member's forward frame
// counts by its puts.
func TestLog_Append_paceEndsAtSyncBatch(t *testing.T) {
	p := newPacedLog(t, 5)
	l, fl, wait, paced := p.l, p.fl, p.wait, p.paced
	appendAsync := func(recs ...[]byte) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := l.Append(context.Background(), recs...)
			done <- err
		}()
		return done
	}

	// a alone, its fsync held while b and c come; then the writer
	// takes b and c and waits on the clock, which never moves here.
	hold := make(chan struct{})
	fl.hold.Store(&hold)
	a := appendAsync(rec(0, 100))
	fl.waitSync(t)
	b, c := appendAsync(rec(1, 100)), appendAsync(rec(2, 100))
	testutil.EventuallyTrue(t, 5*time.Second, "b and c waiting", func() bool { return l.Stats().Waiting == 2 })
	fl.hold.Store(nil)
	close(hold)
	wait("a", a)
	paced()
	before := l.Stats().Fsyncs

	// d's two records make four of five: the wait goes on.
	d := appendAsync(rec(3, 100), rec(4, 100))
	testutil.EventuallyTrue(t, 5*time.Second, "d waiting", func() bool { return l.Stats().Waiting == 1 })
	if got := l.Stats().Fsyncs; got != before {
		t.Fatalf("fsyncs went from %d to %d with four records of a batch of five, want none", before, got)
	}
	// e makes five records in four appends: b to e share one fsync
	// without the clock moving.
	e := appendAsync(rec(5, 100))
	for name, done := range map[string]<-chan error{"b": b, "c": c, "d": d, "e": e} {
		wait(name, done)
	}
	if got := l.Stats().Fsyncs - before; got != 1 {
		t.Errorf("b to e took %d fsyncs, want 1", got)
	}
}

// Two callers taking turns, each waiting for its append before the next,
// meet at one fsync: an append that came while the other's fsync ran
// waits for the interval, and the other's next append shares its fsync.
func TestLog_Append_pacedAfterOverlappedFsync(t *testing.T) {
	p := newPacedLog(t, 0)
	l, fl, appendAsync, wait := p.l, p.fl, p.appendAsync, p.wait

	// a alone, its fsync held while b comes.
	hold := make(chan struct{})
	fl.hold.Store(&hold)
	a := appendAsync(0)
	fl.waitSync(t)
	b := appendAsync(1)
	testutil.EventuallyTrue(t, 5*time.Second, "b waiting", func() bool { return l.Stats().Waiting == 1 })
	fl.hold.Store(nil)
	close(hold)
	wait("a", a)

	// b is taken and waits for the interval; a's caller appends again
	// meanwhile, and shares b's fsync.
	p.pacedTogether("b", b, "a2", 2)
}

// A caller appending alone is never paced: each of its appends is a batch
// of one.
func TestLog_Append_loneCallerNotPaced(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.Clock, cfg.SyncInterval = clockwork.NewFakeClock(), time.Hour
	l, _ := openLog(t, cfg, hooks{})
	for i := range 20 {
		mustAppend(t, l, rec(i, 100))
	}
	if got := l.Stats().Fsyncs; got < 20 {
		t.Errorf("%d fsyncs for 20 appends in turn, want one each", got)
	}
}
