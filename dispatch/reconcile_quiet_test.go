package dispatch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"chute/kv"
)

// readCounts is a RecordStore that counts the reads of each key.
type readCounts struct {
	RecordStore
	mu    sync.Mutex
	reads map[string]int
}

func (r *readCounts) Get(key string) []byte {
	r.mu.Lock()
	r.reads[key]++
	r.mu.Unlock()
	return r.RecordStore.Get(key)
}

// take returns the reads of key since the last take.
func (r *readCounts) take(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.reads[key]
	delete(r.reads, key)
	return n
}

// TestReconcile_quietQueueEveryTenthRound checks that a queue holding
// nothing gets a reconcile round (its record read) only every
// quietRounds, while one holding a message gets every round, and that a
// quiet queue a message comes to gets the next one.
func TestReconcile_quietQueueEveryTenthRound(t *testing.T) {
	counts := &readCounts{reads: map[string]int{}}
	n := startNodeOn(t, func(c *Config) {
		c.Clock = clockwork.NewFakeClock()
		c.ReconcileInterval = time.Hour // the test runs the rounds
	}, func(srv *kv.Server) RecordStore {
		counts.RecordStore = srv
		return counts
	})
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	for _, key := range []string{"/q/quiet/p/1", "/q/busy/p/1"} {
		if _, err := cli.Put(ctx, key, "v"); err != nil {
			t.Fatal(err)
		}
	}
	wctx, leave := context.WithCancel(ctx)
	ev := collectN(t, cli.Watch(wctx, "/q/quiet/c/x"), 1, 10*time.Second)[0]
	if _, err := cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
		t.Fatal(err)
	}
	leave()
	waitFor(t, "the consumer removed", func() bool { return n.mgr.localConsumers("quiet") == 0 })
	waitFor(t, "the acknowledged message gone", func() bool { return !n.mgr.lookup("quiet").holding() })

	for range quietRounds { // the rounds until the next full one
		n.mgr.reconcile()
	}
	counts.take(RecordKey("quiet"))
	counts.take(RecordKey("busy"))
	const rounds = 3 * quietRounds
	for range rounds {
		n.mgr.reconcile()
	}
	if got := counts.take(RecordKey("busy")); got < rounds {
		t.Fatalf("record of the queue holding a message read %d times in %d rounds, want every round", got, rounds)
	}
	if got := counts.take(RecordKey("quiet")); got != rounds/quietRounds {
		t.Fatalf("record of the quiet queue read %d times in %d rounds, want %d (every %dth)", got, rounds, rounds/quietRounds, quietRounds)
	}

	n.mgr.reconcile() // the next full round is quietRounds-1 away
	counts.take(RecordKey("quiet"))
	if _, err := cli.Put(ctx, "/q/quiet/p/2", "w"); err != nil {
		t.Fatal(err)
	}
	counts.take(RecordKey("quiet")) // the put's own reads
	n.mgr.reconcile()
	if got := counts.take(RecordKey("quiet")); got == 0 {
		t.Fatal("record of a queue a message came to not read in the next round")
	}
}

// heldClickHouse is a fake ClickHouse whose inserts wait until hold is
// closed (nil: none waits), and which counts those answered: an insert
// held in flight on demand is what the real server cannot be made to
// give. An insert that starts waiting sends on waiting, if set and it
// has room.
type heldClickHouse struct {
	hold    chan struct{}
	waiting chan struct{}
	mu      sync.Mutex
	done    int
}

func (f *heldClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(r.URL.Query().Get("query"), "system.settings") || strings.Contains(string(body), "system.settings") {
		_, _ = io.WriteString(w, "1\n")
		return
	}
	if f.hold != nil {
		select {
		case f.waiting <- struct{}{}:
		default:
		}
		select {
		case <-f.hold:
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	f.done++
	f.mu.Unlock()
}

func (f *heldClickHouse) inserts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// TestReconcile_previousOwingDoneIsNotQuiet: a ClickHouse queue moves
// from c to b while c's insert is in flight; b asks c, which still
// holds the row, and waits for c's DONE. The insert lands and c holds
// nothing: its next round must still stop its drainer and send the
// DONE, not skip the queue as quiet (b then inserted nothing for up to
// handoverAwait, 2 s). Found by a review of the quiet rounds.
func TestReconcile_previousOwingDoneIsNotQuiet(t *testing.T) {
	held := &heldClickHouse{hold: make(chan struct{}), waiting: make(chan struct{}, 1)}
	free := &heldClickHouse{}
	sc, sb := httptest.NewServer(held), httptest.NewServer(free)
	t.Cleanup(sc.Close)
	t.Cleanup(sb.Close)
	var once sync.Once
	letGo := func() { once.Do(func() { close(held.hold) }) }
	t.Cleanup(letGo)
	chC, chB := &chURL{url: sc.URL, db: "default"}, &chURL{url: sb.URL, db: "default"}
	cl := newCluster(t)
	c := cl.start("c", func(cfg *Config) {
		cfg.ReconcileInterval = time.Hour // the test runs c's rounds
		cfg.ClickHouse, cfg.ClickHouseOptions = chC.get, chC.options
	})
	b := cl.start("b", func(cfg *Config) { cfg.ClickHouse, cfg.ClickHouseOptions = chB.get, chB.options })
	connect(b, c)
	ctx := testCtx(t, 30*time.Second)
	if _, err := c.cli.Put(ctx, SettingsKey("ch:q"), `{"batch_interval":"0s"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(ctx, "/q/ch:q/p/0", `{"id":0}`); err != nil {
		t.Fatal(err)
	}
	c.mgr.reconcile() // the first round, a full one: the next is not
	// c's insert in flight before the record moves, or its drainer's
	// fence gives the batch up.
	select {
	case <-held.waiting:
	case <-ctx.Done():
		t.Fatal("c's insert did not start")
	}
	rec, _ := ParseRecord(recordOn(c, "ch:q"))
	moved := fmt.Sprintf("%d;epoch=%d;from=%d", b.id, rec.Epoch+1, c.id)
	if _, err := c.cli.Put(ctx, RecordKey("ch:q"), moved); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the moved record on b", func() bool { return recordOn(b, "ch:q") == moved })
	start := time.Now()
	if _, err := b.cli.Put(ctx, "/q/ch:q/p/1", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "b to ask c", func() bool {
		q := b.mgr.lookup("ch:q")
		q.mu.Lock()
		defer q.mu.Unlock()
		asked, ok := q.awaiting[c.id]
		return ok && asked && len(q.awaiting) == 1
	})
	time.Sleep(100 * time.Millisecond) // c answers that it holds the row in flight
	letGo()
	waitUntil(t, 5*time.Second, "c's insert to land", func() bool { return !c.mgr.lookup("ch:q").holding() })
	c.mgr.reconcile() // not a full round
	waitUntil(t, 5*time.Second, "b's insert", func() bool { return free.inserts() > 0 })
	if took := time.Since(start); took >= handoverAwait {
		t.Fatalf("b inserted the row put to it after %v: it waited out handoverAwait for c's DONE, which c's round skipped", took)
	}
}
