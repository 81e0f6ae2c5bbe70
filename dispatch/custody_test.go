package dispatch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/dispatch/qlog"
	"chute/gossip"
	"chute/gossip/peer/peerpb"
	"chute/kv"
)

// TestManager_DataDir_recoversUnacknowledged: messages put with
// ack=queued on a manager with a data dir survive closing it without a
// handover; a new manager on the same dir delivers every one not
// acknowledged, and none that was.
func TestManager_DataDir_recoversUnacknowledged(t *testing.T) {
	dir := t.TempDir()
	withDir := func(c *Config) { c.DataDir = dir }
	ctx := testCtx(t, 30*time.Second)

	n1 := startNode(t, withDir)
	cli := n1.client(t)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if _, err := cli.Put(ctx, "/q/jobs/p/"+k, "body-"+k); err != nil {
			t.Fatal(err)
		}
	}
	wc := cli.Watch(ctx, "/q/jobs/c/w1")
	evs := collectN(t, wc, 5, 10*time.Second)
	acked := map[string]bool{}
	for _, ev := range evs[:2] { // the first two: a and b
		r, err := cli.Delete(ctx, string(ev.Kv.Key))
		if err != nil || r.Deleted != 1 {
			t.Fatalf("ack of %s: deleted %v, err %v", ev.Kv.Key, r, err)
		}
		acked[string(ev.Kv.Value)] = true
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = n1.kv.Shutdown(sctx)
	if err := n1.mgr.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown with a data dir: %v", err)
	}

	n2 := startNode(t, withDir)
	cli2 := n2.client(t)
	wc2 := cli2.Watch(ctx, "/q/jobs/c/w1")
	var got []string
	for _, ev := range collectN(t, wc2, 3, 10*time.Second) {
		got = append(got, string(ev.Kv.Value))
	}
	slices.Sort(got)
	want := []string{}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if !acked["body-"+k] {
			want = append(want, "body-"+k)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the restart got %q, want %q (acknowledged: %v)", got, want, acked)
	}
	select {
	case resp := <-wc2:
		t.Fatalf("delivered more than the unacknowledged: %v", resp.Events)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestManager_DataDir_ackedStaysReleased: a message acknowledged before
// the manager closes is not in the log any more: a third manager on the
// dir, after the second acknowledged everything, recovers nothing.
func TestManager_DataDir_ackedStaysReleased(t *testing.T) {
	dir := t.TempDir()
	withDir := func(c *Config) { c.DataDir = dir }
	ctx := testCtx(t, 30*time.Second)
	restart := func(n *testNode) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = n.kv.Shutdown(sctx)
		if err := n.mgr.Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
	}

	n1 := startNode(t, withDir)
	cli := n1.client(t)
	for _, k := range []string{"a", "b"} {
		if _, err := cli.Put(ctx, "/q/jobs/p/"+k, k); err != nil {
			t.Fatal(err)
		}
	}
	restart(n1)

	n2 := startNode(t, withDir)
	cli2 := n2.client(t)
	wc := cli2.Watch(ctx, "/q/jobs/c/w1")
	for _, ev := range collectN(t, wc, 2, 10*time.Second) {
		if _, err := cli2.Delete(ctx, string(ev.Kv.Key)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the queue to be empty", func() bool { return n2.depth("jobs") == 0 })
	restart(n2)

	n3 := startNode(t, withDir)
	if q := n3.mgr.lookup("jobs"); q != nil && q.holding() {
		t.Fatalf("a third start recovered %d rows, want none", n3.depth("jobs"))
	}
}

// TestManager_DataDir_noSpace: a put that does not fit under QuotaBytes
// fails with etcd's "database space exceeded" and calls OnNoSpace; the
// queue keeps nothing of it.
func TestManager_DataDir_noSpace(t *testing.T) {
	var calls atomic.Int32
	n := startNode(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.QuotaBytes = 1 // below a segment's header: every append is refused
		c.OnNoSpace = func() { calls.Add(1) }
	})
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	_, err := cli.Put(ctx, "/q/jobs/p/a", "x")
	if err == nil || !strings.Contains(err.Error(), "etcdserver: mvcc: database space exceeded") {
		t.Fatalf("put over the quota: got %v, want %v", err, rpctypes.ErrNoSpace)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("OnNoSpace called %d times, want 1", got)
	}
	if d := n.depth("jobs"); d > 0 {
		t.Errorf("queue holds %d rows after a refused put, want 0", d)
	}
}

// TestManager_Shutdown_memoryOnlyLoss: without a data dir, messages left
// at Shutdown are lost, and Shutdown says so.
func TestManager_Shutdown_memoryOnlyLoss(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "/q/jobs/p/a", "x"); err != nil {
		t.Fatal(err)
	}
	_ = n.kv.Shutdown(ctx)
	if err := n.mgr.Shutdown(ctx); !errors.Is(err, errRowsLost) {
		t.Fatalf("Shutdown holding a message without a data dir: got %v, want errRowsLost", err)
	}
}

// TestRecord_roundTrip: a record decodes to the message encoded, a
// backup's copy with the dispatcher and run it was kept for (those of a
// message or of a copy without them are not written), and a damaged one
// does not decode.
func TestRecord_roundTrip(t *testing.T) {
	owner := &copyOwner{member: 1<<64 - 1, boot: "3w5e11264sgsf"}
	in := incoming{id: MsgID{Origin: 7, N: 1 << 40}, seq: 1<<32 + 3, tail: "k/1", value: []byte(`{"a":1}`), owner: owner}
	for _, kind := range []byte{recMessage, recBackup} {
		for _, o := range []*copyOwner{nil, owner} {
			in := in
			in.owner = o
			if got, want := recordSize(kind, "ch:events", in), len(encodeRecord(nil, kind, "ch:events", in)); got != want {
				t.Errorf("recordSize of kind %d, owner %v: got %d, want %d", kind, o, got, want)
			}
			_, out, err := decodeRecord(encodeRecord(nil, kind, "ch:events", in), nil)
			if err != nil || (out.owner != nil) != (kind == recBackup && o != nil) {
				t.Errorf("kind %d, owner %v: decoded owner %v, %v", kind, o, out.owner, err)
			}
		}
	}
	rec := encodeRecord(nil, recBackup, "ch:events", in)
	for _, r := range []*qlog.Region{nil, {}} {
		name, out, err := decodeRecord(rec, r)
		if err != nil || name != "ch:events" || out.id != in.id || out.seq != in.seq || out.tail != in.tail || string(out.value) != string(in.value) ||
			out.owner == nil || *out.owner != *owner {
			t.Fatalf("decoded %q %+v %v, want %q %+v", name, out, err, "ch:events", in)
		}
		// Mapped, the value is the record's bytes; else a copy.
		if aliases := &out.value[0] == &rec[len(rec)-len(in.value)]; aliases != (r != nil) || out.region != r {
			t.Errorf("region %v: value aliases the record: got %v, want %v; region %v", r, aliases, r != nil, out.region)
		}
		for i := range len(rec) - 1 {
			if _, _, err := decodeRecord(rec[:i], r); err == nil {
				t.Fatalf("a record cut to %d bytes decoded", i)
			}
		}
	}
}

// TestTriedRecord_roundTrip: a tried batch's record decodes to its rows'
// ids in order (runs of one origin, other origins, steps back, a step
// too large for a difference); one cut short, longer, of no rows or of
// more rows than a batch may have does not decode.
func TestTriedRecord_roundTrip(t *testing.T) {
	ids := []MsgID{{Origin: 7, N: 1 << 40}, {Origin: 7, N: 1<<40 + 1}, {Origin: 7, N: 1<<40 + 2}, {Origin: 1<<64 - 1, N: 5},
		{Origin: 7, N: 1<<40 - 3}, {Origin: 7, N: 1<<40 - 4}, {Origin: 7, N: 1<<63 + 9}, {Origin: 7, N: 1}, {Origin: 0, N: 0}}
	rowsOf := func(ids []MsgID) []row {
		rows := make([]row, len(ids))
		for i, id := range ids {
			rows[i] = row{seq: uint64(i + 1), m: &message{id: id}}
		}
		return rows
	}
	rec := encodeTried(nil, "ch:events", rowsOf(ids))
	name, got, err := decodeTried(rec)
	if err != nil || name != "ch:events" || !slices.Equal(got.ids, ids) {
		t.Fatalf("decoded %q %v %v, want %v", name, got.ids, err, ids)
	}
	run := make([]MsgID, 1000)
	for i := range run {
		run[i] = MsgID{Origin: 3, N: 1<<60 + uint64(i)}
	}
	if n := len(encodeTried(nil, "ch:events", rowsOf(run))); n > len(run)+40 {
		t.Errorf("a run of %d ids of one origin takes %d bytes, want about one a row", len(run), n)
	}
	for i := range len(rec) {
		if _, _, err := decodeTried(rec[:i]); err == nil {
			t.Fatalf("a record cut to %d bytes decoded", i)
		}
	}
	// n ids of one origin: the first, then steps of 0. maxBatchRows of
	// them decode, one more does not.
	ofRows := func(n int) []byte {
		b := append([]byte{recTried, byte(len("ch:t"))}, "ch:t"...)
		b = binary.AppendUvarint(b, uint64(n))
		return append(append(b, 1, 7, 1), make([]byte, n-1)...)
	}
	if _, got, err := decodeTried(ofRows(maxBatchRows)); err != nil || len(got.ids) != maxBatchRows {
		t.Fatalf("a record of maxBatchRows ids: %d ids, %v", len(got.ids), err)
	}
	tooMany := ofRows(maxBatchRows + 1)
	for what, bad := range map[string][]byte{
		"longer":    append(slices.Clone(rec), 1),
		"no rows":   encodeTried(nil, "ch:events", nil),
		"too many":  tooMany,
		"bad name":  encodeTried(nil, "a/b", rowsOf(ids)),
		"a message": encodeRecord(nil, recMessage, "ch:events", incoming{id: ids[0]}),
	} {
		if _, _, err := decodeTried(bad); err == nil {
			t.Errorf("%s: decoded", what)
		}
	}
}

func TestMarkRecord_roundTrip(t *testing.T) {
	in := incoming{id: MsgID{Origin: 1<<64 - 1, N: 1 << 40}, batch: 30000}
	rec := encodeMark(nil, "ch:events", in)
	if len(rec) != markSize("ch:events", in) {
		t.Errorf("record of %d bytes, markSize says %d", len(rec), markSize("ch:events", in))
	}
	name, got, err := decodeMark(rec)
	if err != nil || name != "ch:events" || got.rows != 30000 || !slices.Equal(got.ids, []MsgID{in.id}) {
		t.Fatalf("decoded %q %+v %v", name, got, err)
	}
	for i := range len(rec) {
		if _, _, err := decodeMark(rec[:i]); err == nil {
			t.Fatalf("a record cut to %d bytes decoded", i)
		}
	}
	with := func(name string, rows int) []byte {
		return encodeMark(nil, name, incoming{id: in.id, batch: rows})
	}
	if _, got, err := decodeMark(with("ch:t", maxBatchRows)); err != nil || got.rows != maxBatchRows {
		t.Fatalf("a mark of maxBatchRows: %+v, %v", got, err)
	}
	for what, bad := range map[string][]byte{
		"longer":   append(slices.Clone(rec), 1),
		"no rows":  with("ch:t", 0),
		"too many": with("ch:t", maxBatchRows+1),
		"bad name": with("a/b", 3),
		"tried":    encodeTried(nil, "ch:t", []row{{seq: 1, m: &message{id: in.id}}}),
	} {
		if _, _, err := decodeMark(bad); err == nil {
			t.Errorf("%s: decoded", what)
		}
	}
}

// TestMarkRecovered: a tried batch's rows, recovered in the log's order,
// move together to where the first of them lay, in the batch's order,
// the first marked; a batch a row of which is gone, or that shares a row
// with one placed before, is dropped and its record released.
func TestMarkRecovered(t *testing.T) {
	id := func(n uint64) MsgID { return MsgID{Origin: 1, N: n} }
	msgs := func(ns ...uint64) []incoming {
		out := make([]incoming, len(ns))
		for i, n := range ns {
			out[i] = incoming{id: id(n), lseq: 100 + n}
		}
		return out
	}
	recovered := map[string][]incoming{"ch:a": msgs(5, 1, 9, 3, 2, 8, 20, 21)}
	tried := map[string][]triedRecord{"ch:a": {
		{ids: []MsgID{id(1), id(2), id(3)}, rows: 3, lseq: 7},
		{ids: []MsgID{id(8), id(4)}, rows: 2, lseq: 11}, // 4 gone
		{ids: []MsgID{id(9), id(2)}, rows: 2, lseq: 12}, // 2 is the first's
		{ids: []MsgID{id(20)}, rows: 5, lseq: 13},       // a hand-over's mark (recMark)
		{ids: []MsgID{id(1)}, rows: 2, lseq: 14},        // 1 is the first's
		{ids: []MsgID{id(30)}, rows: 2, lseq: 15},       // its head gone
	}}
	markRecovered(nil, recovered, tried)
	var got []uint64
	for _, in := range recovered["ch:a"] {
		got = append(got, in.id.N)
	}
	if want := []uint64{5, 1, 2, 3, 9, 8, 20, 21}; !slices.Equal(got, want) {
		t.Fatalf("recovered order %v, want %v", got, want)
	}
	marks := map[uint64][2]uint64{1: {3, 7}, 20: {5, 13}} // row: batch, record
	for _, in := range recovered["ch:a"] {
		if want := marks[in.id.N]; uint64(in.batch) != want[0] || in.batchRec != want[1] {
			t.Fatalf("row %d: batch %d, record %d; want %v", in.id.N, in.batch, in.batchRec, want)
		}
	}
}

// rowsOn is depth_rows of queue on m, -1 when m does not know it.
func rowsOn(m *Manager, queue string) int {
	for _, q := range m.Status().Queues {
		if q.Name == queue {
			return q.Rows
		}
	}
	return -1
}

// liveRecords is how many records of m's queue log are live.
func liveRecords(m *Manager) int {
	if m.qlog == nil {
		return -1
	}
	return int(m.qlog.Stats().Live)
}

// TestCustody_replicatedOnBothDisks: with ack=replicated a put returns
// once the message is in the dispatcher's queue log and in its backup's;
// acknowledged messages are released on both.
func TestCustody_replicatedOnBothDisks(t *testing.T) {
	a, b := pairWithDirs(t)
	ctx := testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, a, b)
	putJobs(t, ctx, a, 30)
	if got := liveRecords(a.mgr); got != 30 {
		t.Errorf("dispatcher's log holds %d records right after the puts returned, want 30", got)
	}
	if got := liveRecords(b.mgr); got != 30 {
		t.Errorf("backup's log holds %d records right after the puts returned, want 30", got)
	}
	acked := consumeAll(t, ctx, a.cli.Watch(ctx, "/q/jobs/c/x"), a.cli, 10, 10*time.Second)
	left := 30 - len(acked)
	waitUntil(t, 5*time.Second, "both logs to release the acknowledged", func() bool {
		return liveRecords(a.mgr) == left && liveRecords(b.mgr) == left
	})
}

// TestCustody_handoffReleases: a queue handed to another member leaves
// the first one's log and is in the second one's.
func TestCustody_handoffReleases(t *testing.T) {
	a, b := pairWithDirs(t)
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 20)
	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the records to move", func() bool {
		return liveRecords(a.mgr) == 0 && liveRecords(b.mgr) == 20
	})
}

// TestCustody_restartHandsToDispatcher: a member stopped without a
// handover, whose queue another member dispatches by the time it is
// back, hands the messages it recovered to that dispatcher and keeps
// none.
func TestCustody_restartHandsToDispatcher(t *testing.T) {
	cl := newCluster(t)
	dirA := t.TempDir()
	withA := func(c *Config) { c.DataDir = dirA }
	a, b := cl.start("a", withA), cl.start("b", func(c *Config) { c.DataDir = t.TempDir() })
	connect(a, b)
	ctx := testCtx(t, 60*time.Second)
	putJobs(t, ctx, a, 12)
	a.stop() // no handover: the messages stay in a's log
	connect(b)
	if _, err := b.cli.Put(ctx, "/q/jobs/p/new", "v"); err != nil { // b claims the queue
		t.Fatal(err)
	}
	a2 := cl.start("a", withA)
	connect(a2, b)
	waitUntil(t, 10*time.Second, "a to hand its recovered messages to b", func() bool {
		return rowsOn(b.mgr, "jobs") == 13 && liveRecords(a2.mgr) == 0
	})
	if got := liveRecords(b.mgr); got != 13 {
		t.Errorf("b's log holds %d records, want 13", got)
	}
}

// withRun returns a Config mutation that sets the run of the member's
// process (its serf boot tag), and the data dir when dir is not "".
func withRun(boot, dir string) func(*Config) {
	return func(c *Config) { c.Boot, c.DataDir = boot, dir }
}

// replicatedTen starts a (a member of the key space, no peer of the
// others), b (run b1, no data dir), the dispatcher of the ack=replicated
// queue jobs, and c (run c1, on dir), its backup, and puts ten messages
// to b, each copied on c.
func replicatedTen(t *testing.T) (cl *cluster, a, b, c *member, dir string, ctx context.Context) {
	t.Helper()
	cl = newCluster(t)
	a = cl.start("a", nil)
	dir = t.TempDir()
	b, c = cl.start("b", withRun("b1", "")), cl.start("c", withRun("c1", dir))
	connect(b, c)
	ctx = testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, b, c)
	putJobs(t, ctx, b, 10)
	if got := backupRowsOf(c, "jobs"); got != 10 {
		t.Fatalf("the backup holds %d copies, want 10", got)
	}
	return cl, a, b, c, dir, ctx
}

// TestCustody_restartedBackupDropsWhatItsDispatcherHas: the backup of
// an ack=replicated queue is killed with copies of ten unacknowledged
// messages in its log; while it is down the consumer acknowledges them
// all, and the dispatcher forgets their ids (a busy queue acknowledges
// far more meanwhile). Back on its data dir, the backup hands the
// copies it read back to the dispatcher saying whose they are; that run
// numbered them in the epoch it still dispatches in, holds none of them
// and drops them all. Taken as other copies, they were numbered again
// and delivered twice. The same with the queue's byte cap below the
// copies' bytes: dropped before the room is checked, they take none
// (they were refused, the hand-over tried again every round).
func TestCustody_restartedBackupDropsWhatItsDispatcherHas(t *testing.T) {
	for _, capped := range []bool{false, true} {
		t.Run(fmt.Sprintf("capped=%v", capped), func(t *testing.T) { restartedBackupDrops(t, capped) })
	}
}

func restartedBackupDrops(t *testing.T, capped bool) {
	cl, a, b, c, dir, ctx := replicatedTen(t)
	ackedWhileDown(t, ctx, b, c)
	q := b.mgr.lookup("jobs")
	q.mu.Lock()
	q.done = newDoneSet(doneIDs) // as after 2×doneIDs later acknowledgements
	q.mu.Unlock()
	if capped { // 20 bytes: the ten copies are 30 ("v" and a tail of two)
		if _, err := a.cli.Put(ctx, SettingsKey("jobs"), `{"ack":"replicated","max_bytes":20}`); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 5*time.Second, "b to have the cap", func() bool { return b.mgr.settingsOf("jobs").MaxBytes == 20 })
	}
	c2 := cl.start("c", withRun("c2", dir))
	if n := heldOn(c2, "jobs"); n != 10 {
		t.Fatalf("c read back %d copies, want 10", n)
	}
	connect(b, c2)
	waitUntil(t, 10*time.Second, "c to hand over the copies it read back, or b to queue them", func() bool {
		return heldOn(c2, "jobs") == 0 && liveRecords(c2.mgr) == 0 || rowsOn(b.mgr, "jobs") > 0
	})
	if n := rowsOn(b.mgr, "jobs"); n != 0 {
		t.Fatalf("the dispatcher queued %d of the copies, acknowledged while the backup was down, want none", n)
	}
	noRedelivery(t, b.cli.Watch(ctx, "/q/jobs/c/y"), "while the backup was down")
}

// ackedWhileDown kills c, the backup, its copies left in its log, and
// has the ten messages of replicatedTen consumed on b meanwhile.
func ackedWhileDown(t *testing.T, ctx context.Context, b, c *member) {
	t.Helper()
	c.stop()
	connect(b)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	consumeAll(t, ctx, b.cli.Watch(wctx, "/q/jobs/c/x"), b.cli, 10, 10*time.Second)
}

// TestCustody_restartedBackupGetsAFullCopyFirst: the backup of an
// ack=replicated queue is killed with copies of ten messages in its
// log, all acknowledged while it is down. Back on its data dir, it
// cannot reach the dispatcher to hand them over, while the dispatcher
// reaches it and gives it a full copy again, then the copy of a new
// message. The full copy comes from the run the ten were kept for and
// replaces them, as it replaces the copies of a backup that did not
// restart: once the dispatcher is killed, the backup takes the queue
// over with the new message only. The ten were delivered again.
func TestCustody_restartedBackupGetsAFullCopyFirst(t *testing.T) {
	cl, _, b, c, dir, ctx := replicatedTen(t)
	ackedWhileDown(t, ctx, b, c)
	c2 := cl.start("c", withRun("c2", dir))
	px := newLinkProxy(t, b.link.Addrs()[0].String())
	px.setCut(true)
	cut := b.asPeer()
	cut.Addr = px.addr()
	c2.peers.set([]gossip.Peer{cut})
	b.peers.set([]gossip.Peer{c2.asPeer()})
	q := b.mgr.lookup("jobs")
	waitUntil(t, 10*time.Second, "b to give c's new run a full copy", func() bool {
		boot := q.backupBoot.Load()
		return q.backupMember.Load() == c2.id && boot != nil && *boot == "c2"
	})
	if _, err := b.cli.Put(ctx, "/q/jobs/p/new", "v"); err != nil {
		t.Fatal(err)
	}
	if n := backupRowsOf(c2, "jobs"); n != 1 {
		t.Fatalf("the restarted backup keeps %d copies for the dispatcher, want the new one", n)
	}
	if n := heldOn(c2, "jobs"); n != 0 {
		t.Errorf("the restarted backup holds %d of the copies it read back after its full copy, want none", n)
	}
	b.stop()
	connect(c2)
	w := c2.cli.Watch(ctx, "/q/jobs/c/x")
	if tails := consumeAll(t, ctx, w, c2.cli, 1, 10*time.Second); tails[0] != "new" {
		t.Fatalf("%s, acknowledged while the backup was down, delivered again", tails[0])
	}
	noRedelivery(t, w, "while the backup was down")
}

// TestSupersede_wholeCopiesOnly: copies read back for a run of a
// dispatcher are dropped by that run's lone RESET, or by the last frame
// of a full copy whose RESET came to this run of the member; not by a
// last frame alone (the copy began before this member restarted, its
// first frames went to the run before), nor by another run's.
func TestSupersede_wholeCopiesOnly(t *testing.T) {
	n := startNode(t, nil)
	ctx := testCtx(t, 5*time.Second)
	owner := &copyOwner{member: 9, boot: "r1", readBack: true}
	q := n.mgr.queueFor("jobs")
	q.mu.Lock()
	q.holdLocked([]incoming{{id: MsgID{Origin: 2, N: 1}, tail: "a", value: []byte("v"), seq: 7, owner: owner}})
	q.mu.Unlock()
	frame := func(kind peerpb.ForwardKind, boot string, seq uint64) *peerpb.ForwardBatch {
		b := &peerpb.ForwardBatch{Kind: kind, Queue: "jobs", Boot: boot, Full: true}
		if seq != 0 {
			b.Messages = []*peerpb.QueueMessage{{Queue: "jobs", Tail: "x", Value: []byte("v"), Origin: 3, N: seq, Seq: seq}}
		}
		return b
	}
	for _, step := range []struct {
		what string
		b    *peerpb.ForwardBatch
		held int
	}{
		{"the last frame of a copy begun before", frame(peerpb.ForwardKind_BACKUP, "r1", 1), 1},
		{"another run's RESET", frame(peerpb.ForwardKind_RESET, "r2", 0), 1},
		{"a full copy in one frame", frame(peerpb.ForwardKind_RESET, "r1", 2), 0},
	} {
		if err := n.mgr.keepBackup(ctx, 9, step.b); err != nil {
			t.Fatal(err)
		}
		n.mgr.supersede(9, step.b)
		if got := q.status().Held; got != step.held {
			t.Fatalf("after %s: %d held, want %d", step.what, got, step.held)
		}
	}
}

// TestCustody_restartedBackupOutlivesItsDispatcher: the dispatcher of an
// ack=replicated queue, without a data dir, and its backup are killed;
// the dispatcher comes back first, holding nothing, its record as it was.
// The backup, back on its data dir, hands it the copies it read back:
// they are of an earlier run, the only copies of the messages, and each
// is delivered. The same when the queue's record is deleted while both
// are down (as when an idle queue is forgotten) and the dispatcher's new
// run claims the queue again at epoch 1, the epoch of the copies: the
// run, not the epoch, tells them apart (without the boot, only the new
// put came).
func TestCustody_restartedBackupOutlivesItsDispatcher(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		t.Run(fmt.Sprintf("record deleted=%v", deleted), func(t *testing.T) { restartedBackupOutlives(t, deleted) })
	}
}

func restartedBackupOutlives(t *testing.T, deleteRecord bool) {
	cl, a, b, c, dir, ctx := replicatedTen(t) // a keeps the key space while b and c are down
	if rec, _ := ParseRecord(recordOn(b, "jobs")); rec.Member != b.id || rec.Epoch != 1 {
		t.Fatalf("record %q, want b's at epoch 1", recordOn(b, "jobs"))
	}
	c.stop()
	b.stop()
	want := 10
	if deleteRecord {
		if _, err := a.cli.Delete(ctx, RecordKey("jobs")); err != nil {
			t.Fatal(err)
		}
	}
	b2 := cl.start("b", withRun("b2", ""))
	if deleteRecord {
		if _, err := b2.cli.Put(ctx, "/q/jobs/p/new", "v"); err != nil {
			t.Fatal(err)
		}
		if rec, _ := ParseRecord(recordOn(b2, "jobs")); rec.Member != b2.id || rec.Epoch != 1 {
			t.Fatalf("record %q, want b's at epoch 1 again", recordOn(b2, "jobs"))
		}
		want++
	}
	c2 := cl.start("c", withRun("c2", dir))
	connect(b2, c2)
	tails := consumeAll(t, ctx, b2.cli.Watch(ctx, "/q/jobs/c/x"), b2.cli, want, 10*time.Second)
	if len(tails) != want {
		t.Fatalf("%d of the %d messages delivered", len(tails), want)
	}
}

// TestDropLeft: of copies handed back, only those marked as this run's
// (ownRun, by pointer: persistFrame sets it), numbered in the epoch it
// dispatches in and no longer queued are dropped; none while the
// queue's messages are out for a hand-over.
func TestDropLeft(t *testing.T) {
	m := &Manager{ownRun: &copyOwner{member: 1, boot: "r1"}, log: slog.New(slog.DiscardHandler)}
	const epoch2 = 1<<32 + 1 // the first number of epoch 2
	q := newQueue("jobs", Config{}.withDefaults().defaults())
	q.mu.Lock()
	defer q.mu.Unlock()
	q.becomeDispatcherLocked(2, time.Now())
	q.enqueueLocked([]incoming{{id: MsgID{Origin: 2, N: 2}, tail: "held", value: []byte("v")}}, time.Now(), arrivedLocal, false)
	msgs := []incoming{
		{id: MsgID{Origin: 2, N: 1}, seq: epoch2 + 5, owner: m.ownRun, lseq: 7},                 // left: dropped
		{id: MsgID{Origin: 2, N: 2}, seq: epoch2, owner: m.ownRun},                              // still queued
		{id: MsgID{Origin: 2, N: 3}, seq: 5, owner: m.ownRun},                                   // of epoch 1
		{id: MsgID{Origin: 2, N: 4}, seq: epoch2 + 6},                                           // no owner
		{id: MsgID{Origin: 2, N: 5}, seq: epoch2 + 7, owner: &copyOwner{member: 1, boot: "r1"}}, // not marked here
	}
	q.handing = 1
	if got := m.dropLeftLocked(q, 2, slices.Clone(msgs)); len(got) != len(msgs) {
		t.Errorf("during a hand-over: %d of %d kept, want all", len(got), len(msgs))
	}
	q.handing = 0
	in := slices.Clone(msgs)
	got := m.dropLeftLocked(q, 2, in)
	if len(got) != len(msgs)-1 || got[0].id.N != 2 || q.droppedOwn != 1 {
		t.Errorf("kept %+v (dropped %d), want all but the first", got, q.droppedOwn)
	}
	if in[0].lseq != 0 {
		t.Errorf("the dropped copy's record %d is still on it: a failed enqueue would release it again", in[0].lseq)
	}
}

// TestChunkEnd: a hand-over's chunks hold at most 512 messages and
// maxFrameBytes (at least one message), and copies of one owner only: a
// chunk's batch names the owner of its first (forward), and a copy that
// is not the receiver's own taken for one would be dropped. Owners are
// compared by value: cut at each backup frame's owner, copies taken over
// from a failed dispatcher went one frame's worth a round trip.
func TestChunkEnd(t *testing.T) {
	// o1 and again are one owner (two backup frames of one run).
	o1, again, o2 := &copyOwner{member: 1, boot: "r1"}, &copyOwner{member: 1, boot: "r1"}, &copyOwner{member: 1, boot: "r2"}
	msgs := []incoming{{}, {owner: o1}, {owner: again}, {owner: o2}, {}, {}}
	var got []int
	for i := 0; i < len(msgs); i = chunkEnd(msgs, i) {
		got = append(got, chunkEnd(msgs, i))
	}
	if want := []int{1, 3, 4, 6}; !slices.Equal(got, want) {
		t.Errorf("chunk ends %v, want %v", got, want)
	}
	many := make([]incoming, 1000)
	if end := chunkEnd(many, 0); end != 512 {
		t.Errorf("1000 messages: first chunk ends at %d, want 512", end)
	}
	big := []incoming{{value: make([]byte, maxFrameBytes)}, {value: make([]byte, 1)}}
	if end := chunkEnd(big, 0); end != 1 {
		t.Errorf("a message of maxFrameBytes and another: first chunk ends at %d, want 1", end)
	}
}

// heldOn returns the copies m holds of queue, 0 for none.
func heldOn(m *member, queue string) int {
	q, _ := queueOn(m, queue)
	return q.Held
}

// unsyncedRecords is a member's key space that has not caught up with
// the cluster until synced is set; it counts the record writes tried
// before.
type unsyncedRecords struct {
	*kv.Server
	synced atomic.Bool
	early  atomic.Int32
}

func (u *unsyncedRecords) Synced() bool { return u.synced.Load() }

func (u *unsyncedRecords) CompareAndPut(ctx context.Context, key string, old, value []byte) (bool, error) {
	if !u.synced.Load() {
		u.early.Add(1)
	}
	return u.Server.CompareAndPut(ctx, key, old, value)
}

// TestCustody_restartClaimsOnceSynced: a member restarted on its data
// dir with messages of a queue whose record it does not have, or has
// naming itself from its earlier run, claims the queue only once its key
// space caught up with the cluster: before, the record may only be late
// or old, and a claim from it is refused after its write timed out,
// round after round.
func TestCustody_restartClaimsOnceSynced(t *testing.T) {
	for _, deleted := range []bool{true, false} {
		t.Run(fmt.Sprintf("record deleted=%v", deleted), func(t *testing.T) { restartClaimsOnceSynced(t, deleted) })
	}
}

func restartClaimsOnceSynced(t *testing.T, deleteRecord bool) {
	cl := newCluster(t)
	dir := t.TempDir()
	a, b := cl.start("a", withRun("a1", dir)), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 5)
	a.stop()
	connect(b)
	if deleteRecord {
		if _, err := b.cli.Delete(ctx, RecordKey("jobs")); err != nil {
			t.Fatal(err)
		}
	}
	u := &unsyncedRecords{}
	cl.records = func(name string, s *kv.Server) RecordStore {
		if name == "a" {
			u.Server = s
			return u
		}
		return s
	}
	a2 := cl.start("a", withRun("a2", dir))
	connect(a2, b)
	time.Sleep(300 * time.Millisecond) // 15 reconcile rounds
	if n := u.early.Load(); n != 0 {
		t.Fatalf("%d record writes tried before the key space caught up", n)
	}
	if n := heldOn(a2, "jobs"); n != 5 {
		t.Fatalf("a holds %d of its 5 messages, want all", n)
	}
	u.synced.Store(true)
	tails := consumeAll(t, ctx, a2.cli.Watch(ctx, "/q/jobs/c/x"), a2.cli, 5, 10*time.Second)
	if len(tails) != 5 {
		t.Fatalf("%d of the 5 messages delivered", len(tails))
	}
}

// TestNew_DataDir_locked: a second manager on a data dir in use fails,
// rather than cutting the tail of a log the first one writes; once the
// first is shut down the dir is free again.
func TestNew_DataDir_locked(t *testing.T) {
	dir := t.TempDir()
	m1, err := New(Config{MemberID: 1, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if m2, err := New(Config{MemberID: 1, DataDir: dir}); err == nil {
		_ = m2.Shutdown(context.Background())
		t.Fatal("a second manager opened a data dir in use")
	}
	if err := m1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	m3, err := New(Config{MemberID: 1, DataDir: dir})
	if err != nil {
		t.Fatalf("a manager on a data dir freed by Shutdown: %v", err)
	}
	_ = m3.Shutdown(context.Background())
}

// TestManager_persistFrame_oneAppend: the produce batches of a forward
// frame go to the queue log in one append (one fsync); a batch that
// fails its checks gets its error and no record.
func TestManager_persistFrame_oneAppend(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DataDir = t.TempDir() })
	msg := func(queue, tail string) []*peerpb.QueueMessage {
		return []*peerpb.QueueMessage{{Queue: queue, Tail: tail, Value: []byte("v"), Origin: 9, N: 1}}
	}
	batches := []*peerpb.ForwardBatch{
		{Kind: peerpb.ForwardKind_PRODUCE, Messages: msg("jobs", "a")},
		{Kind: peerpb.ForwardKind_PRODUCE, Messages: msg("jobs", "a/b")}, // not one segment: refused
		{Kind: peerpb.ForwardKind_PRODUCE, Messages: msg("other", "c")},
		{Kind: peerpb.ForwardKind_RELEASE, Queue: "jobs", Seqs: []uint64{1}},
	}
	before := n.mgr.qlog.Stats()
	fw := n.mgr.persistFrame(testCtx(t, 10*time.Second), new(frameMsgs), batches)
	errs := fw.errs
	after := n.mgr.qlog.Stats()
	if got := after.Commits - before.Commits; got != 1 {
		t.Errorf("the frame took %d writes, want 1", got)
	}
	if got := after.Appended - before.Appended; got != 2 {
		t.Errorf("the frame appended %d records, want 2", got)
	}
	if errs[0] != nil || errs[2] != nil || errs[3] != nil || errs[1] == nil {
		t.Fatalf("errors %v, want one for the second batch only", errs)
	}
	a, c := fw.batch(0), fw.batch(2)
	if len(a) != 1 || len(c) != 1 || a[0].lseq == 0 || c[0].lseq != a[0].lseq+1 {
		t.Fatalf("records of the batches: %+v and %+v, want consecutive seqs", a, c)
	}
	if len(fw.batch(1)) != 0 || len(fw.batch(3)) != 0 {
		t.Errorf("batches that failed or are not puts have messages: %v, %v", fw.batch(1), fw.batch(3))
	}
}

// TestManager_persistFrame_marksTriedBatch: a forwarded message that
// heads a tried batch (a hand-over's) gets a record of its mark in the
// frame's append, which a refusal releases with the message's.
func TestManager_persistFrame_marksTriedBatch(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DataDir = t.TempDir() })
	batches := []*peerpb.ForwardBatch{{Kind: peerpb.ForwardKind_PRODUCE, Messages: []*peerpb.QueueMessage{
		{Queue: "ch:t", Tail: "a", Value: []byte("{}"), Origin: 9, N: 1, Seq: 4, Batch: 2},
		{Queue: "ch:t", Tail: "b", Value: []byte("{}"), Origin: 9, N: 2, Seq: 5},
	}}}
	before := n.mgr.qlog.Stats()
	fw := n.mgr.persistFrame(testCtx(t, 10*time.Second), new(frameMsgs), batches)
	if fw.errs[0] != nil {
		t.Fatal(fw.errs[0])
	}
	if got := n.mgr.qlog.Stats().Appended - before.Appended; got != 3 {
		t.Errorf("the frame appended %d records, want 3: two messages, a mark", got)
	}
	msgs := fw.batch(0)
	if msgs[0].batchRec == 0 || msgs[1].batchRec != 0 || msgs[0].batchRec == msgs[0].lseq || msgs[0].batchRec == msgs[1].lseq {
		t.Fatalf("marks' records %d, %d (messages' %d, %d); want one of its own on the first", msgs[0].batchRec, msgs[1].batchRec, msgs[0].lseq, msgs[1].lseq)
	}
	n.mgr.unpersist(msgs)
	waitUntil(t, 5*time.Second, "every record released", func() bool { return liveRecords(n.mgr) == 0 })
}

// TestCustody_handoffDropsBackupCopies: a backup leaving releases its
// copies of an alive dispatcher's messages, which would otherwise come
// back at its next start long after they were acknowledged; the
// dispatcher keeps its own.
func TestCustody_handoffDropsBackupCopies(t *testing.T) {
	a, b := pairWithDirs(t)
	ctx := testCtx(t, 30*time.Second)
	replicateJobs(t, ctx, a, b)
	putJobs(t, ctx, a, 10)
	if got := liveRecords(b.mgr); got != 10 {
		t.Fatalf("backup's log holds %d records, want 10", got)
	}
	if err := b.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	if got := liveRecords(b.mgr); got != 0 {
		t.Errorf("backup's log holds %d records after it left, want 0", got)
	}
	if got := liveRecords(a.mgr); got != 10 {
		t.Errorf("dispatcher's log holds %d records, want 10", got)
	}
}

// TestManager_Shutdown_droppedWhileRunning: a run that dropped an
// acknowledged message (logged at ERROR where it happened) ends with an
// error, so the process exits non-zero, even with a data dir.
func TestManager_Shutdown_droppedWhileRunning(t *testing.T) {
	n := startNode(t, func(c *Config) { c.DataDir = t.TempDir() })
	n.mgr.dropped.Add(1) // as a dead letter that could not be written
	ctx := testCtx(t, 10*time.Second)
	_ = n.kv.Shutdown(ctx)
	if err := n.mgr.Shutdown(ctx); !errors.Is(err, errRowsLost) {
		t.Fatalf("Shutdown after a drop: got %v, want errRowsLost", err)
	}
}

// TestManager_DataDir_valuesOutliveCompaction: a queued message's value
// lives in the queue log's mapping; when compaction moves its record and
// deletes its segment, the value still reads, the reconcile loop copies
// it to the heap (so the deleted file's space can go), and it is
// delivered intact. A ClickHouse queue's row in no batch is copied too
// (TestRehome_clickHouseRowsFreeDeletedSegments has one in a batch).
func TestManager_DataDir_valuesOutliveCompaction(t *testing.T) {
	n := startSinkNode(t, &chURL{}, func(c *Config) { // no ClickHouse: rows stay queued
		c.DataDir, c.NoSync, c.QueueLogSegmentBytes = t.TempDir(), true, 4<<10
	})
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	keep := `{"kept":"` + strings.Repeat("k", 200) + `"}`
	for _, k := range []string{"/q/keep/p/a", "/q/ch:events/p/a"} {
		if _, err := cli.Put(ctx, k, keep); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(name string) (value string, mapped bool) {
		q := n.mgr.lookup(name)
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, m := range q.msgs.all() {
			return string(m.value), m.region != nil
		}
		return "", false
	}
	for _, name := range []string{"keep", "ch:events"} {
		if v, mapped := kept(name); v != keep || !mapped {
			t.Fatalf("%s: queued value %q, mapped %v; want %q, mapped", name, v, mapped, keep)
		}
	}

	// Churn: messages put and acknowledged until the log deletes the
	// segment the kept one was written to.
	wc := cli.Watch(ctx, "/q/churn/c/w1")
	for i := 0; n.mgr.qlog.Stats().Deleted == 0; i++ {
		if i == 2000 {
			t.Fatalf("no segment deleted after %d messages: %+v", i, n.mgr.qlog.Stats())
		}
		putAndAck(t, ctx, cli, wc, fmt.Sprintf("/q/churn/p/%d", i), strings.Repeat("c", 100))
	}
	if st := n.mgr.qlog.Stats(); st.Moved == 0 {
		t.Fatalf("stats %+v: want the kept record moved", st)
	}
	runtime.GC()
	for _, name := range []string{"keep", "ch:events"} { // ch:events has no ClickHouse: in no batch
		waitFor(t, name+"'s kept value copied to the heap", func() bool {
			v, mapped := kept(name)
			return v == keep && !mapped
		})
	}
	evs := collectN(t, cli.Watch(ctx, "/q/keep/c/w1"), 1, 10*time.Second)
	if got := string(evs[0].Kv.Value); got != keep {
		t.Fatalf("delivered %q, want %q", got, keep)
	}
}

// TestCustody_recordSize: recordSize is the length of encodeRecord's
// record, so persistGroups cuts every record of an append from one buffer.
func TestCustody_recordSize(t *testing.T) {
	for _, in := range []incoming{
		{},
		{id: MsgID{Origin: 1<<64 - 1, N: 1 << 63}, seq: 1 << 40, tail: "k", value: []byte(`{}`)},
		{id: MsgID{Origin: 127, N: 128}, tail: string(make([]byte, 300)), value: make([]byte, 20000)},
	} {
		if got, want := recordSize(recMessage, "ch:events", in), len(encodeRecord(nil, recMessage, "ch:events", in)); got != want {
			t.Errorf("recordSize of %d-byte value: got %d, want %d", len(in.value), got, want)
		}
	}
}

// The record buffer of a frame-sized append is kept for the next append,
// not left to the collector: a dispatcher appends such frames back to
// back. (sync.Pool drops some of what it is given under the race
// detector: one reuse in a few tries is enough.)
func TestAppendBufs_frameSizedReused(t *testing.T) {
	m := &Manager{}
	size := maxFrameBytes + maxFrameBytes/4 // a full frame's values, keys and record framing
	reused := false
	for range 8 {
		a := m.getAppendBufs(size, 1)
		buf := append(a.buf, make([]byte, size)...)
		m.putAppendBufs(a, buf, append(a.recs, buf), append(a.at, &incoming{}), append(a.views, buf))
		b := m.getAppendBufs(size, 1)
		if cap(b.buf) >= size && &b.buf[:1][0] == &buf[0] {
			reused = true
			if b.recs[:1][0] != nil || b.at[:1][0] != nil || b.views[:1][0] != nil {
				t.Fatalf("a reused buffer keeps the last append's records, messages or views")
			}
			break
		}
	}
	if !reused {
		t.Errorf("a %d-byte record buffer was never reused in 8 appends", size)
	}
}

// TestLogError_failedLogStopsTheNode checks that a queue log failed for
// good (a failed fsync) is reported once to OnLogFailed, which stops the
// node so that a restart recovers the log (as etcd exits when its WAL
// cannot be synced), while each put that meets it is Unavailable.
func TestLogError_failedLogStopsTheNode(t *testing.T) {
	var calls atomic.Int32
	m, err := New(Config{MemberID: 7, OnLogFailed: func(err error) {
		if !errors.Is(err, qlog.ErrFailed) {
			t.Errorf("OnLogFailed(%v), want qlog.ErrFailed", err)
		}
		calls.Add(1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	failed := fmt.Errorf("qlog: fsync: input/output error: %w", qlog.ErrFailed)
	for range 3 {
		if err := m.logError("jobs", failed); status.Code(err) != codes.Unavailable {
			t.Fatalf("a put meeting a failed log: %v, want Unavailable", err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnLogFailed called %d times, want once", n)
	}
	if err := m.logError("jobs", qlog.ErrNoSpace); err == nil || calls.Load() != 1 {
		t.Fatalf("a full log: %v, OnLogFailed calls %d; want NOSPACE and no call", err, calls.Load())
	}
}
