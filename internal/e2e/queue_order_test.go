//go:build e2e

package e2e

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"chute/internal/testutil"
)

// Messages of TestQueue_orderAcrossDispatcherMove.
const (
	moveProducers = 16
	moveQueued    = 3000 // on a before the consumer on c claims the queue
	moveAfter     = 40   // puts of each producer after the claim
)

// TestQueue_orderAcrossDispatcherMove queues moveQueued messages on a, put
// by moveProducers producers one put after another each, then starts a
// consumer on c while they keep putting: c claims the queue, a hands over
// what it holds while the producers' next puts are forwarded to c. Each
// producer's messages reach the consumer in the producer's order: a
// forwarded put never overtakes the handed-over messages put before it.
func TestQueue_orderAcrossDispatcherMove(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("a")
	cc := c.startNode("c", "--join", a.GossipAddr)
	waitMembers(t, []*Proc{a, cc}, []*Proc{a, cc})
	const name = "move"
	cli := clusterClient(t, a.ClientAddr)
	var (
		put     atomic.Int64
		claimed atomic.Bool
		errs    errorOnce
		wg      sync.WaitGroup
		mu      sync.Mutex
		want    []string
	)
	for p := range moveProducers {
		wg.Go(func() {
			after := 0
			for i := 0; after < moveAfter; i++ {
				m := msgName(fmt.Sprintf("p%02d", p), i)
				if err := produce(cli, "q", name, []string{m}); err != nil {
					errs.set(err)
					return
				}
				mu.Lock()
				want = append(want, m)
				mu.Unlock()
				put.Add(1)
				if claimed.Load() {
					after++
				}
			}
		})
	}
	testutil.Eventually(t, deliverTimeout, fmt.Sprintf("%d messages queued on a", moveQueued), func() error {
		if n := put.Load(); n < moveQueued && errs.get() == nil {
			return fmt.Errorf("%d put", n)
		}
		return nil
	})
	start := time.Now()
	cons := startConsumer(t, cc, "/q/"+name+"/c/"+newUUID(), 8)
	claimed.Store(true)
	wg.Wait()
	if err := errs.get(); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, deliverTimeout, want, cons)
	t.Logf("%d messages, %d queued on a before the consumer on c claimed the queue; all acknowledged %v after the claim",
		len(want), moveQueued, time.Since(start).Round(time.Millisecond))
	checkExactlyOnce(t, want, cons)
	checkProducerOrder(t, cons.deliveries())
	waitDrained(t, name, a, cc)
}
