//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/dispatch"
	"chute/internal/nodeprobe"
	"chute/internal/nodestatus"
	"chute/internal/testutil"
)

// Queue tests run consumers as clientv3 (or etcdctl) watches of
// a consumer key, producers as puts to producer keys, and read each node's
// state of a queue from GET /status on its metrics listener. A message is
// named by its producer key's last segment, "<producer>-<index>", which
// comes back as the last segment of its delivery key.

// Bounds of the queue tests' waits. Each is polled, never slept through.
const (
	deliverTimeout = 30 * time.Second // consumers to receive and acknowledge what a test waits for
	drainTimeout   = 10 * time.Second // every node's /status to show a queue empty
	recordTimeout  = 10 * time.Second // every node to show the same dispatcher record
	statusTimeout  = 2 * time.Second  // one GET /status
	ackTries       = 50               // tries of one acknowledgement refused as Unavailable
)

// statusOf returns p's GET /status.
func statusOf(p *Proc) (nodestatus.Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	return nodeprobe.Status(ctx, nil, p.MetricsAddr)
}

// queueStates describes the queue as each node's /status shows it.
func queueStates(name string, nodes ...*Proc) string {
	var b strings.Builder
	for _, p := range nodes {
		q, ok, err := queueOn(p, name)
		fmt.Fprintf(&b, "\n\t/status of %s: queue %s known %v, %+v, err %v", p.Name, name, ok, q, err)
	}
	return b.String()
}

// queueOn returns the queue called name as p's /status shows it; ok is
// false when p holds no state of it.
func queueOn(p *Proc, name string) (q dispatch.QueueStatus, ok bool, err error) {
	st, err := statusOf(p)
	if err != nil {
		return dispatch.QueueStatus{}, false, err
	}
	for _, q := range st.Queues {
		if q.Name == name {
			return q, true, nil
		}
	}
	return dispatch.QueueStatus{}, false, nil
}

// mustQueueOn is queueOn failing the test on an error or a missing queue.
func mustQueueOn(t testing.TB, p *Proc, name string) dispatch.QueueStatus {
	t.Helper()
	q, ok, err := queueOn(p, name)
	if err != nil || !ok {
		t.Fatalf("/status of %s: queue %s: ok %v, %v", p.Name, name, ok, err)
	}
	return q
}

// memberID returns p's member id, as dispatcher records write it.
func memberID(t testing.TB, p *Proc) uint64 {
	t.Helper()
	st, err := statusOf(p)
	if err != nil {
		t.Fatalf("/status of %s: %v", p.Name, err)
	}
	id, err := strconv.ParseUint(st.Member, 16, 64)
	if err != nil {
		t.Fatalf("/status of %s: member_id %q: %v", p.Name, st.Member, err)
	}
	return id
}

// waitDrained polls /status of each node until it shows the queue without
// messages, held copies or unacknowledged deliveries (a node without the
// queue shows it so).
func waitDrained(t testing.TB, name string, nodes ...*Proc) {
	t.Helper()
	for _, p := range nodes {
		testutil.Eventually(t, drainTimeout, fmt.Sprintf("queue %s drained on %s", name, p.Name), func() error {
			q, _, err := queueOn(p, name)
			if err != nil {
				return err
			}
			if q.Rows != 0 || q.Held != 0 || q.Unacked != 0 || q.Bytes != 0 {
				return fmt.Errorf("depth_rows %d, held_copies %d, unacked %d, depth_bytes %d; want 0",
					q.Rows, q.Held, q.Unacked, q.Bytes)
			}
			return nil
		})
	}
}

// queueRecord is a dispatcher record, the value of /q/{name}.
type queueRecord struct {
	raw           string
	member, epoch uint64
}

var recordRE = regexp.MustCompile(`^([1-9][0-9]*);epoch=([0-9]+)(;.*)?$`)

func parseRecord(s string) (queueRecord, error) {
	m := recordRE.FindStringSubmatch(s)
	if m == nil {
		return queueRecord{}, fmt.Errorf("record %q: want <member-id>;epoch=<n>", s)
	}
	member, err1 := strconv.ParseUint(m[1], 10, 64)
	epoch, err2 := strconv.ParseUint(m[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return queueRecord{}, fmt.Errorf("record %q: %w", s, err)
	}
	return queueRecord{raw: s, member: member, epoch: epoch}, nil
}

// ctlRecord reads the dispatcher record of the queue on p with etcdctl.
func ctlRecord(etcdctl string, p *Proc, name string) (queueRecord, error) {
	res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "get", "--print-value-only", "/q/"+name)
	if err != nil {
		return queueRecord{}, err
	}
	if res.Code != 0 {
		return queueRecord{}, fmt.Errorf("etcdctl get /q/%s on %s: exit %d: %s", name, p.Name, res.Code, res.Stderr)
	}
	return parseRecord(strings.TrimSuffix(res.Stdout, "\n"))
}

// waitSameRecord polls `etcdctl get /q/{name}` on every node until all
// print the same record and check accepts it, and returns it.
func waitSameRecord(t testing.TB, name string, nodes []*Proc, check func(queueRecord) error) queueRecord {
	t.Helper()
	etcdctl := lookTool(t, "etcdctl")
	var got queueRecord
	testutil.Eventually(t, recordTimeout, fmt.Sprintf("one dispatcher record of %s on %d nodes", name, len(nodes)), func() error {
		var seen []string
		for i, p := range nodes {
			rec, err := ctlRecord(etcdctl, p, name)
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			seen = append(seen, p.Name+": "+rec.raw)
			if i == 0 {
				got = rec
			} else if rec.raw != got.raw {
				return fmt.Errorf("records differ: %s", strings.Join(seen, ", "))
			}
		}
		if check != nil {
			return check(got)
		}
		return nil
	})
	return got
}

// newUUID returns a random UUID (version 4) for a consumer key.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// msgName names message i of a producer.
func msgName(producer string, i int) string { return fmt.Sprintf("%s-%05d", producer, i) }

// parseMsg splits a message name into its producer and index.
func parseMsg(msg string) (producer string, i int, err error) {
	producer, n, ok := strings.Cut(msg, "-")
	if !ok {
		return "", 0, fmt.Errorf("message %q: want <producer>-<index>", msg)
	}
	i, err = strconv.Atoi(n)
	return producer, i, err
}

// delivery is one PUT event of a consumer's watch.
type delivery struct {
	Key     string
	Value   string
	Seq     uint64
	Msg     string // the producer key's last segment
	Attempt int64  // the event's kv.Version
	At      time.Time
}

// parseDelivery checks that kv's key is a delivery key of the queue in
// the consumer's spelling, /{prefix}/{queue}/{seq}/{msg}.
func parseDelivery(prefix, queue string, kv *mvccpb.KeyValue, at time.Time) (delivery, error) {
	d := delivery{Key: string(kv.Key), Value: string(kv.Value), Attempt: kv.Version, At: at}
	segs := strings.Split(d.Key, "/")
	if len(segs) != 5 || segs[0] != "" || segs[1] != prefix || segs[2] != queue || segs[4] == "" {
		return d, fmt.Errorf("delivery key %q: want /%s/%s/<seq>/<key>", d.Key, prefix, queue)
	}
	seq, err := strconv.ParseUint(segs[3], 10, 64)
	if err != nil || seq == 0 {
		return d, fmt.Errorf("delivery key %q: seq %q: want a positive number", d.Key, segs[3])
	}
	d.Seq, d.Msg = seq, segs[4]
	return d, nil
}

// queueConsumer is a consumer watch with a clientv3 client of its own. It
// acknowledges (deletes) each delivery on ackers goroutines, unless it
// holds: then it keeps deliveries unacknowledged.
type queueConsumer struct {
	name   string // for messages: "<consumer> on <node>"
	prefix string // "q" or "queue", as the consumer key spells it
	queue  string
	cli    *clientv3.Client
	cancel context.CancelFunc
	acks   chan delivery
	done   chan struct{} // closed when the watch and the ackers ended

	holding  atomic.Bool
	pending  atomic.Int64 // acknowledgements queued or running
	ackDelay atomic.Int64 // nanoseconds each acknowledger waits before an acknowledgement: a slow consumer

	mu      sync.Mutex
	got     []delivery     // every delivery, in order
	held    []delivery     // deliveries kept unacknowledged
	acked   map[string]int // message → acknowledgements that deleted it
	ackZero []string       // delivery keys whose acknowledgement deleted nothing
	err     error          // first watch or acknowledgement error
}

// startConsumer watches the consumer key on p with a client of its own and
// returns once the watch is created. ackers goroutines acknowledge; with
// none, the consumer holds every delivery.
func startConsumer(t testing.TB, p *Proc, key string, ackers int) *queueConsumer {
	t.Helper()
	segs := strings.Split(key, "/")
	if len(segs) != 5 {
		t.Fatalf("consumer key %q: want /q/{name}/c/{id}", key)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.ClientAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3 %s: %v", p, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &queueConsumer{
		name: segs[4][:min(8, len(segs[4]))] + " on " + p.Name, prefix: segs[1], queue: segs[2],
		cli: cli, cancel: cancel, acks: make(chan delivery, 1<<16), done: make(chan struct{}),
		acked: make(map[string]int),
	}
	c.holding.Store(ackers == 0)
	wch := cli.Watch(ctx, key, clientv3.WithCreatedNotify())
	select {
	case resp, ok := <-wch:
		if !ok || !resp.Created || resp.Canceled {
			cancel()
			_ = cli.Close()
			t.Fatalf("consumer watch %s on %s: got %+v (open %v), want the created response, not canceled", key, p.Name, resp, ok)
		}
	case <-time.After(rpcTimeout):
		cancel()
		_ = cli.Close()
		t.Fatalf("consumer watch %s on %s: not created within %v", key, p.Name, rpcTimeout)
	}
	var wg sync.WaitGroup
	for range ackers {
		wg.Go(func() {
			for d := range c.acks {
				c.ack(ctx, d)
				c.pending.Add(-1)
			}
		})
	}
	wg.Go(func() {
		defer close(c.acks)
		c.receive(ctx, wch)
	})
	go func() {
		wg.Wait()
		close(c.done)
	}()
	t.Cleanup(c.disconnect)
	return c
}

// receive records the watch's events until it ends.
func (c *queueConsumer) receive(ctx context.Context, wch clientv3.WatchChan) {
	for resp := range wch {
		if err := resp.Err(); err != nil && ctx.Err() == nil {
			c.fail(fmt.Errorf("%s: watch: %w", c.name, err))
		}
		now := time.Now()
		for _, ev := range resp.Events {
			if ev.Type != clientv3.EventTypePut {
				c.fail(fmt.Errorf("%s: got a %v event of %q, want only PUT", c.name, ev.Type, ev.Kv.Key))
				continue
			}
			d, err := parseDelivery(c.prefix, c.queue, ev.Kv, now)
			if err != nil {
				c.fail(fmt.Errorf("%s: %w", c.name, err))
				continue
			}
			hold := c.holding.Load()
			c.mu.Lock()
			c.got = append(c.got, d)
			if hold {
				c.held = append(c.held, d)
			}
			c.mu.Unlock()
			if !hold {
				c.pending.Add(1)
				c.acks <- d
			}
		}
	}
}

// ack deletes the delivery key, retrying while the node answers
// Unavailable (a dispatcher moving).
func (c *queueConsumer) ack(ctx context.Context, d delivery) {
	if delay := time.Duration(c.ackDelay.Load()); delay > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	for try := 1; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		resp, err := c.cli.Delete(cctx, d.Key)
		cancel()
		switch {
		case err == nil && resp.Deleted == 1:
			c.mu.Lock()
			c.acked[d.Msg]++
			c.mu.Unlock()
			return
		case err == nil:
			c.mu.Lock()
			c.ackZero = append(c.ackZero, d.Key)
			c.mu.Unlock()
			return
		case ctx.Err() != nil:
			return // disconnected
		case grpcCode(err) == codes.Unavailable && try < ackTries:
			time.Sleep(100 * time.Millisecond)
		default:
			c.fail(fmt.Errorf("%s: acknowledge %s (try %d): %w", c.name, d.Key, try, err))
			return
		}
	}
}

func (c *queueConsumer) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

// hold makes the consumer keep its next deliveries unacknowledged, and
// waits until the acknowledgements already queued have run.
func (c *queueConsumer) hold(t testing.TB) {
	t.Helper()
	c.holding.Store(true)
	testutil.Eventually(t, rpcTimeout, c.name+": acknowledgements in flight", func() error {
		if n := c.pending.Load(); n != 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
}

// disconnect closes the consumer's client, which ends its watch, and waits
// for its goroutines. It may be called more than once.
func (c *queueConsumer) disconnect() {
	c.cancel()
	_ = c.cli.Close()
	<-c.done
}

// deliveries returns the deliveries so far, in order.
func (c *queueConsumer) deliveries() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// heldDeliveries returns the deliveries kept unacknowledged.
func (c *queueConsumer) heldDeliveries() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.held)
}

// ackedMsgs returns each message's successful acknowledgements.
func (c *queueConsumer) ackedMsgs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.acked))
	for k, v := range c.acked {
		m[k] = v
	}
	return m
}

// firstErr returns the first watch or acknowledgement error.
func (c *queueConsumer) firstErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// lostAcks reports the acknowledgements of deliveries that deleted
// nothing: the consumer held the message, yet the node did not know it.
func (c *queueConsumer) lostAcks() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ackZero) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d acknowledgements of delivered messages deleted nothing (deleted=0): %q",
		c.name, len(c.ackZero), c.ackZero[:min(5, len(c.ackZero))])
}

// ackedTotal sums the successful acknowledgements of each message over
// consumers.
func ackedTotal(cs ...*queueConsumer) map[string]int {
	total := make(map[string]int)
	for _, c := range cs {
		for m, n := range c.ackedMsgs() {
			total[m] += n
		}
	}
	return total
}

// waitAcked polls until every message of want is acknowledged by one of
// the consumers, or a consumer fails; it reports what is missing.
func waitAcked(t testing.TB, timeout time.Duration, want []string, cs ...*queueConsumer) {
	t.Helper()
	if err := ackedWithin(timeout, want, cs...); err != nil {
		t.Fatal(err)
	}
}

// ackedWithin is waitAcked returning its failure: what is missing, and
// what the consumers received of it.
func ackedWithin(timeout time.Duration, want []string, cs ...*queueConsumer) error {
	deadline := time.Now().Add(timeout)
	for {
		for _, c := range cs {
			if err := c.firstErr(); err != nil {
				return err
			}
		}
		total := ackedTotal(cs...)
		var missing []string
		for _, m := range want {
			if total[m] == 0 {
				missing = append(missing, m)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			first := missing[:min(5, len(missing))]
			return fmt.Errorf("%d messages acknowledged: not within %v: %d not acknowledged, first %q%s",
				len(want), timeout, len(missing), first, history(first, cs))
		}
		time.Sleep(pollInterval)
	}
}

// history describes what the consumers received of msgs and how their
// acknowledgements went.
func history(msgs []string, cs []*queueConsumer) string {
	var b strings.Builder
	for _, c := range cs {
		c.mu.Lock()
		for _, m := range msgs {
			var got []string
			for _, d := range c.got {
				if d.Msg == m {
					got = append(got, fmt.Sprintf("%s attempt %d", d.Key, d.Attempt))
				}
			}
			var zero []string
			for _, k := range c.ackZero {
				if strings.HasSuffix(k, "/"+m) {
					zero = append(zero, k)
				}
			}
			fmt.Fprintf(&b, "\n\t%s: %s: received %q, acknowledged %d (deleted=1), deleted=0 for %q", c.name, m, got, c.acked[m], zero)
		}
		c.mu.Unlock()
	}
	return b.String()
}

// checkExactlyOnce fails the test unless each message of want was
// acknowledged exactly once over the consumers and no other message was,
// no consumer received a message twice, no acknowledgement of a delivery
// deleted nothing, and no consumer failed.
func checkExactlyOnce(t testing.TB, want []string, cs ...*queueConsumer) {
	t.Helper()
	for _, c := range cs {
		if err := errors.Join(c.firstErr(), c.lostAcks()); err != nil {
			t.Error(err)
		}
		seen := make(map[string]int)
		for _, d := range c.deliveries() {
			seen[d.Msg]++
		}
		var twice []string
		for m, n := range seen {
			if n > 1 {
				twice = append(twice, fmt.Sprintf("%s×%d", m, n))
			}
		}
		if len(twice) > 0 {
			slices.Sort(twice)
			t.Errorf("%s received %d messages more than once: %v", c.name, len(twice), twice[:min(10, len(twice))])
		}
	}
	total := ackedTotal(cs...)
	wanted := make(map[string]bool, len(want))
	var bad []string
	for _, m := range want {
		wanted[m] = true
		if n := total[m]; n != 1 {
			bad = append(bad, fmt.Sprintf("%s acked %d times", m, n))
		}
	}
	for m, n := range total {
		if !wanted[m] {
			bad = append(bad, fmt.Sprintf("%s (not produced) acked %d times", m, n))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%d of %d messages not acknowledged exactly once: %v", len(bad), len(want), bad[:min(10, len(bad))])
	}
}

// checkProducerOrder fails the test unless each producer's messages were
// first delivered in the producer's order (redeliveries aside).
func checkProducerOrder(t testing.TB, ds []delivery) {
	t.Helper()
	last := make(map[string]delivery)
	bad := 0
	for _, d := range ds {
		if d.Attempt != 1 {
			continue
		}
		p, i, err := parseMsg(d.Msg)
		if err != nil {
			t.Error(err)
			continue
		}
		if prev, ok := last[p]; ok {
			if _, j, _ := parseMsg(prev.Msg); i <= j {
				if bad < 5 {
					t.Errorf("producer %s: %s (seq %d) delivered after %s (seq %d)", p, d.Msg, d.Seq, prev.Msg, prev.Seq)
				}
				bad++
			}
		}
		last[p] = d
	}
	if bad > 0 {
		var head strings.Builder
		for _, d := range ds[:min(40, len(ds))] {
			fmt.Fprintf(&head, " %s@%d", d.Msg, d.Seq)
		}
		t.Errorf("%d messages delivered out of their producer's order; the first deliveries (message@seq):%s", bad, head.String())
	}
}

// produce puts the messages through cli, in order, to
// /{prefix}/{queue}/p/{msg} with the message name as the value; it stops
// at the first error and returns it.
func produce(cli *clientv3.Client, prefix, queue string, msgs []string) error {
	return produceWithin(cli, prefix, queue, msgs, rpcTimeout)
}

// produceWithin is produce with timeout for each put.
func produceWithin(cli *clientv3.Client, prefix, queue string, msgs []string, timeout time.Duration) error {
	for _, m := range msgs {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := cli.Put(ctx, "/"+prefix+"/"+queue+"/p/"+m, m)
		cancel()
		if err != nil {
			return fmt.Errorf("put %s: %w", m, err)
		}
	}
	return nil
}

// msgNames returns msgName(producer, i) for i in [from, to).
func msgNames(producer string, from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, msgName(producer, i))
	}
	return out
}

// grpcCode returns the gRPC code of a clientv3 error: clientv3 turns the
// errors etcd names into rpctypes.EtcdError values and a call's own
// deadline into context.DeadlineExceeded.
func grpcCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	switch {
	case err == nil:
		return codes.OK
	case errors.As(err, &ee):
		return ee.Code()
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return status.Code(err)
}
