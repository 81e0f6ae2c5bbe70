package kv

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestConcurrency_mutexExcludes runs clientv3's Mutex recipe with several
// contenders, each on its own session, and checks that no two ever hold it
// at once and that every one gets it.
func TestConcurrency_mutexExcludes(t *testing.T) {
	srv, _ := startServer(t, nil)
	const contenders, rounds = 4, 5
	var holders, maxHolders, acquired atomic.Int32
	var wg sync.WaitGroup
	for range contenders {
		cli := newClient(t, srv)
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sess.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := concurrency.NewMutex(sess, "/lock/m")
			ctx := testCtx(t, 20*time.Second)
			for range rounds {
				if err := m.Lock(ctx); err != nil {
					t.Errorf("lock: %v", err)
					return
				}
				n := holders.Add(1)
				for {
					old := maxHolders.Load()
					if n <= old || maxHolders.CompareAndSwap(old, n) {
						break
					}
				}
				acquired.Add(1)
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("unlock: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := maxHolders.Load(); got != 1 {
		t.Fatalf("most holders at once: got %d, want 1", got)
	}
	if got, want := acquired.Load(), int32(contenders*rounds); got != want {
		t.Fatalf("acquisitions: got %d, want %d", got, want)
	}
}

// TestConcurrency_mutexTryLockWhileHeld checks that TryLock fails while
// another session holds the lock, and succeeds once its session ends.
func TestConcurrency_mutexTryLockWhileHeld(t *testing.T) {
	srv, cli1 := startServer(t, nil)
	cli2 := newClient(t, srv)
	ctx := testCtx(t, 10*time.Second)
	s1, err := concurrency.NewSession(cli1, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := concurrency.NewSession(cli2, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	m1, m2 := concurrency.NewMutex(s1, "/lock/t"), concurrency.NewMutex(s2, "/lock/t")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); err != concurrency.ErrLocked {
		t.Fatalf("TryLock while held: got %v, want ErrLocked", err)
	}
	// Closing the session revokes its lease, which deletes its lock key.
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the holder's session ended: %v", err)
	}
}

// TestConcurrency_electionHandsOver runs clientv3's Election recipe: one
// leader, observers see it, and a resign hands leadership to the next
// campaigner.
func TestConcurrency_electionHandsOver(t *testing.T) {
	srv, cli1 := startServer(t, nil)
	cli2 := newClient(t, srv)
	ctx := testCtx(t, 20*time.Second)
	s1, err := concurrency.NewSession(cli1, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := concurrency.NewSession(cli2, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	e1, e2 := concurrency.NewElection(s1, "/election/e"), concurrency.NewElection(s2, "/election/e")
	if err := e1.Campaign(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	won := make(chan error, 1)
	go func() { won <- e2.Campaign(ctx, "two") }()

	leader, err := e1.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(leader.Kvs[0].Value); got != "one" {
		t.Fatalf("leader: got %q, want one", got)
	}
	observe := e1.Observe(ctx)
	select {
	case r := <-observe:
		if got := string(r.Kvs[0].Value); got != "one" {
			t.Fatalf("observed first: got %q, want one", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("observe saw no leader")
	}
	select {
	case err := <-won:
		t.Fatalf("second campaign returned while the first leads: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := e1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second campaign did not win after the leader resigned")
	}
	select {
	case r := <-observe:
		if got := string(r.Kvs[0].Value); got != "two" {
			t.Fatalf("observed after resign: got %q, want two", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("observe did not see the new leader")
	}
	if err := e2.Proclaim(ctx, "two-b"); err != nil {
		t.Fatal(err)
	}
	leader, err = e2.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(leader.Kvs[0].Value); got != "two-b" {
		t.Fatalf("after proclaim: got %q, want two-b", got)
	}
}
