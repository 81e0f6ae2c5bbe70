package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// viewQueues is a Queues that takes /q/x/p/... as producer keys and
// keeps the values of batch produces as given, views of the request, not
// copies; ProduceDetached reports detach, true or not.
type viewQueues struct {
	detach bool

	mu   sync.Mutex // guards kept
	kept [][]byte
}

var (
	_ Queues          = (*viewQueues)(nil)
	_ DetachingQueues = (*viewQueues)(nil)
)

func (q *viewQueues) Route(key []byte) Route {
	if strings.HasPrefix(string(key), "/q/x/p/") {
		return RouteProduce
	}
	return RouteKV
}

func (q *viewQueues) Produce(ctx context.Context, puts []*pb.PutRequest) error {
	_, err := q.ProduceDetached(ctx, puts)
	return err
}

func (q *viewQueues) Detaches() bool { return true }

func (q *viewQueues) ProduceDetached(_ context.Context, puts []*pb.PutRequest) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range puts {
		q.kept = append(q.kept, p.Value)
	}
	return q.detach, nil
}

func (q *viewQueues) Check(_, _ []byte) error { return nil }

func (q *viewQueues) Ack(context.Context, []byte) (bool, error) { return false, nil }

func (q *viewQueues) Consume([]byte, Deliveries) (func(), error) { return func() {}, nil }

// changed returns how many kept values differ from want, in order.
func (q *viewQueues) changed(want []string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for i, w := range want {
		if i >= len(q.kept) || string(q.kept[i]) != w {
			n++
		}
	}
	return n + max(len(want)-len(q.kept), 0)
}

// putBatches sends batches txns of 128 puts of 600-byte values, each
// value naming its batch and put, and returns the values in order.
func putBatches(t *testing.T, cli *clientv3.Client, batches int) []string {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	var all []string
	for b := range batches {
		ops := make([]clientv3.Op, 128)
		for i := range ops {
			v := fmt.Sprintf("%03d-%03d-%s", b, i, strings.Repeat(string(rune('a'+b%26)), 592))
			all = append(all, v)
			ops[i] = clientv3.OpPut(fmt.Sprintf("/q/x/p/%03d-%03d", b, i), v)
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
	}
	return all
}

// TestTxn_batchProduce_memoryKeptUnlessDetached: the memory a batch
// produce was decoded into is reused only when the queues say they are
// detached from it. A queue that keeps views and says so not finds
// every value as put after many more calls; one that keeps views but
// says it is detached (which dispatch never does) finds them
// overwritten by later calls, which shows the reuse happens.
func TestTxn_batchProduce_memoryKeptUnlessDetached(t *testing.T) {
	t.Run("kept", func(t *testing.T) {
		q := &viewQueues{}
		_, cli := startServer(t, func(c *Config) { c.Queues = q })
		want := putBatches(t, cli, 20)
		if n := q.changed(want); n != 0 {
			t.Fatalf("%d of %d kept values changed after later calls", n, len(want))
		}
	})
	t.Run("detached", func(t *testing.T) {
		q := &viewQueues{detach: true}
		_, cli := startServer(t, func(c *Config) { c.Queues = q })
		want := putBatches(t, cli, 20)
		if n := q.changed(want); n == 0 {
			t.Fatalf("no kept value changed: the memory of detached calls was not reused")
		}
	})
}

// TestTxn_batchProduce_sizeLimit: a batch produce decoded into an arena
// is held to MaxRequestBytes by the size counted as it was decoded: one
// over the limit (under gRPC's own, which allows more) is refused as
// etcd refuses it and reaches no queue; one under it goes through.
func TestTxn_batchProduce_sizeLimit(t *testing.T) {
	q := &viewQueues{detach: true}
	_, cli := startServer(t, func(c *Config) { c.Queues = q; c.MaxRequestBytes = 64 << 10 })
	ctx := testCtx(t, 20*time.Second)
	txn := func(n int) error {
		ops := make([]clientv3.Op, n)
		for i := range ops {
			ops[i] = clientv3.OpPut(fmt.Sprintf("/q/x/p/%03d", i), strings.Repeat("v", 600))
		}
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		return err
	}
	if err := txn(128); !errors.Is(err, rpctypes.ErrRequestTooLarge) { // ~80 KiB
		t.Fatalf("a txn of 128 puts of 600 bytes over a 64 KiB limit: got %v, want %v", err, rpctypes.ErrRequestTooLarge)
	}
	q.mu.Lock()
	kept := len(q.kept)
	q.mu.Unlock()
	if kept != 0 {
		t.Fatalf("a refused txn reached the queues: %d values kept", kept)
	}
	if err := txn(96); err != nil { // ~60 KiB
		t.Fatalf("a txn of 96 puts of 600 bytes under a 64 KiB limit: %v", err)
	}
}
