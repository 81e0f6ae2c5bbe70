package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
)

func TestParseSettings(t *testing.T) {
	def := Config{}.withDefaults().defaults()
	good := []struct {
		name, raw string
		check     func(Settings) bool
	}{
		{"jobs", `{}`, func(s Settings) bool { return s == def }},
		{"jobs", `{"ack":"replicated","max_bytes":1024,"prefetch":5,"visibility":"2s"}`, func(s Settings) bool {
			return s.Ack == AckReplicated && s.MaxBytes == 1024 && s.Prefetch == 5 && s.Visibility == 2*time.Second && s.BatchRows == def.BatchRows
		}},
		{"ch:events", `{"ack":"inserted","batch_rows":10,"batch_bytes":4096,"batch_interval":"0s","retry_min":"10ms","retry_max":"1s"}`, func(s Settings) bool {
			return s.Ack == AckInserted && s.BatchRows == 10 && s.BatchBytes == 4096 && s.BatchInterval == 0 && s.RetryMin == 10*time.Millisecond && s.RetryMax == time.Second
		}},
	}
	for _, tt := range good {
		s, err := parseSettings(tt.name, []byte(tt.raw), def)
		if err != nil || !tt.check(s) {
			t.Errorf("parseSettings(%s, %s) = %+v, %v", tt.name, tt.raw, s, err)
		}
	}
	bad := []struct{ name, raw, want string }{
		{"jobs", ``, "JSON object"},
		{"jobs", `not json`, "invalid character"},
		{"jobs", `{"ack":"fast"}`, "want queued, replicated or inserted"},
		{"jobs", `{"ack":"inserted"}`, "ClickHouse queues"},
		{"jobs", `{"acks":"queued"}`, "unknown field"},
		{"jobs", `{"max_bytes":0}`, "max_bytes"},
		{"jobs", `{"prefetch":"5"}`, "prefetch"},
		{"jobs", `{"visibility":"30"}`, "duration"},
		{"jobs", `{"retry_min":"2s","retry_max":"1s"}`, "above retry_max"},
		{"jobs", `{} {}`, "one JSON object"},
	}
	for _, tt := range bad {
		if _, err := parseSettings(tt.name, []byte(tt.raw), def); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseSettings(%s, %q): got %v, want an error about %q", tt.name, tt.raw, err, tt.want)
		}
	}
}

// TestSettings_checkedAtPutAppliedAtRuntime checks that settings a put
// would store are checked first (etcd's InvalidArgument, in a txn too),
// and that a changed byte cap applies to the running queue.
func TestSettings_checkedAtPutAppliedAtRuntime(t *testing.T) {
	n := startNode(t, func(c *Config) { c.ReconcileInterval = 20 * time.Millisecond })
	cli := n.client(t)
	ctx := testCtx(t, 20*time.Second)
	for _, v := range []string{`{"ack":"sometimes"}`, `{"max_bytes":"big"}`, `[]`} {
		_, err := cli.Put(ctx, SettingsKey("jobs"), v)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/config/queues/jobs") {
			t.Errorf("put %s: got %v, want InvalidArgument naming the key", v, err)
		}
	}
	_, err := cli.Txn(ctx).Then(clientv3.OpPut("/plain", "x"), clientv3.OpPut(SettingsKey("jobs"), `{"ack":1}`)).Commit()
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("txn with bad settings: got %v, want InvalidArgument", err)
	}
	if r, _ := cli.Get(ctx, "/plain"); r == nil || len(r.Kvs) != 0 {
		t.Errorf("a refused txn applied its other ops")
	}
	if _, err := cli.Put(ctx, SettingsKey("jobs/x"), `{}`); status.Code(err) != codes.InvalidArgument {
		t.Errorf("settings key with two segments: got %v, want InvalidArgument", err)
	}
	if _, err := cli.Put(ctx, SettingsKey("jobs"), `{"max_bytes":20}`); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/q/jobs/p/a", "0123456789"); err != nil { // 11 bytes with the key tail
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/q/jobs/p/b", "0123456789"); !errors.Is(err, rpctypes.ErrTooManyRequests) {
		t.Fatalf("put over a 20-byte cap: got %v, want ResourceExhausted", err)
	}
	if _, err := cli.Put(ctx, SettingsKey("jobs"), `{"max_bytes":1000}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the raised cap to apply", func() bool {
		_, err := cli.Put(ctx, "/q/jobs/p/b", "0123456789")
		return err == nil
	})
	if got := n.mgr.Status().Queues[0].Ack; got != AckQueued {
		t.Errorf("ack mode: got %q, want queued", got)
	}
}

// replicateJobs sets ack=replicated for queue "jobs" through a and waits
// until the others have the setting.
func replicateJobs(t *testing.T, ctx context.Context, a *member, others ...*member) {
	t.Helper()
	if _, err := a.cli.Put(ctx, SettingsKey("jobs"), `{"ack":"replicated"}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the settings on every member", func() bool {
		for _, m := range others {
			if m.kv.Get(SettingsKey("jobs")) == nil {
				return false
			}
		}
		return true
	})
}

// TestAck_replicatedSurvivesDispatcherKill checks ack=replicated across
// three members: the backup keeps a copy of every message not yet
// acknowledged, and when the dispatcher dies it takes the queue over
// without any put; a consumer then gets exactly the unacknowledged ones.
func TestAck_replicatedSurvivesDispatcherKill(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, a, b, c)
	putJobs(t, ctx, a, 30)
	backup, other := b, c
	if want := a.mgr.backupCandidate(); want == c.id {
		backup, other = c, b
	}
	backupRows := func() int { return backupRowsOf(backup, "jobs") }
	if got := backupRows(); got != 30 {
		t.Fatalf("backup %s holds %d copies right after the puts returned, want 30", backup.name, got)
	}
	// A consumer on a acknowledges some (at least 10, in order): the backup
	// drops their copies.
	wc := a.cli.Watch(ctx, "/q/jobs/c/x")
	acked := consumeAll(t, ctx, wc, a.cli, 10, 10*time.Second)
	waitUntil(t, 5*time.Second, "the backup to release the acknowledged copies", func() bool { return backupRows() == 30-len(acked) })

	a.stop()
	connect(b, c) // serf reports a failed; nobody puts
	waitUntil(t, 5*time.Second, "the backup to take the queue over", func() bool {
		rec, ok := ParseRecord(recordOn(other, "jobs"))
		return ok && rec.Member == backup.id
	})
	wc2 := other.cli.Watch(ctx, "/q/jobs/c/y")
	tails := consumeAll(t, ctx, wc2, other.cli, 30-len(acked), 10*time.Second)
	got := map[string]bool{}
	for _, tl := range append(acked, tails...) {
		if got[tl] {
			t.Fatalf("message %s delivered again after it was acknowledged", tl)
		}
		got[tl] = true
	}
	if len(got) != 30 {
		t.Fatalf("got %d distinct messages, want 30", len(got))
	}
}

// TestAck_releaseDuringFullCopy checks that a message acknowledged while
// the dispatcher gives its first backup a full copy of the queue is
// released on that backup as well: the copy was taken before the
// acknowledgement, and without the release the backup would keep it for
// as long as the dispatcher keeps the queue.
func TestAck_releaseDuringFullCopy(t *testing.T) {
	cl := newCluster(t)
	byTest := func(c *Config) { c.ReconcileInterval = time.Hour } // the test runs the rounds
	a, b := cl.start("a", byTest), cl.start("b", byTest)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	const n = 10
	putJobs(t, ctx, a, n) // ack=queued: no backup yet
	evs := collectN(t, a.cli.Watch(ctx, "/q/jobs/c/x"), n, 10*time.Second)
	replicateJobs(t, ctx, a, b)
	// b applies the copy's first frame only once the test lets it.
	b.mgr.backupMu.Lock()
	locked := true
	defer func() {
		if locked {
			b.mgr.backupMu.Unlock()
		}
	}()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		a.mgr.reconcile() // ack=replicated applies: a gives b a full copy
	}()
	waitUntil(t, 5*time.Second, "the full copy on its way to b", func() bool { return a.mgr.waitingOn(b.id) > 0 })
	if r, err := a.cli.Delete(ctx, string(evs[0].Kv.Key)); err != nil || r.Deleted != 1 {
		t.Fatalf("ack %s: %v, %v", evs[0].Kv.Key, r, err)
	}
	b.mgr.backupMu.Unlock()
	locked = false
	<-copied
	a.mgr.reconcile() // sends the releases
	backupRows := func() int { return backupRowsOf(b, "jobs") }
	deadline := time.Now().Add(5 * time.Second)
	for backupRows() != n-1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := backupRows(); got != n-1 {
		t.Fatalf("b keeps %d copies of jobs, want the %d a still holds", got, n-1)
	}
}

// TestHandoff_beforeLeaving checks that a dispatcher leaving hands its
// queue to another member: the record moves, the messages follow, and a
// consumer there gets every one.
func TestHandoff_beforeLeaving(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 25)
	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	// b takes the epoch after a's for its own (mayNumber).
	rec, _ := ParseRecord(recordOn(a, "jobs"))
	if rec.Member != b.id || rec.Epoch < 2 {
		t.Fatalf("record after handoff: %+v, want b at epoch 2 or past", rec)
	}
	if n := a.mgr.Status().Queues[0].Rows; n != 0 {
		t.Fatalf("a still holds %d messages", n)
	}
	a.stop()
	connect(b)
	tails := consumeAll(t, ctx, b.cli.Watch(ctx, "/q/jobs/c/x"), b.cli, 25, 10*time.Second)
	checkProducerOrder(t, prefixed(tails), 1, 25)
}

// TestHandoff_backupDropsAcknowledgedCopies: a dispatcher that leaves
// with every message acknowledged, the releases of the last ones not yet
// sent to its backup (they go at the next reconcile round), has the
// backup drop its copies before it goes. The queue, empty, was not
// handed over, nothing told the backup, and once the dispatcher was gone
// the backup took its copies over and delivered every one again.
func TestHandoff_backupDropsAcknowledgedCopies(t *testing.T) {
	cl := newCluster(t)
	a := cl.start("a", func(c *Config) { c.ReconcileInterval = time.Hour }) // no round sends the releases
	b := cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	replicateJobs(t, ctx, a, b)
	putJobs(t, ctx, a, 10)
	waitUntil(t, 5*time.Second, "b to keep the copies", func() bool { return backupRowsOf(b, "jobs") == 10 })
	if got := len(consumeAll(t, ctx, a.cli.Watch(ctx, "/q/jobs/c/x"), a.cli, 10, 10*time.Second)); got != 10 {
		t.Fatalf("acknowledged %d of 10", got)
	}
	if got := backupRowsOf(b, "jobs"); got != 10 {
		t.Fatalf("b keeps %d copies before a leaves, want 10: the releases were not held back", got)
	}
	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	if got := backupRowsOf(b, "jobs"); got != 0 {
		t.Errorf("b keeps %d copies once a's Handoff returned, want 0", got)
	}
	a.stop()
	connect(b)
	time.Sleep(300 * time.Millisecond) // b's reconcile rounds (20 ms) would take any copy over
	if got := rowsOn(b.mgr, "jobs"); got > 0 {
		t.Fatalf("b queued %d acknowledged messages again", got)
	}
}

// connectedTrio starts members a, b and c, connected, and returns them
// with a context of 30 s for the test.
func connectedTrio(t *testing.T) (a, b, c *member, ctx context.Context) {
	t.Helper()
	cl := newCluster(t)
	a, b, c = cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	return a, b, c, testCtx(t, 30*time.Second)
}

// replicatedTrio starts members a, b and c, connected, with queue jobs
// set to ack=replicated and n messages put through a, which dispatches
// them; it returns a, its backup once that keeps the n copies, the third
// member, and a context of 30 s for the test.
func replicatedTrio(t *testing.T, n int) (a, backup, other *member, ctx context.Context) {
	t.Helper()
	a, b, c, ctx := connectedTrio(t)
	replicateJobs(t, ctx, a, b, c)
	putJobs(t, ctx, a, n)
	backup, other = b, c
	if a.mgr.queueFor("jobs").backupMember.Load() == c.id {
		backup, other = c, b
	}
	waitUntil(t, 5*time.Second, "the copies on "+backup.name, func() bool { return backupRowsOf(backup, "jobs") >= n })
	return a, backup, other, ctx
}

// TestHandoff_leavingBackupWaitsForANewOne: a backup that leaves while
// its dispatcher stays says so (gossip), and before it drops its copies
// the dispatcher has given the third member a full copy and RESET it.
// It dropped them at once, and until the dispatcher's next put every
// message it had acknowledged was on its own disk alone: a kill -9 of
// it then lost what ack=replicated promised to keep.
func TestHandoff_leavingBackupWaitsForANewOne(t *testing.T) {
	a, backup, other, ctx := replicatedTrio(t, 10)
	q := a.mgr.lookup("jobs")
	backup.peers.mu.Lock()
	backup.peers.onLeaving = func() {
		a.peers.setLeaving(backup.id)
		other.peers.setLeaving(backup.id)
	}
	backup.peers.mu.Unlock()
	if err := backup.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	if got := backupRowsOf(other, "jobs"); got != 10 {
		t.Errorf("%s keeps %d copies once %s left, want all 10", other.name, got, backup.name)
	}
	if got := backupRowsOf(backup, "jobs"); got != 0 {
		t.Errorf("%s, gone, keeps %d copies", backup.name, got)
	}
	if got := q.backupMember.Load(); got != other.id {
		t.Errorf("a's backup is %s, want %s", gossip.ID(got), other.name)
	}
}

// TestHandoff_acknowledgedIdsGoWithTheQueue: the ids a dispatcher had
// acknowledged go to the member it hands its queue to, so that a copy of
// one of those messages held elsewhere (while the dispatcher was
// unreachable) and handed to the new dispatcher afterwards is dropped as
// a duplicate. The new dispatcher knew only its own acknowledgements and
// delivered the message again.
func TestHandoff_acknowledgedIdsGoWithTheQueue(t *testing.T) {
	a, b, c, ctx := connectedTrio(t)
	putJobs(t, ctx, a, 5)
	q := a.mgr.queueFor("jobs")
	q.mu.Lock()
	var late incoming
	for _, msg := range q.msgs.all() {
		late = incoming{id: msg.id, tail: msg.tail, value: slices.Clone(msg.value)}
		break
	}
	q.mu.Unlock()
	if got := len(consumeAll(t, ctx, a.cli.Watch(ctx, "/q/jobs/c/x"), a.cli, 5, 10*time.Second)); got != 5 {
		t.Fatalf("acknowledged %d of 5", got)
	}
	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := ParseRecord(recordOn(a, "jobs"))
	to, other := b, c
	if rec.Member == c.id {
		to, other = c, b
	} else if rec.Member != b.id {
		t.Fatalf("record after Handoff: %+v, want b or c", rec)
	}
	if err := other.mgr.holdHere(ctx, "jobs", []incoming{late}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, other.name+" to hand its copy to "+to.name, func() bool {
		for _, st := range other.mgr.Status().Queues {
			if st.Name == "jobs" {
				return st.Held == 0
			}
		}
		return true
	})
	if got := rowsOn(to.mgr, "jobs"); got != 0 {
		t.Fatalf("%s queued %d messages a had acknowledged", to.name, got)
	}
}

// TestHandover_oldBackupIsReset: a dispatcher whose queue moved to
// another member (here an operator rewrote the record) hands its
// messages over and has its backup drop the copies it keeps for it, from
// its next reconcile round; a member that no longer dispatches the queue
// did not send the RESETs it noted, and the copies stayed a minute.
func TestHandover_oldBackupIsReset(t *testing.T) {
	a, backup, other, ctx := replicatedTrio(t, 5)
	q := a.mgr.queueFor("jobs")
	rec, _ := ParseRecord(recordOn(a, "jobs"))
	if _, err := a.cli.Put(ctx, RecordKey("jobs"), Record{Member: other.id, Epoch: rec.Epoch + 1}.String()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, other.name+" to hold the messages", func() bool { return rowsOn(other.mgr, "jobs") >= 5 })
	waitUntil(t, 5*time.Second, backup.name+" to drop a's copies", func() bool {
		for _, st := range backup.mgr.Status().Backups {
			if st.Queue == "jobs" && st.Dispatcher == gossip.ID(a.id).String() {
				return false
			}
		}
		return true
	})
	waitUntil(t, 5*time.Second, "a to note no stale backup", func() bool {
		q.staleMu.Lock()
		defer q.staleMu.Unlock()
		return len(q.stale) == 0
	})
}

// TestHandoff_putWhileLeaving: a put to a queue nobody dispatches that
// reaches a member after its Handoff began (while it leaves gossip and
// raft, its etcd API still serving) names another member in the record,
// and the message goes there; a consumer there gets it after the leaving
// member stopped. It used to claim the queue for itself, and a member
// whose disk went with it took the message away.
func TestHandoff_putWhileLeaving(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if err := a.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Put(ctx, "/q/fresh/p/1", "late"); err != nil {
		t.Fatalf("put while leaving: %v", err)
	}
	if rec, _ := ParseRecord(recordOn(a, "fresh")); rec.Member != b.id {
		t.Fatalf("record of a queue claimed while a leaves: %+v, want b (%x)", rec, b.id)
	}
	a.stop()
	connect(b)
	tails := consumeAll(t, ctx, b.cli.Watch(ctx, "/q/fresh/c/x"), b.cli, 1, 10*time.Second)
	if len(tails) != 1 {
		t.Fatalf("consumed on b: %v, want the late put", tails)
	}
}

// TestHandoff_consumerHostLeavingDoesNotReclaim: a member that hosts a
// queue's consumer and leaves hands the queue over once; its reconcile
// rounds do not claim it back for the consumer, which, leaving, they
// claimed for another member at the next epoch every round (epoch 2 to
// 83 in two seconds).
func TestHandoff_consumerHostLeavingDoesNotReclaim(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	connect(a, b, c)
	ctx := testCtx(t, 30*time.Second)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/x", "v"); err != nil {
		t.Fatal(err)
	}
	next(t, c.cli.Watch(ctx, "/q/jobs/c/w1"), 5*time.Second)
	if err := c.mgr.Handoff(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := ParseRecord(recordOn(a, "jobs"))
	for range 5 {
		c.mgr.reconcile()
	}
	if rec, _ := ParseRecord(recordOn(a, "jobs")); rec.Epoch != after.Epoch {
		t.Fatalf("record after five rounds of the leaving member: %+v, want %+v as Handoff left it", rec, after)
	}
}

// TestHandoff_waitsForAHandoverInFlight checks that Handoff does not take
// a queue for empty while the reconcile loop's handover carries its
// messages: they are out of the queue until the new dispatcher answers,
// and back in it if it refuses. Seen under load, where Handoff returned
// at once, the refused messages came back, and the process exited with
// them. Here the test plays the reconcile loop, holding the handover
// lock with the messages taken out until the record has moved.
func TestHandoff_waitsForAHandoverInFlight(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 25)
	q := a.mgr.lookup("jobs")
	q.handoverMu.Lock()
	msgs := q.takeAll()
	done := make(chan error, 1)
	go func() { done <- a.mgr.Handoff(ctx) }()
	waitFor(t, "the record to name b", func() bool {
		rec, ok := ParseRecord(recordOn(a, "jobs"))
		return ok && rec.Member == b.id
	})
	q.putBack(msgs, a.mgr.clock.Now()) // b refused them: the record had not reached it
	q.handoverMu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := a.mgr.Status().Queues[0].Rows; n != 0 {
		t.Fatalf("Handoff returned with %d messages still on a", n)
	}
	a.stop()
	connect(b)
	tails := consumeAll(t, ctx, b.cli.Watch(ctx, "/q/jobs/c/x"), b.cli, 25, 10*time.Second)
	checkProducerOrder(t, prefixed(tails), 1, 25)
}

// TestHandoff_targetLeftMeanwhile checks that a member leaving, whose
// queue was handed to a member that then left too, stops handing over
// once nobody is left to take it, as a member alone does, instead of
// retrying until its shutdown deadline and exiting with an error (seen
// when a test stopped the last two members of a cluster at once).
func TestHandoff_targetLeftMeanwhile(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 5)
	// The queue was handed to b, which stops before the messages follow;
	// a still sees b alive. (a's own hand-off asks a member before it
	// moves the record to it: TestHandoff_unreachableTargetIsPassedOver.)
	rec, _ := ParseRecord(recordOn(a, "jobs"))
	if _, err := a.cli.Put(ctx, RecordKey("jobs"), Record{Member: b.id, Epoch: rec.Epoch + 1}.String()); err != nil {
		t.Fatal(err)
	}
	b.stop()

	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.mgr.Handoff(hctx) }()
	time.Sleep(500 * time.Millisecond) // a tries b meanwhile
	connect(a)                         // serf: b left
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("handoff with nobody left: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handoff still retrying 10s after the last other member left")
	}
}

// TestHandoff_doesNotWaitForFailingInserts: a member alone whose
// ClickHouse is unreachable (a closed port) stops without waiting for its
// queue to empty: the rows stay in its queue log for the next start, and
// Handoff returns long before its time is up. It used to wait all of it
// (chute gives it 6 s), retrying inserts that could not succeed.
func TestHandoff_doesNotWaitForFailingInserts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	n := startSinkNode(t, &chURL{url: closed, db: "default"}, func(c *Config) { c.DataDir = t.TempDir() })
	putThreeEvents(t, n)
	waitFor(t, "an insert into the closed port to fail", func() bool {
		qs := n.mgr.Status().Queues
		return len(qs) == 1 && qs[0].LastInsertError != nil
	})
	handoffAloneQuickly(t, n)
}

// TestHandoff_doesNotWaitWithoutClickHouseURL: the same with no
// clickhouse_url at all, where no insert is even tried: Handoff waited
// out its whole time for rows that could go nowhere (a node stopped in
// 7 s rather than 1).
func TestHandoff_doesNotWaitWithoutClickHouseURL(t *testing.T) {
	n := startSinkNode(t, &chURL{}, func(c *Config) { c.DataDir = t.TempDir() })
	putThreeEvents(t, n)
	handoffAloneQuickly(t, n)
}

// putThreeEvents puts three rows to ch:events on n.
func putThreeEvents(t *testing.T, n *testNode) {
	t.Helper()
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	for i := range 3 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// handoffAloneQuickly runs the Handoff of n, a member alone whose rows
// cannot be inserted, with 20 s to go, and fails the test unless it
// returned within 5 s with the queue keeping its three rows.
func handoffAloneQuickly(t *testing.T, n *testNode) {
	t.Helper()
	hctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := n.mgr.Handoff(hctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); hctx.Err() != nil || took > 5*time.Second {
		t.Fatalf("Handoff took %v (its context: %v), waiting for rows that cannot be inserted", took, hctx.Err())
	}
	if qs := n.mgr.Status().Queues; len(qs) != 1 || qs[0].Rows != 3 {
		t.Fatalf("queues after Handoff: %+v, want ch:events keeping its 3 rows", qs)
	}
}

// putJobs puts n messages "v" to the queue jobs on m, tails 00, 01, ...
func putJobs(t *testing.T, ctx context.Context, m *member, n int) {
	t.Helper()
	for i := range n {
		if _, err := m.cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
}

// prefixed turns tails "NN" into "0-NN" for checkProducerOrder.
func prefixed(tails []string) []string {
	out := make([]string, len(tails))
	for i, tl := range tails {
		out[i] = "0-" + tl
	}
	return out
}

// TestAck_replicatedSurvivesQuickRestart checks that a dispatcher killed
// and back under the same name before serf saw it fail (a new run: another
// boot id) does not strand its copies: the backup notices the new run,
// takes the queue over and nothing is lost.
func TestAck_replicatedSurvivesQuickRestart(t *testing.T) {
	run := func(boot string) func(*Config) { return func(c *Config) { c.Boot = boot } }
	cl := newCluster(t)
	a, b, c := cl.start("a", run("a1")), cl.start("b", run("b1")), cl.start("c", run("c1"))
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, a, b, c)
	putJobs(t, ctx, a, 15)
	a.stop()
	a2 := cl.start("a", run("a2")) // same name and id, empty memory
	connect(a2, b, c)              // serf never reported a failed
	waitUntil(t, 5*time.Second, "the record on a2", func() bool { return recordOn(a2, "jobs") != "" })
	waitUntil(t, 5*time.Second, "a backup to take the queue over from the new run", func() bool {
		rec, ok := ParseRecord(recordOn(b, "jobs"))
		return ok && rec.Member != a.id && rec.Epoch >= 2
	})
	tails := consumeAll(t, ctx, c.cli.Watch(ctx, "/q/jobs/c/x"), c.cli, 15, 10*time.Second)
	if len(tails) != 15 {
		t.Fatalf("got %d messages, want 15", len(tails))
	}
}

// TestAck_backupQuickRestartGetsAFullCopy: the backup of an
// ack=replicated queue restarts under its name before serf reports it
// failed. Its queue log gives its copies back as held ones, which it
// hands to the dispatcher and drops, so the dispatcher sends it a full
// copy again once serf shows the new run; when the dispatcher is then
// killed, the backup takes the queue over with every acknowledged
// message. The dispatcher used to keep counting the restarted member as
// a backup with copies: none of the 15 came back.
func TestAck_backupQuickRestartGetsAFullCopy(t *testing.T) {
	run := func(boot, dir string) func(*Config) {
		return func(c *Config) { c.Boot = boot; c.DataDir = dir }
	}
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir(), "c": t.TempDir()}
	cl := newCluster(t)
	a, b, c := cl.start("a", run("a1", dirs["a"])), cl.start("b", run("b1", dirs["b"])), cl.start("c", run("c1", dirs["c"]))
	connect(a, b, c)
	ctx := testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, a, b, c)
	putJobs(t, ctx, a, 15)
	backup, other := b, c
	if a.mgr.backupCandidate() == c.id {
		backup, other = c, b
	}
	if got := backupRowsOf(backup, "jobs"); got != 15 {
		t.Fatalf("backup keeps %d copies, want 15", got)
	}
	backup.stop()
	backup2 := cl.start(backup.name, run(backup.name+"2", dirs[backup.name]))
	connect(a, backup2, other) // serf never reported it failed
	waitUntil(t, 10*time.Second, "the restarted backup keeping a full copy again", func() bool {
		return backupRowsOf(backup2, "jobs") == 15
	})
	a.stop()
	connect(backup2, other)
	tails := consumeAll(t, ctx, other.cli.Watch(ctx, "/q/jobs/c/y"), other.cli, 15, 15*time.Second)
	if len(tails) != 15 {
		t.Fatalf("after the dispatcher was killed: got %d of the 15 acknowledged messages", len(tails))
	}
}

// TestAck_replicateSkipsMessagesGone: a dispatcher that has no backup
// yet (it just started) may deliver a message and have it acknowledged
// before the put or handover that queued it sends the backup its copy.
// No release is noted for the backup then, so the copy must not be sent:
// the backup would keep it for good and queue it again when the
// dispatcher fails.
func TestAck_replicateSkipsMessagesGone(t *testing.T) {
	a, b, ctx := replicatedPair(t)
	putJobs(t, ctx, a, 1) // a dispatches jobs; b keeps the copy
	backupRows := func() int { return backupRowsOf(b, "jobs") }
	if got := backupRows(); got != 1 {
		t.Fatalf("backup rows after one put: got %d, want 1", got)
	}

	q := a.mgr.queueFor("jobs")
	q.backupMember.Store(0) // as on a dispatcher that has not chosen its backup yet
	now := a.mgr.clock.Now()
	q.mu.Lock()
	added := q.enqueueLocked([]incoming{{id: MsgID{Origin: 99, N: 1}, tail: "gone", value: []byte("v")}}, now, arrivedCopy, true)
	q.mu.Unlock()
	if len(added) != 1 || !q.ack(added[0].seq, "gone", "", now) {
		t.Fatalf("enqueue and acknowledge a message: added %+v", added)
	}
	if err := a.mgr.replicate(ctx, q, added); err != nil {
		t.Fatalf("replicate: %v", err)
	}
	if got := backupRows(); got != 1 {
		t.Errorf("backup rows once the copy of a message acknowledged already was sent: got %d, want 1 (the put's)", got)
	}
}

// TestAck_replicatedWithEveryBackupPassedOver: a dispatcher whose only
// other member was passed over as a backup (it did not answer a frame:
// the kill of a whole cluster, one member dying before the other) is not
// alone: a put must fail rather than be acknowledged with no copy
// anywhere but the dispatcher's disk.
func TestAck_replicatedWithEveryBackupPassedOver(t *testing.T) {
	a, b, ctx := replicatedPair(t)
	putJobs(t, ctx, a, 1)
	passOverFor(a.mgr, b.id, time.Hour)
	_, err := a.cli.Put(ctx, "/q/jobs/p/after", "v")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a put while the only other member is passed over: got %v, want Unavailable (no copy, no acknowledgement)", err)
	}
}

// TestAck_replicatedForwardedWithEveryBackupPassedOver: a put made on
// another member is refused as one made on the dispatcher is, when the
// dispatcher has no member to keep a copy: the forwarding member must
// not hold copies and answer OK instead, with the message on the
// dispatcher's disk alone.
func TestAck_replicatedForwardedWithEveryBackupPassedOver(t *testing.T) {
	a, b, ctx := replicatedPair(t)
	putJobs(t, ctx, a, 1)
	passOverFor(a.mgr, b.id, time.Hour)
	_, err := b.cli.Put(ctx, "/q/jobs/p/forwarded", "v")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a put on b, forwarded to a with no member to keep a copy: got %v, want Unavailable", err)
	}
	if q := b.mgr.lookup("jobs"); q != nil && q.holding() {
		t.Fatal("b holds copies of the refused put: they would go to a and count as acknowledged")
	}
}

// TestAck_replicatedCopiesSentAgainWaitForTheBackup: messages handed
// over again after a first try was not answered OK (the sender timed
// out while the dispatcher's backup did not answer) are queued already
// on the dispatcher. The second try must be answered as the first would
// be, once the backup holds them: answered OK at once as duplicates, the
// sender let them go while the dispatcher alone held them.
func TestAck_replicatedCopiesSentAgainWaitForTheBackup(t *testing.T) {
	a, b, ctx := replicatedPair(t)
	putJobs(t, ctx, a, 1) // a dispatches jobs; b keeps the copy
	handed := make([]incoming, 3)
	for i := range handed {
		handed[i] = incoming{id: MsgID{Origin: b.id, N: uint64(100 + i)}, tail: fmt.Sprintf("h%d", i), value: []byte("v")}
	}
	hand := func() error {
		return b.mgr.forward(ctx, a.id, "jobs", handed, false, 5*time.Second)
	}
	passOverB := func(d time.Duration) {
		a.mgr.mu.Lock()
		defer a.mgr.mu.Unlock()
		if d == 0 {
			delete(a.mgr.unreachable, b.id)
			return
		}
		a.mgr.unreachable[b.id] = passOver{next: a.mgr.clock.Now().Add(d)}
	}
	passOverB(time.Hour) // no member to keep a copy
	if err := hand(); status.Code(err) != codes.Unavailable {
		t.Fatalf("hand-over with no backup: got %v, want Unavailable", err)
	}
	q := a.mgr.lookup("jobs")
	q.mu.Lock()
	queued := q.msgs.len()
	q.mu.Unlock()
	if queued != 1+len(handed) {
		t.Fatalf("a queues %d messages after the refused hand-over, want %d (kept, on its disk)", queued, 1+len(handed))
	}
	if err := hand(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the same messages handed over again, still no backup: got %v, want Unavailable, not OK as duplicates", err)
	}
	passOverB(0)
	if err := hand(); err != nil {
		t.Fatalf("handed over again with b back as a backup: %v", err)
	}
	if got := backupRowsOf(b, "jobs"); got != 1+len(handed) {
		t.Fatalf("b keeps %d copies once the hand-over is answered, want %d", got, 1+len(handed))
	}
}

// TestAck_replicateGivenUpPassesNobodyOver: a put that gives up (its
// client went away, or its deadline passed) while its copy is on the
// way says nothing of the backup, which must stay the backup.
func TestAck_replicateGivenUpPassesNobodyOver(t *testing.T) {
	a, b, ctx := replicatedPair(t)
	putJobs(t, ctx, a, 1)
	q := a.mgr.queueFor("jobs")
	if got := q.backupMember.Load(); got != b.id {
		t.Fatalf("backup after a put: got %x, want b", got)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	q.mu.Lock()
	var copies []incoming
	for seq, m := range q.msgs.all() {
		copies = append(copies, incoming{id: m.id, tail: m.tail, value: m.value, seq: seq})
	}
	q.mu.Unlock()
	// b cannot answer while its backups are locked: the copy stays on
	// the way, and the put's context is all replicate has to go by
	// (with b free to answer, its answer and the context race).
	b.mgr.backupMu.Lock()
	err := a.mgr.replicate(gone, q, copies)
	b.mgr.backupMu.Unlock()
	if err == nil {
		t.Fatal("replicate with a canceled context: got nil error")
	}
	a.mgr.mu.Lock()
	_, passed := a.mgr.unreachable[b.id]
	a.mgr.mu.Unlock()
	if passed || q.backupMember.Load() != b.id {
		t.Fatalf("after a put that gave up: b passed over %v, backup %x; want b still the backup", passed, q.backupMember.Load())
	}
}

// TestAck_releaseBetweenCopyAndBackup: a message acknowledged between
// the full copy a dispatcher without a backup sends (taken before the
// acknowledgement) and its recording the backup must be released on
// that backup, or the backup keeps the copy for good. ensureBackup's
// steps are run one by one; TestAck_releaseDuringFullCopy holds the
// copy on its way instead.
func TestAck_releaseBetweenCopyAndBackup(t *testing.T) {
	a, b, ctx := replicatedPair(t)
	putJobs(t, ctx, a, 1) // a dispatches jobs; b keeps the copy
	backupRows := func() int { return backupRowsOf(b, "jobs") }

	// ensureBackup's steps, a message acknowledged in the middle.
	q := a.mgr.queueFor("jobs")
	q.backupMember.Store(0) // as on a dispatcher that has not chosen its backup yet
	now := a.mgr.clock.Now()
	q.mu.Lock()
	added := q.enqueueLocked([]incoming{{id: MsgID{Origin: 99, N: 1}, tail: "acked", value: []byte("v")}}, now, arrivedCopy, true)
	q.mu.Unlock()
	if err := a.mgr.copyTo(ctx, q, b.id); err != nil {
		t.Fatalf("copyTo: %v", err)
	}
	if len(added) != 1 || !q.ack(added[0].seq, "acked", "", now) {
		t.Fatalf("enqueue and acknowledge a message: added %+v", added)
	}
	q.backupMember.Store(b.id)
	a.mgr.flushReleases(q)
	waitUntil(t, 5*time.Second, "the backup to keep the put's copy alone", func() bool { return backupRows() == 1 })
}

// TestCheck_recordsAreChuteFormat checks that a client cannot put a
// dispatcher record chute would not write, while a well-formed one (an
// operator moving a queue by hand) is taken.
func TestCheck_recordsAreChuteFormat(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	for _, v := range []string{"", "me", "0;epoch=1", "-1"} {
		if _, err := cli.Put(ctx, "/q/jobs", v); status.Code(err) != codes.InvalidArgument {
			t.Errorf("put /q/jobs %q: got %v, want InvalidArgument", v, err)
		}
	}
	if _, err := cli.Put(ctx, "/q/jobs", "7;epoch=3"); err != nil {
		t.Fatalf("put of a well-formed record: %v", err)
	}
}

// TestSettings_applyAtTheNextPut checks that a settings change reaches the
// very next put of a running queue, not only the next reconcile round.
func TestSettings_applyAtTheNextPut(t *testing.T) {
	n := startNode(t, func(c *Config) { c.ReconcileInterval = time.Hour })
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "/q/jobs/p/a", "0123456789"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, SettingsKey("jobs"), `{"max_bytes":12}`); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/q/jobs/p/b", "0123456789"); !errors.Is(err, rpctypes.ErrTooManyRequests) {
		t.Fatalf("first put after lowering the cap: got %v, want too many requests", err)
	}
}

// TestProduce_restartedProducerKeepsItsPuts checks that a member restarted
// under the same name gives its messages ids its earlier run never used:
// the dispatcher, which remembers the ids it acknowledged, takes them.
func TestProduce_restartedProducerKeepsItsPuts(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx := testCtx(t, 30*time.Second)
	if _, err := b.cli.Put(ctx, "/q/jobs/p/first", "v"); err != nil { // b dispatches
		t.Fatal(err)
	}
	wc := b.cli.Watch(ctx, "/q/jobs/c/x")
	consumeAll(t, ctx, wc, b.cli, 1, 5*time.Second)
	for i := range 5 {
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/jobs/p/run1-%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	consumeAll(t, ctx, wc, b.cli, 5, 5*time.Second)
	a.stop()
	a2 := cl.start("a", nil)
	connect(a2, b)
	for i := range 5 {
		if _, err := a2.cli.Put(ctx, fmt.Sprintf("/q/jobs/p/run2-%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	tails := consumeAll(t, ctx, wc, b.cli, 5, 5*time.Second)
	for i, tl := range tails {
		if want := fmt.Sprintf("run2-%d", i); tl != want {
			t.Fatalf("after the restart: got %v, want run2-0..4", tails)
		}
	}
}

// backupRowsOf returns the rows n keeps as a backup of queue, 0 for none.
func backupRowsOf(n *member, queue string) int {
	for _, s := range n.mgr.Status().Backups {
		if s.Queue == queue {
			return s.Rows
		}
	}
	return 0
}

// replicatedPair starts members a and b, connected, with queue jobs set
// to ack=replicated, and a context of 30 s for the test.
func replicatedPair(t *testing.T) (a, b *member, ctx context.Context) {
	t.Helper()
	cl := newCluster(t)
	a, b = cl.start("a", nil), cl.start("b", nil)
	connect(a, b)
	ctx = testCtx(t, 30*time.Second)
	replicateJobs(t, ctx, a, b)
	return a, b, ctx
}

// TestAck_releasesLostOnABrokenLinkAreSentAgain: releases posted while
// the link to the backup is down are not lost with their frame: once
// the link is back the backup drops the copies of the messages that
// were acknowledged meanwhile, or a takeover would queue them again
// and they would fill the backup's byte cap.
func TestAck_releasesLostOnABrokenLinkAreSentAgain(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	px := newLinkProxy(t, b.link.Addrs()[0].String())
	a.peers.set([]gossip.Peer{{ID: b.id, Addr: px.addr(), Boot: b.mgr.cfg.Boot}})
	b.peers.set([]gossip.Peer{a.asPeer()})
	ctx := testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, a, b)
	putJobs(t, ctx, a, 10)
	if got := backupRowsOf(b, "jobs"); got != 10 {
		t.Fatalf("b keeps %d copies, want 10", got)
	}
	px.setCut(true) // the link from a to b breaks for a while
	acked := consumeAll(t, ctx, a.cli.Watch(ctx, "/q/jobs/c/x"), a.cli, 10, 10*time.Second)
	if len(acked) != 10 {
		t.Fatalf("acknowledged %d of 10", len(acked))
	}
	time.Sleep(500 * time.Millisecond) // reconcile rounds post the releases into the broken link
	if got := backupRowsOf(b, "jobs"); got != 10 {
		t.Fatalf("b keeps %d copies while the link is down, want 10: the test did not break the link", got)
	}
	px.setCut(false)
	waitUntil(t, 20*time.Second, "b to drop the copies of what was acknowledged", func() bool {
		return backupRowsOf(b, "jobs") == 0
	})
}

// proxiedPeers connects a, b and c, a reaching b and c through link
// proxies the test can cut, which it returns by member id.
func proxiedPeers(t *testing.T, a, b, c *member) map[uint64]*linkProxy {
	t.Helper()
	links := map[uint64]*linkProxy{}
	var peers []gossip.Peer
	for _, o := range []*member{b, c} {
		links[o.id] = newLinkProxy(t, o.link.Addrs()[0].String())
		peers = append(peers, gossip.Peer{ID: o.id, Addr: links[o.id].addr(), Boot: o.mgr.cfg.Boot})
	}
	a.peers.set(peers)
	b.peers.set([]gossip.Peer{a.asPeer(), c.asPeer()})
	c.peers.set([]gossip.Peer{a.asPeer(), b.asPeer()})
	return links
}

// passOverFor passes member over on m as markUnreachable does, its
// next ping due after d, whatever a ping running now answers.
func passOverFor(m *Manager, member uint64, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unreachable[member] = passOver{next: m.clock.Now().Add(d)}
}

// proxiedBackup starts a, b and c over proxied peer links (proxiedPeers),
// makes a the dispatcher of the ack=replicated queue jobs with three
// puts, and returns a, the links and the queue's backup, b or c.
func proxiedBackup(t *testing.T, ctx context.Context) (*member, map[uint64]*linkProxy, *member) {
	t.Helper()
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	links := proxiedPeers(t, a, b, c)
	replicateJobs(t, ctx, a, b, c)
	putJobs(t, ctx, a, 3)
	q := a.mgr.queueFor("jobs")
	backup := map[uint64]*member{b.id: b, c.id: c}[q.backupMember.Load()]
	if backup == nil {
		t.Fatalf("backup after the puts: %x, want b or c", q.backupMember.Load())
	}
	return a, links, backup
}

// TestAck_passedOverBackupDropsItsCopies: a backup passed over (its link
// broke during a put) keeps the copies it took until told otherwise; the
// dispatcher tells it (RESET) once it can be reached, or it would queue
// them again, acknowledged long before, should it take the queue over.
func TestAck_passedOverBackupDropsItsCopies(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	a, links, first := proxiedBackup(t, ctx)
	if got := backupRowsOf(first, "jobs"); got != 3 {
		t.Fatalf("the backup keeps %d copies, want 3", got)
	}
	links[first.id].setCut(true)
	if _, err := a.cli.Put(ctx, "/q/jobs/p/after", "v"); err != nil {
		t.Fatalf("a put while the backup is cut off: %v (the other member should keep the copy)", err)
	}
	if a.mgr.queueFor("jobs").backupMember.Load() == first.id {
		t.Fatal("the backup cut off was not passed over")
	}
	passOverFor(a.mgr, first.id, time.Hour) // not chosen again: nothing else resets it
	links[first.id].setCut(false)
	waitUntil(t, 20*time.Second, "the member passed over to drop its copies", func() bool {
		return backupRowsOf(first, "jobs") == 0
	})
}

// TestAck_backupOnADeadPathStaysPassedOver: the link to an
// ack=replicated queue's backup stalls with its connections open (a
// dead path: nothing comes back, nothing ends them) while gossip calls
// the backup alive. The put that finds it out waits for it, then the
// other member keeps the copies; passed over for a fixed 5 s, the
// backup was chosen again every 10 s and a put waited 5 s for its full
// copy each time. It stays passed over until it answers a ping, and is
// a candidate again once the link flows.
func TestAck_backupOnADeadPathStaysPassedOver(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	a, links, first := proxiedBackup(t, ctx)
	links[first.id].setStalled(true)
	const stretch = 13 * time.Second // past two of the old 5 s pass-overs and their 5 s waits
	var slow []string
	start := time.Now()
	for i := 0; time.Since(start) < stretch; i++ {
		t0 := time.Now()
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/jobs/p/s%d", i), "v"); err != nil {
			t.Fatalf("put %d with the backup on a dead path: %v", i, err)
		}
		if d := time.Since(t0); d > time.Second {
			slow = append(slow, fmt.Sprintf("put %d at +%.1fs: %v", i, t0.Sub(start).Seconds(), d.Round(time.Millisecond)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(slow) > 1 {
		t.Errorf("%d puts waited over a second for the backup on a dead path, want only the first: %v", len(slow), slow)
	}
	if !a.mgr.passedOver(first.id) {
		t.Error("the backup on a dead path is not passed over")
	}
	links[first.id].setStalled(false)
	waitUntil(t, 10*time.Second, "the backup to be a candidate again once its link flows", func() bool {
		return !a.mgr.passedOver(first.id)
	})
}

// TestAck_duringTakeover checks that an acknowledgement reaching the
// backup after it claimed the queue of a failed dispatcher, and before it
// queued its copies, is remembered: the acknowledged message is dropped
// when the copies are queued, not delivered again. The backup held no
// state of the queue before (it only kept copies).
func TestAck_duringTakeover(t *testing.T) {
	cl := newCluster(t)
	byTest := func(c *Config) { c.ReconcileInterval = time.Hour } // the test runs the rounds
	a, b, c := cl.start("a", byTest), cl.start("b", byTest), cl.start("c", byTest)
	connect(a, b, c)
	ctx := testCtx(t, 30*time.Second)
	replicateJobs(t, ctx, a, b, c)
	const n = 5
	putJobs(t, ctx, a, n)
	backup, other := b, c
	if a.mgr.backupCandidate() == c.id {
		backup, other = c, b
	}
	if got := backupRowsOf(backup, "jobs"); got != n {
		t.Fatalf("backup %s holds %d copies, want %d", backup.name, got, n)
	}
	evs := collectN(t, a.cli.Watch(ctx, "/q/jobs/c/x"), n, 10*time.Second) // none acknowledged

	a.stop()
	connect(b, c)
	if rec := backup.mgr.dispatcherOf(ctx, "jobs", claimAsProducer); rec.Member != backup.id {
		t.Fatalf("backup's claim: record %+v", rec)
	}
	if backup.mgr.lookup("jobs") != nil {
		t.Fatal("the backup holds state of the queue before taking it over; the test needs it not to")
	}
	acked := ParseKey(string(evs[0].Kv.Key))
	if _, err := other.cli.Delete(ctx, string(evs[0].Kv.Key)); err != nil { // to the backup: the record names it now
		t.Fatal(err)
	}
	backup.mgr.reconcile() // takes the copies over
	q := backup.mgr.lookup("jobs")
	if q == nil {
		t.Fatal("no queue on the backup after its takeover")
	}
	q.mu.Lock()
	depth := q.msgs.len()
	q.mu.Unlock()
	if depth != n-1 {
		t.Fatalf("queue after the takeover holds %d messages, want %d: %s was acknowledged", depth, n-1, acked.Tail)
	}
	for _, tl := range consumeAll(t, ctx, backup.cli.Watch(ctx, "/q/jobs/c/y"), backup.cli, n-1, 10*time.Second) {
		if tl == acked.Tail {
			t.Fatalf("%s delivered again after it was acknowledged", tl)
		}
	}
}

// TestAck_failedFullCopyKeepsTheOldBackupsReleases: a full copy to a
// new backup candidate that fails leaves the releases owed to the backup
// that stays: they were dropped, so that backup kept the copies of
// acknowledged messages for good, and a takeover queued them again.
func TestAck_failedFullCopyKeepsTheOldBackupsReleases(t *testing.T) {
	cl := newCluster(t)
	byTest := func(c *Config) { c.ReconcileInterval = time.Hour } // the test runs a's rounds
	a := cl.start("a", byTest)
	b, c := cl.start("b", nil), cl.start("c", nil)
	links := proxiedPeers(t, a, b, c)
	ctx := testCtx(t, 60*time.Second)
	replicateJobs(t, ctx, a, b, c)
	putJobs(t, ctx, a, 1)
	q := a.mgr.queueFor("jobs")
	byID := map[uint64]*member{b.id: b, c.id: c}
	pref := byID[q.backupMember.Load()]
	if pref == nil {
		t.Fatalf("backup %x, want b or c", q.backupMember.Load())
	}
	other := b
	if pref == b {
		other = c
	}
	// The preferred backup is passed over for a while: the other one
	// gets a full copy and is the backup.
	passOverFor(a.mgr, pref.id, time.Hour)
	const n = 5
	for i := range n {
		if _, err := a.cli.Put(ctx, fmt.Sprintf("/q/jobs/p/x%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if q.backupMember.Load() != other.id {
		t.Fatalf("backup %x, want %x", q.backupMember.Load(), other.id)
	}
	if got := backupRowsOf(other, "jobs"); got != n+1 {
		t.Fatalf("the backup keeps %d copies, want %d", got, n+1)
	}
	// The preferred one is a candidate again, but cannot be reached.
	links[pref.id].setCut(true)
	a.mgr.mu.Lock()
	delete(a.mgr.unreachable, pref.id)
	a.mgr.mu.Unlock()
	acked := consumeAll(t, ctx, a.cli.Watch(ctx, "/q/jobs/c/x"), a.cli, n+1, 5*time.Second)
	if len(acked) != n+1 {
		t.Fatalf("acknowledged %d of %d", len(acked), n+1)
	}
	a.mgr.reconcile() // tries a full copy to the preferred one, which fails
	if q.backupMember.Load() != other.id {
		t.Fatalf("backup %x after the failed copy, want %x still", q.backupMember.Load(), other.id)
	}
	for range 5 {
		a.mgr.reconcile() // sends the releases to the backup
		time.Sleep(100 * time.Millisecond)
	}
	waitUntil(t, 5*time.Second, "the backup to drop the copies of acknowledged messages", func() bool {
		return backupRowsOf(other, "jobs") == 0
	})
}

// TestTakeReleases_boundedPerFrame: a frame names at most peerCallSeqs
// releases, the oldest first, and the rest wait for the next: a backup
// (and the peer codec) refuses a frame naming more, and all of them went
// back to be refused again, for ever.
func TestTakeReleases_boundedPerFrame(t *testing.T) {
	q := &queue{}
	for i := range peerCallSeqs + 5 {
		q.released = append(q.released, uint64(i+1))
	}
	first := q.takeReleasesLocked()
	if len(first) != peerCallSeqs || first[0] != 1 || len(q.released) != 5 || q.released[0] != peerCallSeqs+1 {
		t.Fatalf("took %d, left %d (first left %v); want %d and 5", len(first), len(q.released), q.released[:min(1, len(q.released))], peerCallSeqs)
	}
	if grown := append(first, 0); grown[peerCallSeqs] != 0 || q.released[0] != peerCallSeqs+1 { // must not write over what is left
		t.Fatalf("appending to the releases taken changed those left: %d", q.released[0])
	}
	if rest := q.takeReleasesLocked(); len(rest) != 5 || q.released != nil {
		t.Fatalf("then took %d, left %d; want 5 and none", len(rest), len(q.released))
	}
}

// handoffCutOnceNamed runs a's Handoff (10 s) and cuts px, the link from
// a to target, while the record write naming target (its first move, to
// epoch 2) is held, so that target answered a's ping and is silent once
// named; then calls after, if set, and returns Handoff's error.
func handoffCutOnceNamed(t *testing.T, ctx context.Context, a, target *member, px *linkProxy, after func()) error {
	t.Helper()
	moved := fmt.Appendf(nil, "%d;epoch=2", target.id)
	blocked, release := a.seat.delay(t, func(cmd []byte) bool { return bytes.Contains(cmd, moved) })
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.mgr.Handoff(hctx) }()
	select {
	case <-blocked: // a asked the member and writes the record naming it
	case <-ctx.Done():
		t.Fatal("a did not move the record to " + target.name)
	}
	px.setCut(true)
	release()
	if after != nil {
		after()
	}
	return <-done
}

// TestHandoff_targetSilentOnceNamedIsPassedOver: a member that leaves
// moved the record to a member that answered, which then went silent
// (its link cut before the hand-over): the leaving member kept trying it
// until the shutdown deadline, the messages left on its disk. It must
// move the record on to the next member and hand the messages there.
func TestHandoff_targetSilentOnceNamedIsPassedOver(t *testing.T) {
	cl := newCluster(t)
	a, b, c := cl.start("a", nil), cl.start("b", nil), cl.start("c", nil)
	pxb, pxc := newLinkProxy(t, b.link.Addrs()[0].String()), newLinkProxy(t, c.link.Addrs()[0].String())
	a.peers.set([]gossip.Peer{{ID: b.id, Addr: pxb.addr(), Boot: b.mgr.cfg.Boot}, {ID: c.id, Addr: pxc.addr(), Boot: c.mgr.cfg.Boot}})
	b.peers.set([]gossip.Peer{a.asPeer(), c.asPeer()})
	c.peers.set([]gossip.Peer{a.asPeer(), b.asPeer()})
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 10)
	silent, other, px := b, c, pxb
	if a.mgr.backupCandidate() == c.id { // the member a hands jobs to first
		silent, other, px = c, b, pxc
	}
	if err := handoffCutOnceNamed(t, ctx, a, silent, px, nil); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(a.mgr, "jobs"); got != 0 {
		t.Fatalf("a kept %d messages after its hand-off, %s silent once named", got, silent.name)
	}
	rec, _ := ParseRecord(recordOn(a, "jobs"))
	if rec.Member != other.id {
		t.Fatalf("jobs' record after a's hand-off: %+v, want %s (%s went silent)", rec, other.name, silent.name)
	}
	waitUntil(t, 5*time.Second, other.name+" to hold the messages", func() bool { return rowsOn(other.mgr, "jobs") == 10 })
}

// TestHandoff_onlyTargetBackAfterABlipGetsTheQueue: a member that leaves
// names the only other member, whose link blips just then (cut while the
// record naming it is written, mended 300 ms on). With nobody to move the
// record on to, the leaving member must go on trying that one until its
// deadline; it gave up at once, the rows left behind on its own disk
// (found by a review of the pass-over of silent targets).
func TestHandoff_onlyTargetBackAfterABlipGetsTheQueue(t *testing.T) {
	cl := newCluster(t)
	a, b := cl.start("a", nil), cl.start("b", nil)
	px := newLinkProxy(t, b.link.Addrs()[0].String())
	a.peers.set([]gossip.Peer{{ID: b.id, Addr: px.addr(), Boot: b.mgr.cfg.Boot}})
	b.peers.set([]gossip.Peer{a.asPeer()})
	ctx := testCtx(t, 30*time.Second)
	putJobs(t, ctx, a, 10)
	mend := func() { time.AfterFunc(300*time.Millisecond, func() { px.setCut(false) }) }
	if err := handoffCutOnceNamed(t, ctx, a, b, px, mend); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(a.mgr, "jobs"); got != 0 {
		t.Fatalf("a's hand-off ended with %d rows on a; b was back 300 ms into a 10 s deadline", got)
	}
	waitUntil(t, 5*time.Second, "b to hold the messages", func() bool { return rowsOn(b.mgr, "jobs") == 10 })
}

// TestHandoff_unreachableTargetIsPassedOver: a member that leaves hands
// its queue to another that gossip calls alive but that does not answer
// on the peer link (frozen, cut off from it) no more than to one gone:
// it asks first, and hands the queue to the next member. It moved the
// record to the silent one and tried it until the shutdown deadline,
// and the messages stayed behind on its disk (on a scale-in, for good).
func TestHandoff_unreachableTargetIsPassedOver(t *testing.T) {
	a, b, c, ctx := connectedTrio(t)
	putJobs(t, ctx, a, 10)
	first := a.mgr.backupCandidate() // the member a would hand jobs to
	silent, other := b, c
	if first == c.id {
		silent, other = c, b
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = silent.link.Shutdown(sctx) // still alive to a's gossip
	cancel()
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.mgr.Handoff(hctx); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(a.mgr, "jobs"); got != 0 {
		t.Errorf("a kept %d messages after its hand-off", got)
	}
	rec, _ := ParseRecord(recordOn(a, "jobs"))
	if rec.Member != other.id {
		t.Fatalf("jobs' record after a's hand-off: %+v, want %s (%s is silent)", rec, other.name, silent.name)
	}
	waitUntil(t, 5*time.Second, other.name+" to hold the messages", func() bool { return rowsOn(other.mgr, "jobs") == 10 })
}
