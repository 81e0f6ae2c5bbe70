package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
)

// peerClient is what a process that knows the cluster id can send on a
// member's peer listener: what a member sends.
type peerClient struct {
	conn *grpc.ClientConn
	ctx  context.Context // carries the cluster id and a member id
}

const mallory = 0xbad // the member id the test claims

func dialPeer(t *testing.T, ctx context.Context, m *member) *peerClient {
	t.Helper()
	conn, err := peer.Dial(m.link.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &peerClient{conn: conn, ctx: peer.OutgoingContext(ctx, gossip.ClusterID("test"), mallory)}
}

// forward sends one batch on a Forward stream and returns its answer, or
// the stream's error.
func (p *peerClient) forward(t *testing.T, b *peerpb.ForwardBatch) error {
	t.Helper()
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	stream, err := peerpb.NewQueuesClient(p.conn).Forward(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Id = 1
	if err := stream.Send(&peerpb.ForwardFrame{Batches: []*peerpb.ForwardBatch{b}}); err != nil {
		t.Fatal(err)
	}
	for {
		res, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, r := range res.Results {
			if r.Id == b.Id {
				if r.Code == 0 {
					return nil
				}
				return status.Error(codes.Code(r.Code), r.Message)
			}
		}
	}
}

func rows(queue string, n, size int, value string) []*peerpb.QueueMessage {
	out := make([]*peerpb.QueueMessage, n)
	for i := range out {
		v := value
		if v == "" {
			v = strings.Repeat("x", size)
		}
		out[i] = &peerpb.QueueMessage{Queue: queue, Tail: fmt.Sprintf("m%d", i), Value: []byte(v), Origin: mallory, N: uint64(i + 1)}
	}
	return out
}

// queueOn returns the status of a queue on m, ok false when m has none.
func queueOn(m *member, name string) (QueueStatus, bool) {
	for _, q := range m.mgr.Status().Queues {
		if q.Name == name {
			return q, true
		}
	}
	return QueueStatus{}, false
}

// TestCluster_peerInputBounded is the acceptance test of bounded peer
// input: a caller with only the cluster id sends, as a member, a Hold of
// 100,000 queue names, messages past a queue's byte cap, a ClickHouse row
// that is no JSON object and a message number of 2^64-1; a client puts a
// record at epoch 2^64-1. Each is refused with its code, and afterwards
// every acknowledged write reads back on every member and no queue went
// past its cap.
func TestCluster_peerInputBounded(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	members := []*member{a, b, c}
	connect(members...)
	ctx := testCtx(t, 60*time.Second)
	acked := make(map[string]string)
	put := func(i int, key, value string) {
		t.Helper()
		if _, err := members[i%3].cli.Put(ctx, key, value); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		acked[key] = value
	}
	for i := range 60 {
		put(i, fmt.Sprintf("/k/%03d", i), fmt.Sprintf("first-%d", i))
	}
	waitUntil(t, 10*time.Second, "the first 60 keys on every member", func() bool {
		for _, m := range members {
			for k, v := range acked {
				if string(m.kv.Get(k)) != v {
					return false
				}
			}
		}
		return true
	})

	const capBytes = 4096
	if _, err := b.cli.Put(ctx, SettingsKey("capped"), fmt.Sprintf(`{"max_bytes":%d}`, capBytes)); err != nil {
		t.Fatal(err)
	}
	// b claims both queues with a first put of its own.
	if _, err := b.cli.Put(ctx, "/q/capped/p/first", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.Put(ctx, "/q/ch:events/p/first", `{"a":1}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "b's records on every member", func() bool {
		for _, m := range members {
			for _, q := range []string{"capped", "ch:events"} {
				if rec, ok := ParseRecord(recordOn(m, q)); !ok || rec.Member != b.id {
					return false
				}
			}
		}
		return true
	})
	p := dialPeer(t, ctx, b)
	queuesBefore := len(b.mgr.Status().Queues)

	// (a) A Hold of 100,000 queue names.
	var many []*peerpb.QueueMessage
	for i := range 100_000 {
		many = append(many, &peerpb.QueueMessage{Queue: fmt.Sprintf("q%d", i), Tail: "t", Value: []byte("v"), Origin: mallory, N: uint64(i + 1)})
	}
	// Refused by the codec, counted before they are made.
	if _, err := peerpb.NewQueuesClient(p.conn).Hold(p.ctx, &peerpb.HoldRequest{Messages: many}); err == nil || !strings.Contains(err.Error(), peerpb.ErrTooMany.Error()) {
		t.Fatalf("(a) hold of 100,000 queues: got %v, want it refused for its count", err)
	}
	if got := len(b.mgr.Status().Queues); got != queuesBefore {
		t.Fatalf("(a) queues on b: got %d, want %d", got, queuesBefore)
	}

	// (b) Messages past the byte cap: forwarded, held, backed up; and a
	// client's put forwarded by another member.
	over := rows("capped", 5, 1024, "")
	if err := p.forward(t, &peerpb.ForwardBatch{Messages: over}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("(b) forward past the cap: got %v, want ResourceExhausted", err)
	}
	if _, err := peerpb.NewQueuesClient(p.conn).Hold(p.ctx, &peerpb.HoldRequest{Messages: over}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("(b) hold past the cap: got %v, want ResourceExhausted", err)
	}
	if err := p.forward(t, &peerpb.ForwardBatch{Kind: peerpb.ForwardKind_BACKUP, Queue: "capped", Messages: over}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("(b) backup past the cap: got %v, want ResourceExhausted", err)
	}
	if _, err := a.cli.Put(ctx, "/q/capped/p/big", strings.Repeat("x", capBytes)); !errors.Is(err, rpctypes.ErrTooManyRequests) {
		t.Fatalf("(b) a's client put past the cap: got %v, want %v", err, rpctypes.ErrTooManyRequests)
	}

	// (c) A forwarded ClickHouse row that is not a JSON object.
	if err := p.forward(t, &peerpb.ForwardBatch{Messages: rows("ch:events", 1, 0, `"just a string"`)}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("(c) ch: row not an object: got %v, want InvalidArgument", err)
	}

	// (d) Epochs of 2^64-1: a message number, a client's put of a record.
	evilRecord := fmt.Sprintf("%d;epoch=%d", b.id, uint64(math.MaxUint64))
	numbered := rows("capped", 1, 8, "")
	numbered[0].Seq = math.MaxUint64
	if err := p.forward(t, &peerpb.ForwardBatch{Messages: numbered}); status.Code(err) != codes.OutOfRange {
		t.Fatalf("(d) message number 2^64-1: got %v, want OutOfRange", err)
	}
	if _, err := a.cli.Put(ctx, "/q/capped", evilRecord); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("(d) client put of a record at epoch 2^64-1: got %v, want InvalidArgument", err)
	}

	// Writes after the attempts: 60 new keys, every third old one again.
	for i := range 60 {
		put(i, fmt.Sprintf("/k/%03d", 60+i), fmt.Sprintf("second-%d", i))
	}
	for i := 0; i < 60; i += 3 {
		put(i+1, fmt.Sprintf("/k/%03d", i), fmt.Sprintf("overwritten-%d", i))
	}
	waitUntil(t, 15*time.Second, "every acknowledged value on every member", func() bool {
		for _, m := range members {
			for k, v := range acked {
				if string(m.kv.Get(k)) != v {
					return false
				}
			}
		}
		return true
	})
	for _, m := range members {
		for k, v := range acked {
			r, err := m.cli.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != v {
				t.Fatalf("%s on %s: got %v, want %q", k, m.name, r.Kvs, v)
			}
		}
		if rec, ok := ParseRecord(recordOn(m, "capped")); !ok || rec.Member != b.id || rec.Epoch > 1 {
			t.Fatalf("record of capped on %s: got %q", m.name, recordOn(m, "capped"))
		}
		if q, ok := queueOn(m, "capped"); ok && q.Bytes > capBytes {
			t.Fatalf("capped on %s: %d bytes, over the cap of %d", m.name, q.Bytes, capBytes)
		}
	}
	if q, _ := queueOn(b, "capped"); q.Rows != 1 {
		t.Fatalf("capped on b: got %d rows, want the first put only", q.Rows)
	}
}

// rawCodec sends a message already in its wire form, as it is.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }

// TestCluster_peerHoldCountedBeforeDecode: a member's Hold of 2^20 empty
// messages (2 MiB on the wire, within the link's 64 MiB) is refused
// before its messages are made, as a ForwardFrame's are
// (peerpb.MaxBatchMessages): decoded first, each 2 bytes made a
// QueueMessage of about 200, and a few such calls took gigabytes.
func TestCluster_peerHoldCountedBeforeDecode(t *testing.T) {
	cl := newCluster(t)
	b := cl.start("b", nil)
	ctx := testCtx(t, 30*time.Second)
	p := dialPeer(t, ctx, b)
	var wire []byte
	for range 1 << 20 {
		wire = protowire.AppendBytes(protowire.AppendTag(wire, 1, protowire.BytesType), nil)
	}
	_ = p.conn.Invoke(p.ctx, "/chute.peer.v1.Queues/Ping", &peerpb.PingRequest{}, &peerpb.PingResponse{}) // connect first
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := p.conn.Invoke(p.ctx, "/chute.peer.v1.Queues/Hold", wire, &peerpb.HoldResponse{}, grpc.ForceCodec(rawCodec{}))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), peerpb.ErrTooMany.Error()) {
		t.Fatalf("a Hold of 2^20 messages: %v, want it refused for its count", err)
	}
	if made := after.TotalAlloc - before.TotalAlloc; made > 96<<20 { // about 200 decoded first
		t.Errorf("refusing a Hold of %d bytes made %d MB", len(wire), made>>20)
	}
}
