package dispatch

import (
	"context"
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
