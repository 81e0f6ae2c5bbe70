//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"chute/internal/testutil"
)

// Bounds of the cut-link scenarios.
const (
	linkHealCut  = 30 * time.Second // how long the link stays cut in TestPartition_linkHeals
	linkHealTake = 8 * time.Second  // c to forward a put again once it is mended

	linkCutPuts     = 4                // producers on the node cut off from the dispatcher
	linkCutEach     = 250              // puts of each
	linkCutPutsTake = 60 * time.Second // a's consumer to acknowledge the puts on c
	// linkCutPutTimeout bounds one put on c: the first waits until c
	// gives up its forward to a (the stream broken, or its 5 s timeout)
	// and holds it instead.
	linkCutPutTimeout = 15 * time.Second
	linkCutDropTake   = 15 * time.Second // the cut-off node to drop the copies another node handed over
	linkCutQuietTake  = 3 * time.Second  // after the new dispatcher delivered, nothing more may come
)

// dispatchedByA starts three nodes a, b and c in namespaces, makes a the
// dispatcher of the plain queue (a put on a, "seed-00000") and returns
// them, that put, and a consumer on a that acknowledged it.
func dispatchedByA(t *testing.T, queue string) (*nsCluster, []string, *queueConsumer) {
	t.Helper()
	nc := newNSCluster(t, nil)
	a := nc.nodes[0]
	for i := range nc.nodes {
		nc.waitMemberNames(i, "a", "b", "c")
	}
	seed := msgNames("seed", 0, 1)
	if err := produce(clusterClient(t, a.ClientAddr), "q", queue, seed); err != nil {
		t.Fatal(err)
	}
	aID := memberID(t, a)
	waitSameRecord(t, queue, nc.nodes, func(r queueRecord) error {
		if r.member != aID {
			return fmt.Errorf("dispatcher %x, want a (%x)", r.member, aID)
		}
		return nil
	})
	onA := startConsumer(t, a, "/q/"+queue+"/c/on-a", 4)
	waitAcked(t, deliverTimeout, seed, onA)
	return nc, seed, onA
}

// TestPartition_linkCut cuts the link between a plain queue's dispatcher a
// and c alone (a partial partition: gossip still calls each alive) while
// c takes puts. c's puts are held as copies on c and b; b hands its over
// to a, whose consumer acknowledges them, and tells c that a took them, so
// c drops its own. Then a is killed with the link still cut: a new
// dispatcher is elected, and no message a's consumer acknowledged is
// delivered again. Without c dropping its copies, every one would be.
func TestPartition_linkCut(t *testing.T) {
	t.Parallel()
	const queue = "cut"
	nc, seed, onA := dispatchedByA(t, queue)
	a, b, c := nc.nodes[0], nc.nodes[1], nc.nodes[2]
	t0 := time.Now()
	logf := sinceLogf(t, t0)

	if err := nc.net.Cut(0, 2); err != nil {
		t.Fatal(err)
	}
	logf("link a-c cut")
	cliC := clusterClient(t, c.ClientAddr)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		msgs []string
	)
	for p := range linkCutPuts {
		names := msgNames(fmt.Sprintf("c%d", p), 0, linkCutEach)
		msgs = append(msgs, names...)
		wg.Go(func() {
			if err := produceWithin(cliC, "q", queue, names, linkCutPutTimeout); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("puts on c, cut off from the dispatcher: %v%s", err, queueStates(queue, nc.nodes...))
	}
	logf("%d puts on c acknowledged", len(msgs))
	waitAcked(t, linkCutPutsTake, msgs, onA)
	logf("a's consumer acknowledged them")
	testutil.Eventually(t, linkCutDropTake, "c to drop the copies a took from b", func() error {
		q, _, err := queueOn(c, queue)
		if err != nil {
			return err
		}
		if q.Held != 0 {
			return fmt.Errorf("c holds %d copies, want 0", q.Held)
		}
		return nil
	})
	logf("c holds no copies")

	a.Kill()
	onA.disconnect()
	logf("a killed, the link still cut")
	onB := startConsumer(t, b, "/q/"+queue+"/c/on-b", 4)
	after := msgNames("after", 0, 1)
	if err := produce(clusterClient(t, b.ClientAddr), "q", queue, after); err != nil {
		t.Fatalf("a put on b after a was killed: %v%s", err, queueStates(queue, b, c))
	}
	waitAcked(t, deliverTimeout, after, onB)
	logf("a new dispatcher delivered a put on b")
	time.Sleep(linkCutQuietTake)
	checkExactlyOnce(t, append(append(seed, msgs...), after...), onA, onB)
}

// TestPartition_linkHeals cuts the link between a plain queue's
// dispatcher a and c alone for 30 s, c's forward stream to a open from
// before (a put on c), and mends it: a put on c is forwarded to a again
// within 8 s, and every message reaches a's consumer exactly once. The
// cut drops packets and leaves connections open; without keepalive on
// the peer link, c's connection to a stayed open, TCP retransmitting
// with its growing backoff, and c held every put for 16-24 s more.
func TestPartition_linkHeals(t *testing.T) {
	t.Parallel()
	const queue = "heal"
	nc, seed, onA := dispatchedByA(t, queue)
	c := nc.nodes[2]
	logf := sinceLogf(t, time.Now())
	cliC := clusterClient(t, c.ClientAddr)
	msgs := append([]string(nil), seed...)
	put := func(m string) {
		t.Helper()
		if err := produceWithin(cliC, "q", queue, []string{m}, linkCutPutTimeout); err != nil {
			t.Fatalf("%v%s", err, queueStates(queue, nc.nodes...))
		}
		msgs = append(msgs, m)
	}
	put("before-00000") // c's forward stream to a, open
	if err := nc.net.Cut(0, 2); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	logf("link a-c cut")
	put("during-00000") // held once its forward finds no answer
	logf("a put on c held")
	time.Sleep(time.Until(cutAt.Add(linkHealCut)))
	forwarded := metricSum(t, c, "chute_queue_forwarded_total")
	if err := nc.net.Mend(0, 2); err != nil {
		t.Fatal(err)
	}
	mended := time.Now()
	logf("link a-c mended")
	for i := 0; metricSum(t, c, "chute_queue_forwarded_total") == forwarded; i++ {
		if time.Since(mended) > linkHealTake {
			t.Fatalf("no put on c forwarded to a within %v of the link's mend%s", linkHealTake, queueStates(queue, nc.nodes...))
		}
		put(msgName("after", i))
		time.Sleep(100 * time.Millisecond)
	}
	logf("c forwards to a again")
	waitAcked(t, deliverTimeout, msgs, onA)
	checkExactlyOnce(t, msgs, onA)
}
