package dispatch

import (
	"context"
	"fmt"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"chute/gossip/peer/peerpb"
)

// benchForwardRows are a txn's puts to a ClickHouse queue, as a
// forwarding member hands them to its dispatcher: 128 rows of about 100
// bytes.
func benchForwardRows() []incoming {
	rows := make([]incoming, 128)
	for i := range rows {
		rows[i] = incoming{id: MsgID{Origin: 9, N: uint64(i + 1)}, tail: fmt.Sprintf("k%07d", i),
			value: fmt.Appendf(nil, `{"id":%d,"ts":"2026-12-02 06:00:00","host":"host-%03d","msg":"a row of about one hundred bytes"}`, i, i%100)}
	}
	return rows
}

// BenchmarkForward_send measures what a forwarding member spends on a
// txn of 128 puts between Produce and the stream: the batch made of its
// messages (batchOf) and the frame encoded as kv's codec encodes it, the
// batch given back after, as the forward stream does.
func BenchmarkForward_send(b *testing.B) {
	rows := benchForwardRows()
	f := &forwarder{}
	frame := &peerpb.SendFrame{Batches: make([]*peerpb.SendBatch, 1)}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		batch, err := f.batchOf("ch:events", rows)
		if err != nil {
			b.Fatal(err)
		}
		batch.Head.Id, batch.Head.Puts = 1, true
		frame.Batches[0] = batch
		size, ok := frame.EncodedSize()
		if !ok {
			b.Fatal("refused")
		}
		buf = frame.AppendEncoded(slices.Grow(buf[:0], size))
		f.release(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// benchForwardManager returns a manager with a queue log that does not
// fsync, dispatching ch:events (one put claimed it), as a dispatcher
// receiving frames is.
func benchForwardManager(b *testing.B) *Manager {
	m := benchManagerWith(b, Config{MemberID: 1, MaxQueueBytes: 1 << 40, DataDir: b.TempDir(), NoSync: true})
	b.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	if err := m.Produce(context.Background(), []*pb.PutRequest{{Key: []byte("/q/ch:events/p/first"), Value: []byte(`{"id":0}`)}}); err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkForward_receive measures what the dispatcher spends on a frame
// of one txn of 128 puts, from its bytes to the queue: decoded, checked,
// appended to the queue log (without fsync, which is not per row) and
// enqueued. A drainer with no ClickHouse URL takes the rows.
func BenchmarkForward_receive(b *testing.B) {
	m := benchForwardManager(b)
	ctx := context.Background()
	rows := benchForwardRows()
	wire, err := proto.Marshal(&peerpb.ForwardFrame{Batches: []*peerpb.ForwardBatch{{Id: 1, Messages: toMessages("ch:events", rows), Puts: true}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := uint64(0)
	var frame peerpb.RecvFrame
	var fw frameMsgs // as the stream keeps one
	buf := make([]byte, len(wire))
	for b.Loop() {
		copy(buf, wire) // as the peer listener's codec does, into a buffer of its pool
		if err := frame.UnmarshalPooled(mem.SliceBuffer(buf)); err != nil {
			b.Fatal(err)
		}
		for _, q := range frame.Batches[0].Messages {
			n++
			q.N = n // new puts, as a forwarder sends them
		}
		m.persistFrame(ctx, &fw, frame.Batches)
		if fw.errs[0] != nil {
			b.Fatal(fw.errs[0])
		}
		if _, errs := m.acceptRun(&fw, 0, 1, "ch:events", arrivedForwarded, nil); errs != nil {
			b.Fatal(errs[0])
		}
		frame.Done(fw.detached(frame.Batches))
		fw.done()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// BenchmarkForward_receivePuts measures what the dispatcher spends on a
// frame of 32 unary puts, a batch each, as a busy forwarding member
// sends them: decoded, checked, appended to the queue log (without
// fsync) and enqueued.
func BenchmarkForward_receivePuts(b *testing.B) {
	m := benchForwardManager(b)
	ctx := context.Background()
	rows := benchForwardRows()[:32]
	sent := &peerpb.ForwardFrame{}
	for i := range rows {
		sent.Batches = append(sent.Batches, &peerpb.ForwardBatch{Id: uint64(i + 1), Messages: toMessages("ch:events", rows[i:i+1]), Puts: true})
	}
	wire, err := proto.Marshal(sent)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := uint64(0)
	var frame peerpb.RecvFrame
	var fw frameMsgs // as the stream keeps one
	buf := make([]byte, len(wire))
	for b.Loop() {
		copy(buf, wire) // as the peer listener's codec does, into a buffer of its pool
		if err := frame.UnmarshalPooled(mem.SliceBuffer(buf)); err != nil {
			b.Fatal(err)
		}
		for _, fb := range frame.Batches {
			n++
			fb.Messages[0].N = n
		}
		m.persistFrame(ctx, &fw, frame.Batches)
		for i := 0; i < len(frame.Batches); {
			j := i + 1
			for j < len(frame.Batches) && fw.joins(frame.Batches[j], j, "ch:events", arrivedForwarded, 9) {
				j++
			}
			if _, errs := m.acceptRun(&fw, i, j, "ch:events", arrivedForwarded, nil); errs != nil {
				b.Fatal(errs[0])
			}
			i = j
		}
		frame.Done(fw.detached(frame.Batches))
		fw.done()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/put")
}
