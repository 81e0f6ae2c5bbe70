package mvcc

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestWatcherGroup_routes: with synced watchers indexed by key, a write
// reaches the watchers of its keys and of every range holding them, once
// each however many of its changes they want, and no other; a watcher
// removed from the group gets nothing.
func TestWatcherGroup_routes(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	sinks := map[string]*testSink{}
	watch := func(name string, cr *pb.WatchCreateRequest) *Watcher {
		sinks[name] = &testSink{limit: 100}
		return st.Watch(1, cr, sinks[name])
	}
	watch("a", &pb.WatchCreateRequest{Key: []byte("a")})
	watch("a again", &pb.WatchCreateRequest{Key: []byte("a")})
	watch("b", &pb.WatchCreateRequest{Key: []byte("b")})
	watch("[a, c)", &pb.WatchCreateRequest{Key: []byte("a"), RangeEnd: []byte("c")})
	watch("from c", &pb.WatchCreateRequest{Key: []byte("c"), RangeEnd: []byte{0}})
	gone := watch("a, gone", &pb.WatchCreateRequest{Key: []byte("a")})
	st.Unwatch(gone)
	apply(t, sm, &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("a"), Value: []byte("1")}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("d"), Value: []byte("2")}}},
	}}})
	put(t, sm, "a", "3")
	want := map[string]string{
		"a":       "[PUT:a=1 ] [PUT:a=3 ]",
		"a again": "[PUT:a=1 ] [PUT:a=3 ]",
		"b":       "",
		"[a, c)":  "[PUT:a=1 ] [PUT:a=3 ]",
		"from c":  "[PUT:d=2 ]",
		"a, gone": "",
	}
	for name, sink := range sinks {
		got := ""
		for _, r := range sink.take() {
			if got != "" {
				got += " "
			}
			got += fmt.Sprintf("[%s]", eventsOf([]*pb.WatchResponse{r}))
		}
		if got != want[name] {
			t.Errorf("watcher %s: %s, want %s", name, got, want[name])
		}
	}
	if synced, _ := st.Watchers(); synced != 5 {
		t.Errorf("synced watchers: %d, want 5", synced)
	}
}

// BenchmarkNotify_watchersOfOtherKeys: a put with 100,000 watchers of
// other keys synced costs what it costs without them (5 ms a put when
// every write walked every watcher).
func BenchmarkNotify_watchersOfOtherKeys(b *testing.B) {
	sm, st := newTestStateMachine(b, Config{})
	for i := range 100_000 {
		st.Watch(int64(i), &pb.WatchCreateRequest{Key: fmt.Appendf(nil, "w%d", i)}, &testSink{limit: 1})
	}
	req := &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}}
	b.ResetTimer()
	for range b.N {
		if res := sm.ApplyLocal(req); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}
