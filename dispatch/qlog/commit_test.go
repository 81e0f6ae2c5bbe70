package qlog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"chute/internal/testutil"
)

// While an fsync runs, the appends that come wait and share the next one.
func TestLog_Append_groupCommit(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.SegmentBytes = 1 << 20
	fl := &faults{syncing: make(chan struct{}, 1)}
	l, _ := openLog(t, cfg, fl.hooks())
	fl.waitSync(t) // the new segment's header
	before := l.Stats()

	hold := make(chan struct{})
	fl.hold.Store(&hold)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	appendOne := func(i int) {
		defer wg.Done()
		if _, err := l.Append(context.Background(), rec(i, 200)); err != nil {
			errs <- err
		}
	}
	wg.Add(1)
	go appendOne(0)
	select {
	case <-fl.syncing: // the first append's fsync runs, held
	case <-time.After(5 * time.Second):
		t.Fatal("no fsync within 5s of an append")
	}
	wg.Add(n - 1)
	for i := 1; i < n; i++ {
		go appendOne(i)
	}
	testutil.EventuallyTrue(t, 5*time.Second, "appends waiting", func() bool {
		return l.Stats().Waiting == n-1
	})
	fl.hold.Store(nil)
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	s := l.Stats()
	fsyncs, appended := s.Fsyncs-before.Fsyncs, s.Appended-before.Appended
	if appended != n {
		t.Errorf("%d records appended, want %d", appended, n)
	}
	// The first fsync covers the first append; the 49 that came while it
	// ran share one or, if some were slow to arrive, a few more.
	if fsyncs < 2 || fsyncs > 4 {
		t.Errorf("%d fsyncs for %d appends, want 2 to 4", fsyncs, n)
	}
	if got := fl.syncs.Load(); got != int64(s.Fsyncs) {
		t.Errorf("the files saw %d fsyncs, the stats %d", got, s.Fsyncs)
	}
}

// Appenders on every side, releases among them: run with -race.
func TestLog_Append_concurrent(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	const workers, per = 8, 100
	var (
		mu   sync.Mutex
		want = map[uint64]string{}
		wg   sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				r1, r2 := rec(w*1000+2*i, 40+i), rec(w*1000+2*i+1, 40+w)
				seq, err := l.Append(context.Background(), r1, r2)
				if err != nil {
					errs <- err
					return
				}
				if err := l.Release(seq); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want[seq+1] = string(r2)
				mu.Unlock()
				_ = l.Stats()
				_ = l.Size()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Appended != 2*workers*per || s.Fsyncs >= s.Appended/2 {
		t.Errorf("stats %+v: want %d appended, sharing fsyncs", s, 2*workers*per)
	}
	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, want)
}

func TestLog_NoSync(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.NoSync = true
	fl := &faults{}
	l, _ := openLog(t, cfg, fl.hooks())
	want := map[uint64]string{}
	for i := range 100 {
		r := rec(i, 100)
		want[mustAppend(t, l, r)] = string(r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fl.syncs.Load(); n != 0 {
		t.Errorf("%d fsyncs with NoSync, want 0", n)
	}
	if s := l.Stats(); s.Fsyncs != 0 || s.Appended != 100 {
		t.Errorf("stats %+v, want 100 appended and no fsync", s)
	}
	_, got := openLog(t, cfg, hooks{})
	checkReplay(t, got, want)
}

// An Append whose context ends while its fsync runs returns at once; its
// record, which nobody knows the seq of, is released by the log.
func TestLog_Append_contextEnds(t *testing.T) {
	cfg, _ := testConfig(t)
	fl := &faults{syncing: make(chan struct{}, 1)}
	l, _ := openLog(t, cfg, fl.hooks())
	fl.waitSync(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, rec(0, 10)); !errors.Is(err, context.Canceled) {
		t.Errorf("append with an ended context: %v, want context.Canceled", err)
	}

	hold := make(chan struct{})
	fl.hold.Store(&hold)
	ctx, cancel = context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, rec(1, 10))
		res <- err
	}()
	fl.waitSync(t)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("append cancelled during its fsync: %v, want context.Canceled", err)
	}
	fl.hold.Store(nil)
	close(hold)
	r := rec(2, 10)
	seq := mustAppend(t, l, r)
	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, map[uint64]string{seq: string(r)})
}

func TestLog_Close(t *testing.T) {
	cfg, _ := testConfig(t)
	l, _ := openLog(t, cfg, hooks{})
	mustAppend(t, l, rec(0, 10))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := l.Append(context.Background(), rec(1, 10)); !errors.Is(err, ErrClosed) {
		t.Errorf("append after close: %v, want ErrClosed", err)
	}
	if err := l.Release(1); !errors.Is(err, ErrClosed) {
		t.Errorf("release after close: %v, want ErrClosed", err)
	}
}

// An Append whose context ends while it waits to be taken (an fsync of
// others runs) returns at once, and its record is never written: the
// writer drops it when it takes the queue.
func TestLog_Append_contextEndsWhileQueued(t *testing.T) {
	cfg, _ := testConfig(t)
	fl := &faults{syncing: make(chan struct{}, 1)}
	l, _ := openLog(t, cfg, fl.hooks())
	fl.waitSync(t) // the new segment's header

	before := l.Stats().Appended
	hold := make(chan struct{})
	fl.hold.Store(&hold)
	first := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), rec(0, 10))
		first <- err
	}()
	fl.waitSync(t) // the first append's fsync runs, held
	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, rec(1, 10))
		queued <- err
	}()
	testutil.EventuallyTrue(t, 5*time.Second, "the second append queued", func() bool { return l.Stats().Waiting == 1 })
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Errorf("append cancelled while queued: got %v, want context.Canceled", err)
	}
	fl.hold.Store(nil)
	close(hold)
	if err := <-first; err != nil {
		t.Fatalf("first append: %v", err)
	}
	r := rec(2, 10)
	seq := mustAppend(t, l, r)
	if got := l.Stats().Appended - before; got != 2 {
		t.Errorf("records appended: got %d, want 2 (the cancelled one dropped)", got)
	}
	if got := l.Stats().Waiting; got != 0 {
		t.Errorf("appends waiting: got %d, want 0", got)
	}
	_, got := reopen(t, l, cfg, false)
	checkReplay(t, got, map[uint64]string{seq - 1: string(rec(0, 10)), seq: string(r)})
}

// Appends queued when the log closes fail with ErrClosed, and none
// waits past Close.
func TestLog_Close_failsQueuedAppends(t *testing.T) {
	cfg, _ := testConfig(t)
	fl := &faults{syncing: make(chan struct{}, 1)}
	l, _ := openLog(t, cfg, fl.hooks())
	fl.waitSync(t)

	hold := make(chan struct{})
	fl.hold.Store(&hold)
	const n = 5
	errs := make(chan error, n)
	go func() {
		_, err := l.Append(context.Background(), rec(0, 10))
		errs <- err
	}()
	fl.waitSync(t) // the first append's fsync runs, held
	for i := 1; i < n; i++ {
		go func() {
			_, err := l.Append(context.Background(), rec(i, 10))
			errs <- err
		}()
	}
	testutil.EventuallyTrue(t, 5*time.Second, "appends queued", func() bool { return l.Stats().Waiting == n-1 })
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	fl.hold.Store(nil)
	close(hold)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return within 5s")
	}
	ok, refused := 0, 0
	for range n {
		select {
		case err := <-errs:
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrClosed):
				refused++
			default:
				t.Errorf("append: got %v, want nil or ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an append still waits 5s after Close")
		}
	}
	if ok < 1 || ok+refused != n {
		t.Errorf("appends: got %d written and %d refused, want the first written and the rest answered", ok, refused)
	}
}
