//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/testutil"
)

// Messages of 1 MiB (value and key) fill a queue exactly to its 64 MiB
// byte cap, which is also the largest message a member accepts from
// another: what one member sends another about such a queue must be cut
// in pieces.

// fullTimeout bounds the delivery of a full queue: 64 MiB take a few
// seconds on loopback.
const fullTimeout = 15 * time.Second

// fullMsgs are the names of the 64 messages that fill a queue; each
// message's value is fullValue.
var fullMsgs = func() []string {
	var names []string
	for i := range 64 {
		names = append(names, fmt.Sprintf("m%02d", i))
	}
	return names
}()

// fullValue is the value of fullMsgs: with its 3-byte key, 1 MiB.
var fullValue = strings.Repeat("y", 1<<20-3)

// fillQueue puts fullMsgs on p and checks that the queue is at its cap.
func fillQueue(t *testing.T, p *Proc, name string) {
	t.Helper()
	cli := clusterClient(t, p.ClientAddr)
	for i, m := range fullMsgs {
		ctx, cancel := context.WithTimeout(context.Background(), capPutTimeout)
		_, err := cli.Put(ctx, "/q/"+name+"/p/"+m, fullValue)
		cancel()
		if err != nil {
			t.Fatalf("put %d of %d on %s: %v", i+1, len(fullMsgs), p.Name, err)
		}
	}
	if q := mustQueueOn(t, p, name); q.Bytes != 64<<20 {
		t.Fatalf("/status of %s: depth_bytes %d, want %d (the cap)", p.Name, q.Bytes, 64<<20)
	}
}

// requireFullDelivered waits until c acknowledged every message of
// fullMsgs, then requires each once, whole.
func requireFullDelivered(t *testing.T, name string, c *queueConsumer, nodes ...*Proc) {
	t.Helper()
	if err := ackedWithin(fullTimeout, fullMsgs, c); err != nil {
		t.Fatalf("%v%s", err, queueStates(name, nodes...))
	}
	checkExactlyOnce(t, fullMsgs, c)
	for _, d := range c.deliveries() {
		if d.Value != fullValue {
			t.Errorf("delivery %s: value of %d bytes, want %d", d.Key, len(d.Value), len(fullValue))
		}
	}
	waitDrained(t, name, nodes...)
}

// TestQueue_fullQueueMoves fills a queue on a to its cap, then a consumer
// on b claims the queue: a hands the 64 MiB over and the consumer gets
// every message once, whole.
func TestQueue_fullQueueMoves(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("a")
	b := c.startNode("b", "--join", a.GossipAddr)
	waitMembers(t, []*Proc{a, b}, []*Proc{a, b})
	fillQueue(t, a, "full")
	cons := startConsumer(t, b, "/q/full/c/"+newUUID(), 4)
	requireFullDelivered(t, "full", cons, a, b)
}

// TestQueue_fullQueueRemoteConsumer fills a queue on a to its cap while a
// consumer on a holds every message; a consumer on b attaches to a (which
// stays the dispatcher: it hosts a consumer), then the first consumer
// leaves: its 64 MiB go to the consumer on b over the dispatcher's stream,
// and it gets every message once, whole.
func TestQueue_fullQueueRemoteConsumer(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("a")
	b := c.startNode("b", "--join", a.GossipAddr)
	waitMembers(t, []*Proc{a, b}, []*Proc{a, b})
	holder := startConsumer(t, a, "/q/remote/c/"+newUUID(), 0)
	fillQueue(t, a, "remote")
	testutil.Eventually(t, deliverTimeout, "the consumer on a holding every message", func() error {
		if n := len(holder.deliveries()); n != len(fullMsgs) {
			return fmt.Errorf("holds %d", n)
		}
		return nil
	})
	cons := startConsumer(t, b, "/q/remote/c/"+newUUID(), 4)
	idA := memberID(t, a)
	testutil.Eventually(t, watchTimeout, "the consumer on b attached to a", func() error {
		q, _, err := queueOn(a, "remote")
		if err == nil && q.Consumers != 2 {
			err = fmt.Errorf("consumers %d on a, want 2", q.Consumers)
		}
		return err
	})
	holder.disconnect()
	requireFullDelivered(t, "remote", cons, a, b)
	waitSameRecord(t, "remote", []*Proc{a, b}, func(r queueRecord) error {
		if r.member != idA {
			return fmt.Errorf("record %q, want a (%d)", r.raw, idA)
		}
		return nil
	})
}

// Bounds of TestQueue_largeForwards.
const (
	largeQueues    = 2
	largeProducers = 40                     // per queue, one message of about 1 MiB each
	largePause     = 200 * time.Millisecond // a stopped, far shorter than failure detection on a LAN (seconds)
)

// TestQueue_largeForwards puts messages of about 1 MiB on b, all at once,
// to two queues that a dispatches, while a stops for a moment: b forwards
// them over one stream, 80 MiB in all, more than one peer message may
// carry, though each queue stays under its byte cap. Every put succeeds,
// b never falls back to holding copies (a is alive), and a consumer on a
// gets every message once, whole. The pile-up behind the stopped
// dispatcher depends on timing: the test catches frames over the limit
// about every other run. The nodes keep serf's LAN timings: with the
// fast ones (failure noticed in about 300 ms) a loaded machine that
// slowed a after its pause had b hold copies.
func TestQueue_largeForwards(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("a", "--gossip-profile", "lan")
	b := c.startNode("b", "--join", a.GossipAddr, "--gossip-profile", "lan")
	waitMembers(t, []*Proc{a, b}, []*Proc{a, b})
	idA := memberID(t, a)
	value := strings.Repeat("z", capValueLen)
	var cons []*queueConsumer
	var want [largeQueues][]string
	for q := range largeQueues {
		name := fmt.Sprintf("large%d", q)
		cons = append(cons, startConsumer(t, a, "/q/"+name+"/c/"+newUUID(), 4))
		waitSameRecord(t, name, []*Proc{a, b}, func(r queueRecord) error {
			if r.member != idA {
				return fmt.Errorf("record %q, want a (%d)", r.raw, idA)
			}
			return nil
		})
		want[q] = msgNames("m", 0, largeProducers)
	}
	clis := make([]*clientv3.Client, largeQueues)
	for q := range clis {
		clis[q] = clusterClient(t, b.ClientAddr)
	}
	var errs errorOnce
	var wg sync.WaitGroup
	start := make(chan struct{})
	for q := range largeQueues {
		for _, m := range want[q] {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), capPutTimeout)
				defer cancel()
				if _, err := clis[q].Put(ctx, fmt.Sprintf("/q/large%d/p/%s", q, m), value); err != nil {
					errs.set(fmt.Errorf("put %s to large%d on b: %w", m, q, err))
				}
			})
		}
	}
	// a stops for a moment as the puts start, so that b's forwards pile up
	// behind the first and go out together when it resumes.
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	close(start)
	time.Sleep(largePause)
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := errs.get(); err != nil {
		t.Fatalf("%v%s%s", err, queueStates("large0", a, b), queueStates("large1", a, b))
	}
	for q, c := range cons {
		if err := ackedWithin(deliverTimeout, want[q], c); err != nil {
			t.Fatalf("queue large%d: %v%s", q, err, queueStates(fmt.Sprintf("large%d", q), a, b))
		}
		checkExactlyOnce(t, want[q], c)
		for _, d := range c.deliveries() {
			if len(d.Value) != capValueLen {
				t.Errorf("delivery %s: value of %d bytes, want %d", d.Key, len(d.Value), capValueLen)
			}
		}
	}
	for q := range largeQueues {
		waitDrained(t, fmt.Sprintf("large%d", q), a, b)
	}
	// The dispatcher was alive throughout: b never fell back to holding
	// copies, and no peer message was over the limit.
	for _, p := range []*Proc{a, b} {
		log := p.Output()
		for _, bad := range []string{"larger than max", "holding copies on every member"} {
			if i := strings.Index(log, bad); i >= 0 {
				line := log[strings.LastIndex(log[:i], "\n")+1:]
				line, _, _ = strings.Cut(line, "\n")
				t.Errorf("%s logged %q while the dispatcher a was alive: %s", p.Name, bad, line)
			}
		}
	}
}
