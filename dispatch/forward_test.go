package dispatch

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"chute/gossip/peer/peerpb"
)

// fakeForwardStream is the client side of a Forward stream whose frames the
// test reads (the ids of their batches) and whose answers it sends.
type fakeForwardStream struct {
	grpc.ClientStream // not used: only SendMsg, Recv and CloseSend are called
	frames            chan []uint64
	answers           chan *peerpb.ForwardResults
	ctx               context.Context
}

func (s *fakeForwardStream) Send(*peerpb.ForwardFrame) error {
	panic("a forwarder sends SendFrames, with SendMsg")
}

// SendMsg takes the frame as kv's codec would: the batches are the
// forwarder's again once it returns.
func (s *fakeForwardStream) SendMsg(m any) error {
	var ids []uint64
	for _, b := range m.(*peerpb.SendFrame).Batches {
		ids = append(ids, b.Head.Id)
	}
	s.frames <- ids
	return nil
}

func (s *fakeForwardStream) Recv() (*peerpb.ForwardResults, error) {
	select {
	case r := <-s.answers:
		return r, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *fakeForwardStream) CloseSend() error { return nil }

// TestForwarder_pump_windowOfOneFrame checks that a forwarder keeps at
// most one frame the dispatcher has not applied, and that the batches
// that pile up meanwhile go in one frame once it is applied.
func TestForwarder_pump_windowOfOneFrame(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{clock: clockwork.NewFakeClock()}
	f := &forwarder{m: m, ctx: ctx, cancel: cancel, sendC: make(chan *peerpb.SendBatch, 64), pending: make(map[uint64]*call)}
	stream := &fakeForwardStream{frames: make(chan []uint64, 16), answers: make(chan *peerpb.ForwardResults, 16), ctx: ctx}
	batch := func(id uint64) *peerpb.SendBatch {
		b := &peerpb.SendBatch{}
		b.Head.Id = id
		return b
	}
	done := make(chan error, 1)
	go func() { done <- f.pump(stream, batch(1)) }()
	t.Cleanup(func() {
		cancel()
		<-done
		m.wg.Wait()
	})

	frame := func(what string) []uint64 {
		t.Helper()
		select {
		case ids := <-stream.frames:
			return ids
		case <-time.After(5 * time.Second):
			t.Fatalf("no frame: %s", what)
			return nil
		}
	}

	if got := frame("the first batch"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("first frame: batches %v, want [1]", got)
	}
	for id := uint64(2); id <= 10; id++ {
		f.sendC <- batch(id)
	}
	select {
	case ids := <-stream.frames:
		t.Fatalf("a second frame %v went with one unapplied", ids)
	case <-time.After(100 * time.Millisecond):
	}
	stream.answers <- &peerpb.ForwardResults{Applied: 1}
	got := frame("the batches that piled up, once the frame was applied")
	if len(got) != 9 || got[0] != 2 || got[8] != 10 {
		t.Fatalf("second frame: batches %v, want 2..10 in one frame", got)
	}
}

// TestForwarder_pump_seqsPerFrame: batches naming numbers (releases)
// that pile up go in frames of at most peerpb.MaxFrameSeqs numbers, which
// the peer codec refuses a frame past, breaking the stream for ever.
func TestForwarder_pump_seqsPerFrame(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{clock: clockwork.NewFakeClock()}
	f := &forwarder{m: m, ctx: ctx, cancel: cancel, sendC: make(chan *peerpb.SendBatch, 64), pending: make(map[uint64]*call)}
	stream := &fakeForwardStream{frames: make(chan []uint64, 16), answers: make(chan *peerpb.ForwardResults, 16), ctx: ctx}
	batch := func(id uint64, seqs int) *peerpb.SendBatch {
		b := &peerpb.SendBatch{}
		b.Head.Id, b.Head.Seqs = id, make([]uint64, seqs)
		return b
	}
	done := make(chan error, 1)
	go func() { done <- f.pump(stream, batch(1, 0)) }()
	t.Cleanup(func() {
		cancel()
		<-done
		m.wg.Wait()
	})
	frame := func() []uint64 {
		t.Helper()
		select {
		case ids := <-stream.frames:
			return ids
		case <-time.After(5 * time.Second):
			t.Fatal("no frame")
			return nil
		}
	}
	frame() // the first, unapplied: the rest pile up behind it
	half := peerpb.MaxFrameSeqs / 2
	for id, n := range []int{half, half, 1, 3} {
		f.sendC <- batch(uint64(id+2), n)
	}
	var frames [][]uint64
	for applied := uint64(1); len(frames) < 2; applied++ {
		stream.answers <- &peerpb.ForwardResults{Applied: applied}
		frames = append(frames, frame())
	}
	if want := [][]uint64{{2, 3}, {4, 5}}; !slices.EqualFunc(frames, want, slices.Equal) {
		t.Fatalf("frames %v, want %v: at most %d numbers a frame", frames, want, peerpb.MaxFrameSeqs)
	}
}

// TestForwarder_wait_deadline checks that a call nobody answers ends
// Unavailable once its deadline passes on the manager's clock, by the
// forwarder's sweep rather than a timer of its own, not before, and that
// an answered call is not touched.
func TestForwarder_wait_deadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clk := clockwork.NewFakeClock()
	m := &Manager{clock: clk}
	f := &forwarder{m: m, member: 0xbeef, ctx: ctx, cancel: cancel, sendC: make(chan *peerpb.SendBatch, 4), pending: make(map[uint64]*call)}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f.expireLoop()
	}()
	t.Cleanup(func() {
		cancel()
		m.wg.Wait()
	})
	if err := clk.BlockUntilContext(testCtx(t, 10*time.Second), 1); err != nil {
		t.Fatalf("waiting for the sweep's ticker: %v", err)
	}

	lost, err := f.start(ctx, &peerpb.SendBatch{})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	answered, err := f.start(ctx, &peerpb.SendBatch{})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	f.complete(&peerpb.ForwardResult{Id: answered.id})
	if err := answered.wait(ctx, time.Millisecond); err != nil {
		t.Fatalf("answered call: %v, want nil", err)
	}

	start := clk.Now()
	ended := make(chan error, 1)
	go func() { ended <- lost.wait(ctx, 150*time.Millisecond) }()
	deadline := func() int64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return lost.deadline
	}
	waitFor(t, "the call to take its deadline", func() bool { return deadline() != 0 })
	if got, want := deadline(), start.Add(150*time.Millisecond).UnixNano(); got != want {
		t.Fatalf("deadline %d, want %d: 150ms after the call began", got, want)
	}
	f.expire(start.Add(150 * time.Millisecond)) // not past it yet
	if deadline() == 0 {
		t.Fatal("the sweep at the deadline answered the call")
	}
	clk.Advance(expireEvery)
	clk.Advance(expireEvery) // the sweep after 200ms
	select {
	case err = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("an unanswered call 200ms past its 150ms deadline still waits")
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no answer from 000000000000beef") {
		t.Fatalf("unanswered call: %v, want Unavailable: no answer from 000000000000beef", err)
	}
	f.mu.Lock()
	left := len(f.pending)
	f.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d calls still pending, want 0", left)
	}
}

// waitingOn returns how many calls on the forward stream to member wait
// for their answer.
func (m *Manager) waitingOn(member uint64) int {
	m.mu.Lock()
	f := m.forwarders[member]
	m.mu.Unlock()
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// TestForwarder_batchOf: a batch holds its messages' wire form, the
// values copied (a value of the queue log's mapping may go once batchOf
// returns); a queue name or key that is not UTF-8 is refused
// InvalidArgument; a batch given back is used again, emptied, without a
// new buffer.
func TestForwarder_batchOf(t *testing.T) {
	f := &forwarder{}
	msgs := []incoming{
		{id: MsgID{Origin: 7, N: 1}, tail: "k1", value: []byte(`{"id":1}`)},
		{id: MsgID{Origin: 7, N: 2}, tail: "k2", value: []byte(`{"id":2}`), seq: 5, consumer: "c", attempts: 2},
	}
	b, err := f.batchOf("ch:events", msgs)
	if err != nil {
		t.Fatal(err)
	}
	b.Head.Id = 3
	want, err := proto.Marshal(&peerpb.ForwardFrame{Batches: []*peerpb.ForwardBatch{{Id: 3, Messages: toMessages("ch:events", msgs)}}})
	if err != nil {
		t.Fatal(err)
	}
	copy(msgs[0].value, `{"id":9}`) // the put's bytes change after the batch was made
	frame := &peerpb.SendFrame{Batches: []*peerpb.SendBatch{b}}
	if got := frame.AppendEncoded(nil); !bytes.Equal(got, want) {
		t.Fatalf("frame %x, want %x (the messages as they were when the batch was made)", got, want)
	}

	for name, tt := range map[string]struct {
		queue string
		tail  string
		want  string
	}{
		"queue": {"ch:\xff", "k", `queue name "ch:\xff" is not UTF-8`},
		"key":   {"ch:events", "k\xff", `key "k\xff" is not UTF-8`},
	} {
		_, err := f.batchOf(tt.queue, []incoming{{tail: tt.tail, value: []byte(`{}`)}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s not UTF-8: %v, want InvalidArgument: %s", name, err, tt.want)
		}
	}

	f.release(b)
	again, err := f.batchOf("ch:events", msgs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if again.Len() != 1 || again.Head.Id != 0 {
		t.Errorf("a batch used again holds %d messages and id %d, want 1 and 0", again.Len(), again.Head.Id)
	}
	f.release(again)
	// Under the race detector sync.Pool drops a quarter of what it is
	// given: a new batch then (two allocations) a quarter of the time.
	if allocs := testing.AllocsPerRun(100, func() {
		b, err := f.batchOf("ch:events", msgs)
		if err != nil {
			t.Fatal(err)
		}
		f.release(b)
	}); allocs >= 1 {
		t.Errorf("batchOf and release: %.1f allocations a batch, want none (the batch used again)", allocs)
	}
}

// TestForwarder_pump_appliedPastSent: a dispatcher answering that it
// applied more frames than were sent ends the stream (to be opened
// again) instead of wrapping the window's count, which shut the window
// for as long as the stream lived: every put after it waited out its
// timeout.
func TestForwarder_pump_appliedPastSent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{clock: clockwork.NewFakeClock()}
	f := &forwarder{m: m, ctx: ctx, cancel: cancel, sendC: make(chan *peerpb.SendBatch, 64), pending: make(map[uint64]*call)}
	stream := &fakeForwardStream{frames: make(chan []uint64, 16), answers: make(chan *peerpb.ForwardResults, 16), ctx: ctx}
	done := make(chan error, 1)
	go func() { done <- f.pump(stream, &peerpb.SendBatch{}) }()
	t.Cleanup(func() {
		cancel()
		m.wg.Wait()
	})
	<-stream.frames
	stream.answers <- &peerpb.ForwardResults{Applied: 2}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "2 frames, 1 sent") {
			t.Fatalf("pump ended with %v, want the count named", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream went on after the dispatcher answered for frames never sent")
	}
}
