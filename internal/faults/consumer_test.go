package faults

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"chute/dispatch"
	"chute/kv"
)

// startQueueNode starts a chute node in this process, kv and dispatch,
// its queues in memory, on a free loopback port, and returns its client
// address. It stops when the test ends.
func startQueueNode(t testing.TB) string {
	t.Helper()
	mgr, err := dispatch.New(dispatch.Config{MemberID: 1})
	if err != nil {
		t.Fatalf("dispatch.New: %v", err)
	}
	cfg := kv.DefaultConfig()
	cfg.Name, cfg.MemberID = "faults", 1
	cfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	cfg.Queues = mgr
	srv, err := kv.New(cfg)
	if err != nil {
		t.Fatalf("kv.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("kv Start: %v", err)
	}
	mgr.Start(srv, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("kv Shutdown: %v", err)
		}
		// Messages a test leaves queued are lost with the memory: not
		// this test's concern.
		_ = mgr.Shutdown(ctx)
	})
	return srv.ClientAddrs()[0].String()
}

// putAll runs producers × max puts to queue at addr and returns the log,
// every put acknowledged.
func putAll(t *testing.T, addr, queue string, first, producers, max int) Log {
	t.Helper()
	cfg := DefaultWorkloadConfig()
	cfg.Queue, cfg.Endpoints = queue, []string{addr}
	cfg.Producers, cfg.FirstProducer, cfg.MaxPuts = producers, first, max
	w, err := StartWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, w, 30*time.Second)
	log := w.Stop()
	if log.Count(Acked) != producers*max {
		t.Fatalf("acked puts: got %d, want %d: %v", log.Count(Acked), producers*max, w.FirstErrors())
	}
	return log
}

// startConsumer starts a Consumer of queue at addr, stopped when the test
// ends.
func startConsumer(t *testing.T, addr, queue string, consumers int) *Consumer {
	t.Helper()
	cfg := DefaultConsumerConfig()
	cfg.Queue, cfg.Endpoints, cfg.Consumers, cfg.Duration = queue, []string{addr}, consumers, time.Minute
	c, err := StartConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// waitAcked polls until the consumer has acknowledged n deliveries and
// has none pending.
func waitAcked(t *testing.T, c *Consumer, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		sum := c.Receipts().Count()
		if sum.Acked >= n && c.Pending() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries acknowledged not within 20s: %+v, %d pending, err %v", n, sum, c.Pending(), c.Err())
		}
	}
}

// client returns a clientv3 client of addr, closed when the test ends.
func client(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestConsumer_receivesAndAcks: every message a workload put to a plain
// queue is delivered to one of two consumers once and acknowledged, so
// the oracle finds none lost and no extra copy.
func TestConsumer_receivesAndAcks(t *testing.T) {
	addr := startQueueNode(t)
	c := startConsumer(t, addr, "jobs", 2)
	log := putAll(t, addr, "jobs", 0, 3, 40)
	waitAcked(t, c, 120)
	r := c.Stop()
	if err := c.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
	if f := c.Foreign(); len(f) != 0 {
		t.Errorf("foreign deliveries: %q", f)
	}
	if got := c.Watches(); got != 2 {
		t.Errorf("watches created: got %d, want 2 (one per consumer, none ended)", got)
	}
	if sum := r.Count(); sum != (Received{Deliveries: 120, Acked: 120}) {
		t.Errorf("receipts: got %+v, want 120 deliveries, each acknowledged", sum)
	}
	v := JudgeReceipts(log, r)
	if err := v.Check(0, 0); err != nil || v.Rows != 120 || v.IDs != 120 {
		t.Errorf("all delivered once: %v, Check(0, 0) = %v; want 120 deliveries of 120 ids and nil", v, err)
	}
}

// TestConsumer_secondCopy: a message put a second time under its key is
// a second message, delivered again: the oracle must count it as an
// extra copy and the check must fail.
func TestConsumer_secondCopy(t *testing.T) {
	addr := startQueueNode(t)
	c := startConsumer(t, addr, "jobs", 1)
	log := putAll(t, addr, "jobs", 0, 2, 10)
	twice := ID(1, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client(t, addr).Put(ctx, Key("jobs", 1, 4), `{"id":4294967300,"p":1,"n":4}`); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, c, 21)
	v := JudgeReceipts(log, c.Stop())
	if v.Extra != 1 || !slices.Equal(v.Duplicated, []uint64{twice}) || len(v.Lost) != 0 || v.Rows != 21 {
		t.Errorf("one message put twice: %v, duplicated %v; want 1 extra copy of 1-4, none lost, 21 deliveries", v, v.Duplicated)
	}
	if err := v.Check(0, 0); err == nil || !strings.Contains(err.Error(), "1 extra copies of 1 ids") {
		t.Errorf("Check(0, 0) with a message delivered twice: got %v, want it to fail on 1 extra copy", err)
	}
	if err := v.Check(0, 1); err != nil {
		t.Errorf("Check(0, 1): got %v, want nil", err)
	}
}

// TestConsumer_takenByAnother: a message another consumer received and
// acknowledged before the Consumer started never reaches it: the oracle
// must report that acknowledged put lost.
func TestConsumer_takenByAnother(t *testing.T) {
	addr := startQueueNode(t)
	log := putAll(t, addr, "jobs", 0, 1, 1)
	cli := client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wctx, stopWatch := context.WithCancel(ctx)
	wch := cli.Watch(wctx, "/q/jobs/c/thief")
	var key string
	for key == "" {
		select {
		case resp := <-wch:
			for _, ev := range resp.Events {
				key = string(ev.Kv.Key)
			}
		case <-ctx.Done():
			t.Fatal("the other consumer got no delivery within 10s")
		}
	}
	if resp, err := cli.Delete(ctx, key); err != nil || resp.Deleted != 1 {
		t.Fatalf("the other consumer's acknowledgement of %s: %v, %v", key, resp, err)
	}
	stopWatch()

	c := startConsumer(t, addr, "jobs", 1)
	log = append(log, putAll(t, addr, "jobs", 1, 1, 5)...)
	waitAcked(t, c, 5)
	v := JudgeReceipts(log, c.Stop())
	if !slices.Equal(v.Lost, []uint64{ID(0, 0)}) || v.Rows != 5 || v.Extra != 0 {
		t.Errorf("one message taken by another consumer: %v, lost %v; want exactly 0-0 lost, 5 deliveries", v, v.Lost)
	}
	if err := v.Check(0, 0); err == nil || !strings.Contains(err.Error(), "lost 1 acknowledged ids, want at most 0: [0-0]") {
		t.Errorf("Check(0, 0) with a message taken: got %v, want it to fail naming 0-0", err)
	}
}

// TestJudgeReceipts: only an id delivered and acknowledged (a delete
// answered OK, whether it deleted something or not) satisfies its put;
// deliveries beyond the first are extra copies; an id nobody put is
// unknown.
func TestJudgeReceipts(t *testing.T) {
	acked := func(n uint64) Outcome { return outcome(1, n, Acked, codes.OK) }
	log := Log{acked(0), acked(1), acked(2), acked(3), acked(4), outcome(1, 5, TimedOut, codes.DeadlineExceeded)}
	r := Receipts{
		ID(1, 0): {Deliveries: 1, Acked: 1},
		ID(1, 1): {Deliveries: 3, Acked: 1, AckedNothing: 2}, // delivered again twice
		ID(1, 2): {Deliveries: 1, AckFailed: 1},              // never acknowledged
		ID(1, 3): {Deliveries: 1, AckedNothing: 1},           // its acknowledgement deleted nothing
		ID(1, 5): {Deliveries: 1, Acked: 1},                  // timed out, delivered anyway
		ID(9, 0): {Deliveries: 1, Acked: 1},                  // never put
		ID(9, 1): {},                                         // an empty receipt is no delivery
	}
	v := JudgeReceipts(log, r)
	want := Verdict{
		Puts: 6, Acked: 5, TimedOut: 1, Rows: 6, IDs: 4,
		Lost:       []uint64{ID(1, 2), ID(1, 4)},
		Duplicated: []uint64{ID(1, 1)}, Extra: 2,
		Indeterminate: 1,
		Unknown:       []uint64{ID(9, 0)},
	}
	if v.String() != want.String() || !slices.Equal(v.Lost, want.Lost) || !slices.Equal(v.Duplicated, want.Duplicated) || !slices.Equal(v.Unknown, want.Unknown) {
		t.Errorf("JudgeReceipts:\n got %v, lost %v, duplicated %v, unknown %v\nwant %v, lost %v, duplicated %v, unknown %v",
			v, v.Lost, v.Duplicated, v.Unknown, want, want.Lost, want.Duplicated, want.Unknown)
	}
	if sum := r.Count(); sum != (Received{Deliveries: 8, Acked: 4, AckedNothing: 3, AckFailed: 1}) {
		t.Errorf("Count: got %+v", sum)
	}
}

func TestConsumerConfig_Validate(t *testing.T) {
	good := DefaultConsumerConfig()
	good.Queue, good.Endpoints, good.Duration = "jobs", []string{"127.0.0.1:1"}, time.Minute
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate of a good config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*ConsumerConfig)
		want   string
	}{
		{"no queue", func(c *ConsumerConfig) { c.Queue = "" }, "queue"},
		{"queue with a slash", func(c *ConsumerConfig) { c.Queue = "a/b" }, "queue"},
		{"no endpoints", func(c *ConsumerConfig) { c.Endpoints = nil }, "no endpoints"},
		{"unbounded", func(c *ConsumerConfig) { c.Duration = 0 }, "unbounded"},
		{"negative consumers", func(c *ConsumerConfig) { c.Consumers = -1 }, "consumers -1"},
		{"negative pause", func(c *ConsumerConfig) { c.RetryPause = -1 }, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: got %v, want an error with %q", err, tc.want)
			}
			if _, err := StartConsumer(c); err == nil {
				t.Error("StartConsumer accepted it")
			}
		})
	}
}
