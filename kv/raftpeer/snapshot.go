package raftpeer

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"chute/gossip/peer/peerpb"
)

// snapshotTimeoutScale is the snapshot size each Timeout of an
// InstallSnapshot call pays for, as in raft's NetworkTransport.
const snapshotTimeoutScale = 256 << 10

// snapshotTimeout bounds an InstallSnapshot call of size bytes.
func (t *Transport) snapshotTimeout(size int64) time.Duration {
	return t.cfg.Timeout * time.Duration(max(1, size/snapshotTimeoutScale))
}

// sendSnapshot sends the encoded request, then data to its end in chunks
// of chunk bytes, and returns the answer. One buffer serves every chunk:
// Send has encoded a message when it returns.
func sendSnapshot(stream grpc.ClientStreamingClient[peerpb.SnapshotChunk, peerpb.RaftResponse], req []byte, data io.Reader, chunk int) (*peerpb.RaftResponse, error) {
	if err := stream.Send(&peerpb.SnapshotChunk{Request: req}); err != nil {
		return stream.CloseAndRecv() // io.EOF: the server ended the stream, and says why
	}
	buf := make([]byte, chunk)
	for {
		n, err := io.ReadFull(data, buf)
		if n > 0 {
			if err := stream.Send(&peerpb.SnapshotChunk{Data: buf[:n]}); err != nil {
				return stream.CloseAndRecv()
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return stream.CloseAndRecv()
		}
		if err != nil {
			_ = stream.CloseSend()
			return nil, fmt.Errorf("raftpeer: read snapshot: %w", err)
		}
	}
}

// snapshotReader is the rpc.Reader of a received InstallSnapshot: raft's
// goroutine reads what the serving goroutine receives. Each wait for a
// chunk is bounded, so a stalled sender cannot hold raft, and its first
// error is returned by every later Read.
type snapshotReader struct {
	// chunks carries the received data, each slice handed over to the
	// reader. The server closes it after the last chunk, having set end.
	chunks  chan []byte
	end     error // why the stream ended, nil when it ended as announced
	stop    <-chan struct{}
	timeout time.Duration
	// deadline ends the whole snapshot, as snapshotTimeout ends the
	// sender's call: a peer sending a byte now and then, each within
	// timeout, held raft's goroutine (which installs snapshots in its
	// main loop) for as long as it liked.
	deadline time.Time

	// Read's own, used by raft's goroutine only.
	buf []byte
	err error
}

// finish tells the reader the stream ended, early or in error when err is
// set. It is called once, by the serving goroutine.
func (r *snapshotReader) finish(err error) {
	r.end = err
	close(r.chunks)
}

// Read implements io.Reader for raft.
func (r *snapshotReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(r.buf) == 0 {
		wait, whole := r.timeout, false
		if left := time.Until(r.deadline); !r.deadline.IsZero() && left < wait {
			wait, whole = max(left, 0), true
		}
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case b, ok := <-r.chunks:
			switch {
			case !ok && r.end != nil:
				r.err = r.end
			case !ok:
				r.err = io.EOF
			default:
				r.buf = b
			}
		case <-timer.C:
			r.err = fmt.Errorf("%w: no snapshot chunk within %v", ErrStalled, r.timeout)
			if whole {
				r.err = fmt.Errorf("%w: the snapshot did not arrive whole in time", ErrStalled)
			}
		case <-r.stop:
			r.err = raft.ErrTransportShutdown
		}
		if r.err != nil {
			return 0, r.err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
