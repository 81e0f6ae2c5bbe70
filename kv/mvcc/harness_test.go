package mvcc

import (
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// newTestStateMachine returns a state machine over a fresh store with cfg,
// its clock fixed unless cfg sets one.
func newTestStateMachine(t testing.TB, cfg Config) (*StateMachine, *Store) {
	t.Helper()
	if cfg.Now == nil {
		now := time.Unix(1_700_000_000, 0)
		cfg.Now = func() time.Time { return now }
	}
	if cfg.RaftTerm == 0 {
		cfg.RaftTerm = 1
	}
	st := NewStore(cfg)
	return NewStateMachine(st), st
}

// apply applies req as a member alone does and fails the test on an error.
func apply(t *testing.T, sm *StateMachine, req *pb.InternalRaftRequest) Result {
	t.Helper()
	res := sm.ApplyLocal(req)
	if res.Err != nil {
		t.Fatalf("apply %v: %v", req, res.Err)
	}
	return res
}

// put applies a put of key=value.
func put(t *testing.T, sm *StateMachine, key, value string) int64 {
	t.Helper()
	return apply(t, sm, &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}}).Rev
}

// get reads key at rev (0 = current) and returns its value, "" when absent.
func get(t *testing.T, st *Store, key string, rev int64) (string, error) {
	t.Helper()
	resp, _, err := st.Range(&pb.RangeRequest{Key: []byte(key), Revision: rev})
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// testSink is a WatchSink with room for limit event responses.
type testSink struct {
	mu    sync.Mutex
	limit int
	resps []*pb.WatchResponse
}

func (s *testSink) PushEvents(resp *pb.WatchResponse) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.resps) >= s.limit {
		return false
	}
	s.resps = append(s.resps, resp)
	return true
}

func (s *testSink) PushControl(resp *pb.WatchResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resps = append(s.resps, resp)
}

// take removes and returns what the sink holds, making room again.
func (s *testSink) take() []*pb.WatchResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.resps
	s.resps = nil
	return out
}
