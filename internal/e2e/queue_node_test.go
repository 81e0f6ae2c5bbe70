//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"chute/dispatch"
	"chute/internal/testutil"
)

// ctlOK runs etcdctl against p and fails the test unless it exits 0.
func ctlOK(t testing.TB, p *Proc, stdin string, args ...string) string {
	t.Helper()
	res, err := runEtcdctl(lookTool(t, "etcdctl"), p.ClientAddr, stdin, args...)
	if err != nil || res.Code != 0 {
		t.Fatalf("etcdctl %s on %s: %v, exit %d: %s", strings.Join(args, " "), p.Name, err, res.Code, res.Stderr)
	}
	return res.Stdout
}

// seqOf parses a delivery key's seq that a regular expression matched.
func seqOf(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64) // [0-9]+
	return n
}

// ctlWatchEvent is one event as `etcdctl watch` prints it: type, key, value.
var ctlWatchEvent = regexp.MustCompile(`(?m)^PUT\n/queue/jobs/([0-9]+)/(m[0-9])\n(v[0-9])\n`)

// TestQueue_oneNodeWatchPutAck consumes a queue on one node, first with a
// background `etcdctl watch` of /queue/jobs/consumer/<uuid>, then with a
// clientv3 watch of another consumer key. Messages put with etcdctl to
// /queue/jobs/producer/m1 and m2 (and /q/jobs/p/m3, the other spelling)
// arrive as PUT events in put order, keyed /queue/jobs/<seq>/<key> as the
// consumer spells it, version 1; `etcdctl del` of a delivery key prints 1
// (0 the second time), and /status shows the queue empty afterwards. The
// dispatcher and consumer records are plain keys etcdctl can read.
func TestQueue_oneNodeWatchPutAck(t *testing.T) {
	t.Parallel()
	p := StartChute(t)
	id := strconv.FormatUint(memberID(t, p), 10)
	consumerRecord := func(uuid string) string {
		return ctlOK(t, p, "", "get", "--print-value-only", "/q/jobs/c/"+uuid)
	}
	waitConsumers := func(n int) {
		t.Helper()
		testutil.Eventually(t, watchTimeout, fmt.Sprintf("%d consumer of jobs on %s", n, p.Name), func() error {
			q, ok, err := queueOn(p, "jobs")
			if err != nil {
				return err
			}
			if !ok && n > 0 || q.Consumers != n || q.LocalConsumers != n {
				return fmt.Errorf("queue known %v, consumers %d, local_consumers %d; want %d", ok, q.Consumers, q.LocalConsumers, n)
			}
			return nil
		})
	}
	requireEmpty := func(acked uint64) {
		t.Helper()
		q := mustQueueOn(t, p, "jobs")
		if q.Rows != 0 || q.Unacked != 0 || q.Bytes != 0 || q.Held != 0 || q.Stats.Acked != acked {
			t.Errorf("/status jobs after the acknowledgements: %+v; want depth 0, unacked 0, acked %d", q, acked)
		}
	}

	// etcdctl watch as the consumer.
	uuid := newUUID()
	w := startCtl(t, p.ClientAddr, "watch", "/queue/jobs/consumer/"+uuid)
	waitConsumers(1)
	if got := consumerRecord(uuid); got != id+"\n" {
		t.Errorf("consumer record /q/jobs/c/%s: got %q, want the member id %s", uuid, got, id)
	}
	if got, want := ctlOK(t, p, "", "get", "--print-value-only", "/q/jobs"), id+";epoch=1\n"; got != want {
		t.Errorf("dispatcher record /q/jobs: got %q, want %q", got, want)
	}
	for _, m := range []string{"m1", "m2"} {
		if got := ctlOK(t, p, "", "put", "/queue/jobs/producer/"+m, "v"+m[1:]); got != "OK\n" {
			t.Errorf("etcdctl put /queue/jobs/producer/%s: got %q, want OK", m, got)
		}
	}
	if !w.waitLines(6) {
		t.Fatalf("etcdctl watch: want 2 events within %v, got:\n%s", watchTimeout, w.output())
	}
	events := ctlWatchEvent.FindAllStringSubmatch(w.output(), -1)
	if len(events) != 2 || events[0][2] != "m1" || events[0][3] != "v1" || events[1][2] != "m2" || events[1][3] != "v2" {
		t.Fatalf("etcdctl watch: got\n%s\nwant PUT /queue/jobs/<seq>/m1 v1, then PUT /queue/jobs/<seq>/m2 v2", w.output())
	}
	if s1, s2 := seqOf(events[0][1]), seqOf(events[1][1]); s1 >= s2 {
		t.Errorf("etcdctl watch: seq of m1 %d, of m2 %d; want increasing", s1, s2)
	}
	if q := mustQueueOn(t, p, "jobs"); q.Rows != 2 || q.Unacked != 2 {
		t.Errorf("/status jobs before the acknowledgements: depth_rows %d, unacked %d; want 2, 2", q.Rows, q.Unacked)
	}
	for _, ev := range events {
		key := "/queue/jobs/" + ev[1] + "/" + ev[2]
		if got := ctlOK(t, p, "", "del", key); got != "1\n" {
			t.Errorf("etcdctl del %s: got %q, want 1", key, got)
		}
		if got := ctlOK(t, p, "", "del", key); got != "0\n" {
			t.Errorf("etcdctl del %s a second time: got %q, want 0", key, got)
		}
	}
	requireEmpty(2)
	w.cancel()
	<-w.done
	waitConsumers(0)
	if got := consumerRecord(uuid); got != "" {
		t.Errorf("consumer record /q/jobs/c/%s after its watch ended: got %q, want none", uuid, got)
	}

	// clientv3 watch as the consumer; it acknowledges nothing itself.
	c := startConsumer(t, p, "/queue/jobs/consumer/"+newUUID(), 0)
	ctlOK(t, p, "", "put", "/queue/jobs/producer/m1", "v1")
	ctlOK(t, p, "", "put", "/queue/jobs/producer/m2", "v2")
	ctlOK(t, p, "", "put", "/q/jobs/p/m3", "v3")
	testutil.Eventually(t, watchTimeout, "3 deliveries to the clientv3 consumer", func() error {
		if n := len(c.deliveries()); n < 3 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	ds := c.deliveries()
	for i, d := range ds {
		if want := fmt.Sprintf("m%d", i+1); d.Msg != want || d.Value != "v"+want[1:] || d.Attempt != 1 || i > 0 && d.Seq <= ds[i-1].Seq {
			t.Errorf("clientv3 delivery %d: got %s = %q version %d; want /queue/jobs/<seq>/%s = v%s version 1, seq increasing",
				i, d.Key, d.Value, d.Attempt, want, want[1:])
		}
	}
	if len(ds) != 3 {
		t.Fatalf("clientv3 consumer: got %d deliveries, want 3: %+v", len(ds), ds)
	}
	for _, d := range ds {
		if got := ctlOK(t, p, "", "del", d.Key); got != "1\n" {
			t.Errorf("etcdctl del %s: got %q, want 1", d.Key, got)
		}
	}
	requireEmpty(5)
}

// TestQueue_invalidKeys puts (and deletes) keys under a queue that are
// neither producer, consumer nor delivery keys: clientv3 gets
// InvalidArgument, etcdctl exits 1 printing it, and nothing is stored or
// queued.
func TestQueue_invalidKeys(t *testing.T) {
	t.Parallel()
	p := StartChute(t)
	cli := newClient(t, p)
	etcdctl := lookTool(t, "etcdctl")
	for _, key := range []string{
		"/q/jobs/x/y",
		"/q/jobs/p/a/b",
		"/queue/jobs/producer/a/b",
		"/q/jobs/p",
		"/q/jobs/p/",
		"/q/jobs/c/id/x",
		"/q/jobs/007/m", // a seq has no leading zero
	} {
		ctx, cancel := rpcCtx()
		_, err := cli.Put(ctx, key, "v")
		cancel()
		if code := grpcCode(err); code != codes.InvalidArgument {
			t.Errorf("clientv3 put %s: got %v (%v), want InvalidArgument", key, code, err)
		}
		if key != "/q/jobs/007/m" {
			ctx, cancel = rpcCtx()
			_, err = cli.Delete(ctx, key)
			cancel()
			if code := grpcCode(err); code != codes.InvalidArgument {
				t.Errorf("clientv3 delete %s: got %v (%v), want InvalidArgument", key, code, err)
			}
		}
		res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "put", key, "v")
		if err != nil || res.Code != 1 || !strings.Contains(res.Stderr, "code = InvalidArgument") {
			t.Errorf("etcdctl put %s: got %v %+v, want exit 1 and InvalidArgument", key, err, res)
		}
		ctx, cancel = rpcCtx()
		resp, err := cli.Get(ctx, key)
		cancel()
		if err != nil || len(resp.Kvs) != 0 {
			t.Errorf("get %s after the refused puts: got %v, %v; want no key", key, resp, err)
		}
	}
	if q, ok, err := queueOn(p, "jobs"); err != nil || ok && q.Stats.Enqueued != 0 {
		t.Errorf("/status jobs after the refused puts: %+v, %v; want nothing enqueued", q, err)
	}
}

// capValueLen is the value size of TestQueue_byteCap's messages: 64 of them, with
// their 3-byte keys, fit the 64 MiB cap (64 * (1 MiB - 61) bytes); a 65th
// does not.
const capValueLen = 1<<20 - 64

// capPutTimeout bounds one put of about 1 MiB: a loaded test machine has
// been seen to take over 5 s.
const capPutTimeout = 20 * time.Second

// TestQueue_byteCap fills a queue to its 64 MiB byte cap with 64 messages
// of about 1 MiB: the 65th put gets ResourceExhausted, which clientv3
// turns into rpctypes.ErrTooManyRequests and etcdctl prints as "etcdserver:
// too many requests", each after waiting about 2 s for room (dispatch.
// DefaultFullWait). Once a consumer drains and acknowledges the queue,
// puts succeed again, through both clients.
func TestQueue_byteCap(t *testing.T) {
	t.Parallel()
	p := StartChute(t)
	cli := newClient(t, p)
	etcdctl := lookTool(t, "etcdctl")
	value := strings.Repeat("x", capValueLen)
	msgs := make([]string, 0, 66)
	put := func(m string) error {
		ctx, cancel := context.WithTimeout(context.Background(), capPutTimeout)
		defer cancel()
		_, err := cli.Put(ctx, "/q/cap/p/"+m, value)
		return err
	}
	for i := range 64 {
		m := fmt.Sprintf("m%02d", i)
		if err := put(m); err != nil {
			t.Fatalf("put %d of 64 (%d bytes queued): %v", i+1, i*(capValueLen+3), err)
		}
		msgs = append(msgs, m)
	}
	start := time.Now()
	if err := put("m64"); !errors.Is(err, rpctypes.ErrTooManyRequests) || grpcCode(err) != codes.ResourceExhausted {
		t.Errorf("clientv3 put over the cap: got %v (%v), want %v (ResourceExhausted)", err, grpcCode(err), rpctypes.ErrTooManyRequests)
	} else if took, least := time.Since(start), dispatch.DefaultFullWait-200*time.Millisecond; took < least {
		t.Errorf("clientv3 put over the cap refused after %v, want it to wait for room about %v first", took, dispatch.DefaultFullWait)
	}
	res, err := runEtcdctl(etcdctl, p.ClientAddr, value, "--command-timeout=20s", "put", "/q/cap/p/m65") // the value from stdin
	if err != nil || res.Code != 1 || !strings.Contains(res.Stderr, "Error: etcdserver: too many requests") {
		t.Errorf("etcdctl put over the cap: got %v, exit %d, stderr %q; want exit 1, Error: etcdserver: too many requests", err, res.Code, res.Stderr)
	}
	q := mustQueueOn(t, p, "cap")
	// Refused counts puts, not the tries each made while it waited; both
	// waited.
	if want := int64(64 * (capValueLen + 3)); q.Rows != 64 || q.Bytes != want || q.Stats.Refused != 2 || q.Stats.Waited != 2 {
		t.Errorf("/status cap when full: depth_rows %d, depth_bytes %d, refused %d, waited %d; want 64, %d, 2, 2", q.Rows, q.Bytes, q.Stats.Refused, q.Stats.Waited, want)
	}

	c := startConsumer(t, p, "/q/cap/c/"+newUUID(), 4)
	waitAcked(t, deliverTimeout, msgs, c)
	waitDrained(t, "cap", p)
	if err := put("m64"); err != nil {
		t.Errorf("clientv3 put after the queue drained: %v", err)
	}
	if out := ctlOK(t, p, value, "--command-timeout=20s", "put", "/q/cap/p/m65"); out != "OK\n" {
		t.Errorf("etcdctl put after the queue drained: got %q, want OK", out)
	}
	msgs = append(msgs, "m64", "m65")
	waitAcked(t, deliverTimeout, msgs, c)
	checkExactlyOnce(t, msgs, c)
	for _, d := range c.deliveries() {
		if len(d.Value) != capValueLen {
			t.Errorf("delivery %s: value of %d bytes, want %d", d.Key, len(d.Value), capValueLen)
		}
	}
	waitDrained(t, "cap", p)
}

// TestQueue_batchProduceTxn sends 128-put txns to producer keys through a
// (the dispatcher, which hosts the consumer) and b (which forwards), and a
// 3-put `etcdctl txn -i` through b, while producers of single puts run on
// a and b: the consumer sees each txn's messages consecutively (numbers and
// arrival) and in order. A txn mixing a producer key and a plain key is
// InvalidArgument with both clients, writes no key and enqueues nothing.
func TestQueue_batchProduceTxn(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.startNode("a")
	b := c.startNode("b", "--join", a.GossipAddr)
	waitMembers(t, []*Proc{a, b}, []*Proc{a, b})
	cons := startConsumer(t, a, "/q/batch/c/"+newUUID(), 4)
	idA := memberID(t, a)
	waitSameRecord(t, "batch", []*Proc{a, b}, func(r queueRecord) error {
		if r.member != idA {
			return fmt.Errorf("record %q names %d, want a (%d), the consumer's node", r.raw, r.member, idA)
		}
		return nil
	})
	clis := clientsOf(t, a, b)

	// Single puts on a and b, interleaving with any batch that was not
	// atomic.
	var mu sync.Mutex
	var solo []string
	var soloErr errorOnce
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := msgName(fmt.Sprintf("solo%d", g), i)
				if err := produce(clis[g%2], "q", "batch", []string{m}); err != nil {
					soloErr.set(err)
					return
				}
				mu.Lock()
				solo = append(solo, m)
				mu.Unlock()
			}
		})
	}
	var want []string
	batches := map[string]int{}
	for i, on := range []string{"txa", "txb"} {
		ops := make([]clientv3.Op, 128)
		for j := range ops {
			m := msgName(on, j)
			ops[j] = clientv3.OpPut("/q/batch/p/"+m, m)
			want = append(want, m)
		}
		ctx, cancel := rpcCtx()
		resp, err := clis[i].Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil || !resp.Succeeded || len(resp.Responses) != 128 {
			t.Fatalf("128-put txn through %s: got %+v, %v; want succeeded with 128 responses", []string{"a", "b"}[i], resp, err)
		}
		batches[on] = 128
	}
	var stdin strings.Builder
	stdin.WriteString("\n") // no compares
	for j, key := range []string{"/q/batch/p/", "/queue/batch/producer/", "/q/batch/i/"} {
		m := msgName("ctl", j)
		fmt.Fprintf(&stdin, "put %s%s %s\n", key, m, m)
		want = append(want, m)
	}
	stdin.WriteString("\n\n") // end of success, no failure ops
	if out := ctlOK(t, b, stdin.String(), "txn", "-i"); !strings.HasSuffix(out, "SUCCESS\n\nOK\n\nOK\n\nOK\n") {
		t.Errorf("etcdctl txn -i with 3 producer puts: got %q, want SUCCESS and 3 OK", out)
	}
	batches["ctl"] = 3

	// Mixed txns are refused.
	ctx, cancel := rpcCtx()
	_, err := clis[1].Txn(ctx).Then(clientv3.OpPut("/q/batch/p/mixed-00000", "x"), clientv3.OpPut("plain-key", "y")).Commit()
	cancel()
	if code := grpcCode(err); code != codes.InvalidArgument {
		t.Errorf("clientv3 txn of a producer key and a plain key: got %v (%v), want InvalidArgument", code, err)
	}
	res, err := runEtcdctl(lookTool(t, "etcdctl"), b.ClientAddr, "\nput /q/batch/p/mixed-00001 x\nput plain-key y\n\n\n", "txn", "-i")
	if err != nil || res.Code != 1 || !strings.Contains(res.Stderr, "code = InvalidArgument") {
		t.Errorf("etcdctl txn -i of a producer key and a plain key: got %v %+v, want exit 1 and InvalidArgument", err, res)
	}
	close(stop)
	wg.Wait()
	if err := soloErr.get(); err != nil {
		t.Fatalf("single puts: %v", err)
	}
	for i, cli := range clis {
		ctx, cancel := rpcCtx()
		resp, err := cli.Get(ctx, "plain-key")
		cancel()
		if err != nil || len(resp.Kvs) != 0 {
			t.Errorf("get plain-key on %s after the refused txns: got %v, %v; want no key", []string{"a", "b"}[i], resp, err)
		}
	}
	// The last message: once it is acknowledged, a mixed txn's message
	// would have been delivered before it.
	if err := produce(clis[1], "q", "batch", []string{"end-00000"}); err != nil {
		t.Fatal(err)
	}
	want = append(append(want, solo...), "end-00000")
	waitAcked(t, deliverTimeout, want, cons)
	checkExactlyOnce(t, want, cons)
	checkProducerOrder(t, cons.deliveries())
	t.Logf("%d single puts ran alongside the batches", len(solo))

	// Each batch arrived consecutively: its messages in a row, numbered in
	// a row, in order.
	ds := cons.deliveries()
	first := map[string]int{}
	broken := map[string]string{} // batch → its first misplaced message
	for i, d := range ds {
		p, j, err := parseMsg(d.Msg)
		if err != nil || batches[p] == 0 || broken[p] != "" {
			continue
		}
		if j == 0 {
			first[p] = i
		}
		start, ok := first[p]
		switch {
		case !ok:
			broken[p] = fmt.Sprintf("%s delivered before %s", d.Msg, msgName(p, 0))
		case i != start+j:
			broken[p] = fmt.Sprintf("%s delivered at %d, want %d (%s at %d; %d messages of others between)",
				d.Msg, i, start+j, msgName(p, 0), start, i-start-j)
		case d.Seq != ds[start].Seq+uint64(j):
			broken[p] = fmt.Sprintf("%s numbered %d, want %d (%s numbered %d)", d.Msg, d.Seq, ds[start].Seq+uint64(j), msgName(p, 0), ds[start].Seq)
		}
	}
	for p, why := range broken {
		t.Errorf("batch %s of %d puts not enqueued consecutively: %s", p, batches[p], why)
	}
	waitDrained(t, "batch", a, b)
}
