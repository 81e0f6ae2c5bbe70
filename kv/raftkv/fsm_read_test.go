package raftkv

import (
	"testing"

	"github.com/hashicorp/raft"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"chute/kv/mvcc"
)

// wholeEntrySM is kv's own state machine, checked after every call the
// FSM makes into it: once Applied reports index, the store holds every
// key the entry at index puts. A read that waited for the index (kv's
// WaitApplied) must not find the entry half applied.
type wholeEntrySM struct {
	*mvcc.StateMachine
	t     *testing.T
	store *mvcc.Store
	index uint64
	keys  []string
}

func (s *wholeEntrySM) ApplyEntry(index, term uint64, cmds [][]byte) {
	s.StateMachine.ApplyEntry(index, term, cmds)
	s.check("ApplyEntry")
}

func (s *wholeEntrySM) Skip(index, term uint64) {
	s.StateMachine.Skip(index, term)
	s.check("Skip")
}

func (s *wholeEntrySM) check(call string) {
	s.t.Helper()
	if s.Applied() < s.index {
		return
	}
	for _, k := range s.keys {
		resp, _, err := s.store.Range(&pb.RangeRequest{Key: []byte(k)})
		if err != nil || len(resp.Kvs) != 1 {
			s.t.Errorf("after %s: Applied %d, got key %q missing (%v), want every key of the entry at %d", call, s.Applied(), k, err, s.index)
		}
	}
}

// putCommand is kv's command putting key=value.
func putCommand(t *testing.T, id uint64, key, value string) []byte {
	t.Helper()
	b, err := proto.Marshal(&pb.InternalRaftRequest{ID: id, Put: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFSM_Apply_packedEntryWhole applies a packed entry of three puts to
// kv's state machine and checks Applied reaches the entry's index only
// once all three are in the store: a follower's read that waits for a
// read index equal to a packed entry's would otherwise run between its
// commands and miss a put the leader acknowledged already.
func TestFSM_Apply_packedEntryWhole(t *testing.T) {
	store := mvcc.NewStore(mvcc.Config{RaftTerm: 1})
	store.DisableAutoCompaction()
	sm := &wholeEntrySM{StateMachine: mvcc.NewStateMachine(store), t: t, store: store, index: 7, keys: []string{"a", "b", "c"}}
	f := NewFSM(sm)
	f.Apply(&raft.Log{Index: 6, Term: 1, Type: raft.LogConfiguration})
	f.Apply(&raft.Log{Index: 7, Term: 1, Type: raft.LogCommand, Data: packEntry([][]byte{
		putCommand(t, 1, "a", "1"), putCommand(t, 2, "b", "2"), putCommand(t, 3, "c", "3"),
	})})
	if got := sm.Applied(); got != 7 {
		t.Fatalf("Applied after the entry: got %d, want 7", got)
	}
	sm.check("the entry")
}
