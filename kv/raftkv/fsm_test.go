package raftkv

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// TestFSM_Apply_commandsOnly checks only command entries reach the
// state machine, with their index and term.
func TestFSM_Apply_commandsOnly(t *testing.T) {
	sm := newTestSM()
	f := NewFSM(sm)
	for _, l := range []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("cfg")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("a")},
		{Index: 3, Term: 2, Type: raft.LogNoop},
		{Index: 4, Term: 2, Type: raft.LogBarrier},
		{Index: 5, Term: 2, Type: raft.LogCommand, Data: []byte("b")},
	} {
		if got := f.Apply(l); got != nil {
			t.Fatalf("Apply(%d) = %v, want nil", l.Index, got)
		}
	}
	want := []entry{{Index: 2, Term: 1, Cmd: "a"}, {Index: 5, Term: 2, Cmd: "b"}}
	if !slices.Equal(sm.entries, want) || sm.Applied() != 5 {
		t.Fatalf("applied %v up to %d, want %v up to 5", sm.entries, sm.Applied(), want)
	}
}

// sink is a raft.SnapshotSink in memory that records how it ended.
type sink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *sink) ID() string                  { return "test" }
func (s *sink) Close() error                { s.closed = true; return nil }
func (s *sink) Cancel() error               { s.cancelled = true; return nil }
func (s *sink) Write(p []byte) (int, error) { return s.Buffer.Write(p) }

// failingSM is a testSM whose snapshots fail to write.
type failingSM struct{ *testSM }

var errWrite = errors.New("write failed")

func (failingSM) Snapshot() (func(io.Writer) error, error) {
	return func(io.Writer) error { return errWrite }, nil
}

// TestFSM_Snapshot_persistCloses checks a written snapshot closes the
// sink and restores the state, and a failed write cancels it.
func TestFSM_Snapshot_persistCloses(t *testing.T) {
	sm := newTestSM()
	f := NewFSM(sm)
	f.Apply(&raft.Log{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte("a")})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Index: 4, Term: 1, Type: raft.LogCommand, Data: []byte("after")})
	var s sink
	if err := snap.Persist(&s); err != nil || !s.closed || s.cancelled {
		t.Fatalf("Persist: %v, closed %v, cancelled %v; want nil, true, false", err, s.closed, s.cancelled)
	}
	snap.Release()

	other := newTestSM()
	rc := &closeRecorder{Reader: bytes.NewReader(s.Bytes())}
	if err := NewFSM(other).Restore(rc); err != nil || !rc.closed {
		t.Fatalf("Restore: %v, closed %v; want nil, true", err, rc.closed)
	}
	if got := other.cmds(); !slices.Equal(got, []string{"a"}) || other.Applied() != 3 {
		t.Fatalf("restored %q up to %d, want [a] up to 3, as captured", got, other.Applied())
	}

	snap, err = NewFSM(failingSM{newTestSM()}).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	s = sink{}
	if err := snap.Persist(&s); !errors.Is(err, errWrite) || s.closed || !s.cancelled {
		t.Fatalf("Persist of a failing write: %v, closed %v, cancelled %v; want %v, false, true", err, s.closed, s.cancelled, errWrite)
	}
}

// closeRecorder is a reader that records Close.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (r *closeRecorder) Close() error { r.closed = true; return nil }

// TestFSM_Restore_closesOnError checks a snapshot that does not restore
// is closed all the same.
func TestFSM_Restore_closesOnError(t *testing.T) {
	rc := &closeRecorder{Reader: strings.NewReader("not json")}
	if err := NewFSM(newTestSM()).Restore(rc); err == nil || !rc.closed {
		t.Fatalf("Restore of garbage: %v, closed %v; want an error, true", err, rc.closed)
	}
}
