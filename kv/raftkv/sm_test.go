package raftkv

import (
	"encoding/json"
	"io"
	"slices"
	"sync"

	"chute/kv"
)

// testSM stands in for kv's state machine, which is tested in kv: these
// tests need one that records what raft drives it with.

// entry is one command a testSM applied.
type entry struct {
	Index, Term uint64
	Cmd         string
}

// testSM records the commands it applies, in order, and keeps leases
// as a map of id to TTL. It stands in for kv's state machine.
type testSM struct {
	mu      sync.Mutex // guards entries, applied, leases, renewed, refuse, gate and held
	entries []entry
	applied uint64
	leases  map[int64]int64
	renewed []int64
	refuse  int           // renewals still to fail with kv.ErrNotLeader, as when the term ends before the checkpoint
	gate    chan struct{} // when set, ApplyEntry waits for it to close
	held    int           // entries that waited at a gate
}

var _ StateMachine = (*testSM)(nil)

func newTestSM() *testSM { return &testSM{leases: make(map[int64]int64)} }

func (s *testSM) ApplyEntry(index, term uint64, cmds [][]byte) {
	s.mu.Lock()
	gate := s.gate
	if gate != nil {
		s.held++
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cmd := range cmds {
		s.entries = append(s.entries, entry{Index: index, Term: term, Cmd: string(cmd)})
	}
	s.applied = index
}

func (s *testSM) Skip(index, _ uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = index
}

func (s *testSM) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// smState is what a testSM snapshot holds.
type smState struct {
	Entries []entry
	Applied uint64
}

func (s *testSM) Snapshot() (func(io.Writer) error, error) {
	s.mu.Lock()
	st := smState{Entries: slices.Clone(s.entries), Applied: s.applied}
	s.mu.Unlock()
	return func(w io.Writer) error { return json.NewEncoder(w).Encode(st) }, nil
}

func (s *testSM) Restore(r io.Reader) error {
	var st smState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries, s.applied = st.Entries, st.Applied
	return nil
}

func (s *testSM) RenewLease(id int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ttl, ok := s.leases[id]
	if !ok {
		return 0, kv.ErrLeaseNotFound
	}
	if s.refuse > 0 {
		s.refuse--
		return 0, kv.ErrNotLeader
	}
	s.renewed = append(s.renewed, id)
	return ttl, nil
}

// cmds returns the commands applied so far, in order.
func (s *testSM) cmds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.Cmd
	}
	return out
}

// indexOf returns the index cmd was applied at, 0 if it was not.
func (s *testSM) indexOf(cmd string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		if e.Cmd == cmd {
			return e.Index
		}
	}
	return 0
}

// heldApplies returns how many entries waited at a gate.
func (s *testSM) heldApplies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// hold makes ApplyEntry wait until the returned function is called.
func (s *testSM) hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	})
}
