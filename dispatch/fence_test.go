package dispatch

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"chute/kv"
)

// laggingRecords is a member's key space that, once frozen, answers Get
// for the frozen keys with their values of that moment, as the key space
// of a member frozen (SIGSTOP) or cut off does until it catches up;
// Linearize catches it up (it asks the leader).
type laggingRecords struct {
	*kv.Server
	mu     sync.Mutex
	frozen map[string][]byte // nil: not frozen
	asked  atomic.Int64      // Linearize calls
}

func (l *laggingRecords) freeze(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frozen = make(map[string][]byte)
	for _, k := range keys {
		l.frozen[k] = l.Server.Get(k)
	}
}

func (l *laggingRecords) Get(key string) []byte {
	l.mu.Lock()
	v, ok := l.frozen[key]
	l.mu.Unlock()
	if ok {
		return v
	}
	return l.Server.Get(key)
}

func (l *laggingRecords) Linearize(ctx context.Context) error {
	l.asked.Add(1)
	err := l.Server.Linearize(ctx)
	if err == nil {
		l.mu.Lock()
		l.frozen = nil
		l.mu.Unlock()
	}
	return err
}

// TestDrain_fencedByATakeover: a dispatcher whose key space lags (frozen,
// cut off) while another member takes its queue over does not retry its
// batch into ClickHouse when its timer fires: the read before the attempt
// shows the new dispatcher, and the batch goes there, with its token. It
// used to insert it, and the new dispatcher inserted the rows again.
// Fake ClickHouse servers, one per member, to tell who inserted, and to
// lose an answer (18.16 cannot be made to).
func TestDrain_fencedByATakeover(t *testing.T) {
	fakeA, chA := startTokenRecorder(t, true)
	fakeB, chB := startTokenRecorder(t, false)
	chOf := map[string]*chURL{"a": chA, "b": chB}
	withCH := func(name string) func(*Config) {
		return func(c *Config) {
			c.ClickHouse, c.ClickHouseOptions = chOf[name].get, chOf[name].options
			c.RetryMin, c.RetryMax = 500*time.Millisecond, 500*time.Millisecond
			c.InsertTimeout = 5 * time.Second
		}
	}
	lagging := map[string]*laggingRecords{}
	cl := newCluster(t)
	cl.records = func(name string, s *kv.Server) RecordStore {
		lagging[name] = &laggingRecords{Server: s}
		return lagging[name]
	}
	a, b := cl.start("a", withCH("a")), cl.start("b", withCH("b"))
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, SettingsKey("ch:f"), `{"max_inflight_inserts":1,"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Put(ctx, "/q/ch:f/p/0", `{"id":0}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "a's first insert", func() bool { return len(fakeA.snapshot()) == 1 })
	first := fakeA.snapshot()[0]
	// a's key space stops at this moment; b takes the queue over.
	lagging["a"].freeze(RecordKey("ch:f"))
	if _, err := b.cli.Put(ctx, RecordKey("ch:f"), strconv.FormatUint(b.id, 10)+";epoch=2"); err != nil {
		t.Fatal(err)
	}
	fakeA.setFail(false)
	waitUntil(t, 10*time.Second, "b to insert the row", func() bool { return len(fakeB.snapshot()) > 0 })
	time.Sleep(time.Second) // two of a's retry intervals
	if got := fakeA.snapshot(); len(got) != 1 {
		t.Fatalf("inserts from a: %d, want only the first, before b took the queue over", len(got))
	}
	gotB := fakeB.snapshot()
	if len(gotB) != 1 || gotB[0] != first {
		t.Fatalf("inserts from b: %+v, want the tried batch once, as a sent it: %+v", gotB, first)
	}
	if lagging["a"].asked.Load() == 0 {
		t.Fatal("a never read the cluster's key space before an attempt")
	}
	if !strings.Contains(first.token, "ch:f:") {
		t.Fatalf("token %q", first.token)
	}
}

// slowFirstRead is a key space whose first Linearize fails once its
// context ends (a leader that does not answer), and the others succeed
// at once.
type slowFirstRead struct {
	RecordStore // nil: caughtUp calls Linearize only
	calls       atomic.Int32
	started     chan struct{}
}

func (s *slowFirstRead) Linearize(ctx context.Context) error {
	if s.calls.Add(1) == 1 {
		close(s.started)
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// TestCaughtUp_sharesReads: drainers asking while a read runs neither
// start reads of their own nor take the running one's answer (it started
// before they asked, and would not show a takeover made meanwhile): they
// share the next read, which starts when the running one ends.
func TestCaughtUp_sharesReads(t *testing.T) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	ks := &slowFirstRead{started: make(chan struct{})}
	m.records = ks
	var wg sync.WaitGroup
	first := make(chan bool, 1)
	later := make(chan bool, 10)
	wg.Add(1)
	go func() { defer wg.Done(); first <- m.caughtUp(nil) }()
	<-ks.started
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); later <- m.caughtUp(nil) }()
	}
	waitUntil(t, 5*time.Second, "callers to wait for the next read", func() bool {
		m.fences.mu.Lock()
		defer m.fences.mu.Unlock()
		return m.fences.next != nil
	})
	time.Sleep(50 * time.Millisecond) // the others reach their wait
	if n := ks.calls.Load(); n != 1 {
		t.Fatalf("reads while the first runs: %d, want 1", n)
	}
	wg.Wait()
	close(later)
	if <-first {
		t.Fatal("the first caller was told the key space caught up; its read failed")
	}
	for r := range later {
		if !r {
			t.Fatal("a caller that asked while the first read ran got its answer, not the next read's")
		}
	}
}

// TestCaughtUp_stopEndsTheWait: a drainer told to stop does not wait for
// a read that hangs (it delayed the hand-over stopping it by up to
// fenceTimeout); the read goes on for those that share it.
func TestCaughtUp_stopEndsTheWait(t *testing.T) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	ks := &slowFirstRead{started: make(chan struct{})}
	m.records = ks
	first := make(chan bool, 1)
	go func() { first <- m.caughtUp(nil) }()
	<-ks.started
	stop := make(chan struct{})
	close(stop)
	start := time.Now()
	if m.caughtUp(stop) {
		t.Fatal("a stopped caller was told the key space caught up")
	}
	if took := time.Since(start); took > fenceTimeout/2 {
		t.Fatalf("a stopped caller waited %v", took)
	}
	if <-first {
		t.Fatal("the first read failed, and its caller was told it caught up")
	}
}
