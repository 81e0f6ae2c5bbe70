package dispatch

import (
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
)

// forwardedPut is a produce batch of one new put made by member 9.
func forwardedPut(queue, tail string, n uint64, value string) *peerpb.ForwardBatch {
	return &peerpb.ForwardBatch{Kind: peerpb.ForwardKind_PRODUCE, Id: n, Puts: true,
		Messages: []*peerpb.QueueMessage{{Queue: queue, Tail: tail, Value: []byte(value), Origin: 9, N: n}}}
}

// acceptFrame applies batches as Forward does, run by run, and returns
// each batch's error.
func acceptFrame(t *testing.T, m *Manager, batches []*peerpb.ForwardBatch) ([]error, [][2]int) {
	t.Helper()
	fw := m.persistFrame(testCtx(t, 10*time.Second), new(frameMsgs), batches)
	out := make([]error, len(batches))
	var runs [][2]int
	for i := 0; i < len(batches); {
		if fw.errs[i] != nil {
			out[i] = fw.errs[i]
			i++
			continue
		}
		name, how := batches[i].Messages[0].Queue, arrivalOf(batches[i], 9)
		j := i + 1
		for j < len(batches) && fw.joins(batches[j], j, name, how, 9) {
			j++
		}
		runs = append(runs, [2]int{i, j})
		if _, errs := m.acceptRun(fw, i, j, name, how, nil); errs != nil {
			copy(out[i:j], errs)
		}
		i = j
	}
	return out, runs
}

// TestManager_acceptRun_runsOfOneQueue: the batches of a frame that
// follow each other on one queue are enqueued as one run, in frame
// order; a batch of another queue or one that failed its checks ends
// the run.
func TestManager_acceptRun_runsOfOneQueue(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DataDir = t.TempDir() })
	ctx := testCtx(t, 10*time.Second)
	for _, q := range []string{"jobs", "other"} {
		if err := n.mgr.Produce(ctx, []*pb.PutRequest{{Key: []byte("/q/" + q + "/p/first"), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	batches := []*peerpb.ForwardBatch{
		forwardedPut("jobs", "a", 1, "v"),
		forwardedPut("jobs", "b", 2, "v"),
		forwardedPut("other", "c", 3, "v"),
		forwardedPut("jobs", "d", 4, "v"),
		forwardedPut("jobs", "e/f", 5, "v"), // not one segment: refused
		forwardedPut("jobs", "g", 6, "v"),
	}
	errs, runs := acceptFrame(t, n.mgr, batches)
	for i, err := range errs {
		if want := i == 4; (err != nil) != want {
			t.Errorf("batch %d: got error %v, want one: %v", i, err, want)
		}
	}
	want := [][2]int{{0, 2}, {2, 3}, {3, 4}, {5, 6}}
	if len(runs) != len(want) {
		t.Fatalf("got runs %v, want %v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Fatalf("got runs %v, want %v", runs, want)
		}
	}
	if got := n.depth("jobs"); got != 5 {
		t.Errorf("got %d rows in jobs, want 5", got)
	}
	if got := n.depth("other"); got != 2 {
		t.Errorf("got %d rows in other, want 2", got)
	}
	q := n.mgr.lookup("jobs")
	q.mu.Lock()
	var tails []string
	for _, m := range q.msgs.all() {
		tails = append(tails, m.tail)
	}
	q.mu.Unlock()
	if got, want := strings.Join(tails, ","), "first,a,b,d,g"; got != want {
		t.Errorf("got jobs %s, want %s", got, want)
	}
	if got := liveRecords(n.mgr); got != 7 {
		t.Errorf("got %d live records, want 7", got)
	}
}

// TestManager_acceptRun_overCapPerBatch: a run that does not fit under
// the queue's byte cap is tried batch by batch, so the batches that fit
// are enqueued as they would have been alone and only the others are
// refused ResourceExhausted and released from the log. The refusal is not
// counted here: the member the put came to counts it once it gives up
// (produceOne), having asked again while it waited for room.
func TestManager_acceptRun_overCapPerBatch(t *testing.T) {
	// "first" + "v" is 6 bytes; each forwarded put below 10 (tail 1,
	// value 9): two of them fit under 30, not three.
	n := startNode(t, func(c *Config) { c.DataDir = t.TempDir(); c.MaxQueueBytes = 30 })
	ctx := testCtx(t, 10*time.Second)
	if err := n.mgr.Produce(ctx, []*pb.PutRequest{{Key: []byte("/q/jobs/p/first"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	batches := []*peerpb.ForwardBatch{
		forwardedPut("jobs", "a", 1, "123456789"),
		forwardedPut("jobs", "b", 2, "123456789"),
		forwardedPut("jobs", "c", 3, "123456789"),
	}
	errs, runs := acceptFrame(t, n.mgr, batches)
	if len(runs) != 1 {
		t.Fatalf("got runs %v, want one", runs)
	}
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("got errors %v, want none for the first two batches", errs)
	}
	if got := status.Code(errs[2]); got != codes.ResourceExhausted {
		t.Fatalf("third batch: got %v, want ResourceExhausted", errs[2])
	}
	if got := n.depth("jobs"); got != 3 {
		t.Errorf("got %d rows, want 3", got)
	}
	q := n.mgr.lookup("jobs")
	q.mu.Lock()
	refused := q.stats.Refused
	q.mu.Unlock()
	if refused != 0 {
		t.Errorf("got %d refusals counted by the dispatcher, want 0", refused)
	}
	if got := liveRecords(n.mgr); got != 3 {
		t.Errorf("got %d live records, want 3", got)
	}
}

// TestFrameMsgs_detached: a frame of produce batches whose messages went
// to the queue log is detached, and its bytes overwritten (as the next
// frame decoded into them does) leave the queue's values as they were; a
// frame with a backup batch, or received without a data dir (the values
// stay the frame's), is not.
func TestFrameMsgs_detached(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dir    bool
		backup bool
		want   bool
	}{
		{"produce, in the log", true, false, true},
		{"no data dir", false, false, false},
		{"with a backup batch", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, func(c *Config) {
				if tc.dir {
					c.DataDir = t.TempDir()
				}
			})
			ctx := testCtx(t, 10*time.Second)
			if err := n.mgr.Produce(ctx, []*pb.PutRequest{{Key: []byte("/q/jobs/p/first"), Value: []byte("v0")}}); err != nil {
				t.Fatal(err)
			}
			batches := []*peerpb.ForwardBatch{forwardedPut("jobs", "a", 1, "v1"), forwardedPut("jobs", "b", 2, "v2")}
			if tc.backup {
				batches = append(batches, &peerpb.ForwardBatch{Id: 3, Kind: peerpb.ForwardKind_BACKUP, Queue: "jobs", Boot: "b1",
					Messages: []*peerpb.QueueMessage{{Queue: "jobs", Tail: "x", Value: []byte("v3"), Origin: 9, N: 3, Seq: 1}}})
			}
			fw := n.mgr.persistFrame(ctx, new(frameMsgs), batches)
			for i := range 2 {
				if fw.errs[i] != nil {
					t.Fatalf("batch %d: %v", i, fw.errs[i])
				}
			}
			if _, errs := n.mgr.acceptRun(fw, 0, 2, "jobs", arrivedForwarded, nil); errs != nil {
				t.Fatalf("acceptRun: %v", errs)
			}
			if got := fw.detached(batches); got != tc.want {
				t.Fatalf("detached: got %v, want %v", got, tc.want)
			}
			if !tc.want {
				return
			}
			for _, b := range batches {
				clear(b.Messages[0].Value)
			}
			q := n.mgr.lookup("jobs")
			q.mu.Lock()
			var values []string
			for _, m := range q.msgs.all() {
				values = append(values, string(m.value))
			}
			q.mu.Unlock()
			if got, want := strings.Join(values, ","), "v0,v1,v2"; got != want {
				t.Errorf("the queue's values after the frame's bytes were overwritten: got %q, want %q", got, want)
			}
		})
	}
}

// TestFrameMsgs_reused: a Forward stream's frameMsgs takes frame after
// frame in the same arrays. The next frame's messages are its own (the
// queue holds every frame's values as sent), done lets go of what a
// frame's messages referred to, and the room of a frame of more than
// maxKeptFrameMsgs messages is not kept.
func TestFrameMsgs_reused(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DataDir = t.TempDir() })
	ctx := testCtx(t, 10*time.Second)
	if err := n.mgr.Produce(ctx, []*pb.PutRequest{{Key: []byte("/q/jobs/p/first"), Value: []byte("v0")}}); err != nil {
		t.Fatal(err)
	}
	var fw frameMsgs
	apply := func(batches []*peerpb.ForwardBatch) {
		t.Helper()
		n.mgr.persistFrame(ctx, &fw, batches)
		for i, err := range fw.errs {
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		if _, errs := n.mgr.acceptRun(&fw, 0, len(batches), "jobs", arrivedForwarded, nil); errs != nil {
			t.Fatalf("acceptRun: %v", errs)
		}
	}
	apply([]*peerpb.ForwardBatch{forwardedPut("jobs", "a", 1, "v1"), forwardedPut("jobs", "b", 2, "v2")})
	array := &fw.msgs[:1][0]
	fw.done()
	if kept := fw.msgs[:2]; len(fw.msgs) != 0 || kept[0].value != nil || kept[1].region != nil {
		t.Fatalf("after done: %d messages, the first frame's %+v still referred to", len(fw.msgs), kept)
	}
	apply([]*peerpb.ForwardBatch{forwardedPut("jobs", "c", 3, "v3")})
	if &fw.msgs[0] != array {
		t.Errorf("the second frame's messages are in a new array, want the first's")
	}
	fw.done()

	big := make([]*peerpb.ForwardBatch, 0, maxKeptFrameMsgs/peerCallMessages+1)
	for id := uint64(4); len(big) < cap(big); id++ {
		b := &peerpb.ForwardBatch{Kind: peerpb.ForwardKind_PRODUCE, Id: id, Puts: true}
		for range peerCallMessages {
			b.Messages = append(b.Messages, &peerpb.QueueMessage{Queue: "jobs", Tail: "k", Value: []byte("v"), Origin: 9, N: 1000 + uint64(len(big))*peerCallMessages + uint64(len(b.Messages))})
		}
		big = append(big, b)
	}
	apply(big)
	fw.done()
	if cap(fw.msgs) != 0 {
		t.Errorf("after a frame of %d messages: room for %d kept, want none", len(big)*peerCallMessages, cap(fw.msgs))
	}

	q := n.mgr.lookup("jobs")
	q.mu.Lock()
	var values []string
	for _, m := range q.msgs.all() {
		if len(values) == 4 {
			break
		}
		values = append(values, string(m.value))
	}
	rows := q.msgs.len()
	q.mu.Unlock()
	if got, want := strings.Join(values, ","), "v0,v1,v2,v3"; got != want || rows != 4+len(big)*peerCallMessages {
		t.Errorf("the queue: %d rows beginning %q, want %d beginning %q", rows, got, 4+len(big)*peerCallMessages, want)
	}
}
