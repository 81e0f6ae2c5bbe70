package dispatch

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"chute/gossip/peerpb"
)

// fakeForwardStream is the client side of a Forward stream whose frames the
// test reads and whose answers it sends.
type fakeForwardStream struct {
	grpc.ClientStream // not used: only Send, Recv and CloseSend are called
	frames            chan *peerpb.ForwardFrame
	answers           chan *peerpb.ForwardResults
	ctx               context.Context
}

func (s *fakeForwardStream) Send(f *peerpb.ForwardFrame) error {
	s.frames <- f
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

// TestForwarder_pump_windowOfTwoFrames checks that a forwarder keeps at
// most two frames the dispatcher has not applied, and that the batches
// that pile up meanwhile go in one frame once a frame is applied.
func TestForwarder_pump_windowOfTwoFrames(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{}
	f := &forwarder{m: m, ctx: ctx, cancel: cancel, sendC: make(chan *peerpb.ForwardBatch, 64), pending: make(map[uint64]chan *peerpb.ForwardResult)}
	stream := &fakeForwardStream{frames: make(chan *peerpb.ForwardFrame, 16), answers: make(chan *peerpb.ForwardResults, 16), ctx: ctx}
	done := make(chan error, 1)
	go func() { done <- f.pump(stream, &peerpb.ForwardBatch{Id: 1}) }()
	t.Cleanup(func() {
		cancel()
		<-done
		m.wg.Wait()
	})

	frame := func(what string) *peerpb.ForwardFrame {
		t.Helper()
		select {
		case fr := <-stream.frames:
			return fr
		case <-time.After(5 * time.Second):
			t.Fatalf("no frame: %s", what)
			return nil
		}
	}
	ids := func(fr *peerpb.ForwardFrame) []uint64 {
		var out []uint64
		for _, b := range fr.Batches {
			out = append(out, b.Id)
		}
		return out
	}

	if got := ids(frame("the first batch")); len(got) != 1 || got[0] != 1 {
		t.Fatalf("first frame: batches %v, want [1]", got)
	}
	f.sendC <- &peerpb.ForwardBatch{Id: 2}
	if got := ids(frame("a second frame, inside the window")); len(got) != 1 || got[0] != 2 {
		t.Fatalf("second frame: batches %v, want [2]", got)
	}
	for id := uint64(3); id <= 10; id++ {
		f.sendC <- &peerpb.ForwardBatch{Id: id}
	}
	select {
	case fr := <-stream.frames:
		t.Fatalf("a third frame %v went with two unapplied", ids(fr))
	case <-time.After(100 * time.Millisecond):
	}
	stream.answers <- &peerpb.ForwardResults{Applied: 1}
	got := ids(frame("the batches that piled up, once a frame was applied"))
	if len(got) != 8 || got[0] != 3 || got[7] != 10 {
		t.Fatalf("third frame: batches %v, want 3..10 in one frame", got)
	}
}
