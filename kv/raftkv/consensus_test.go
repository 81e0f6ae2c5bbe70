package raftkv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/internal/testutil"
	"chute/kv"
)

// TestConsensus_Propose_leaderAndFollowers proposes on every member at
// once; every member applies every command in one order.
func TestConsensus_Propose_leaderAndFollowers(t *testing.T) {
	ms := startCluster(t, nil)
	const perMember = 20
	var wg sync.WaitGroup
	errs := make(chan error, len(ms)*perMember)
	for _, m := range ms {
		wg.Go(func() {
			for i := range perMember {
				if err := m.c.Propose(testCtx(t), fmt.Appendf(nil, "%s-%02d", m.name, i)); err != nil {
					errs <- fmt.Errorf("propose on %s: %w", m.name, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	want := ms[0].sm.cmds()
	if len(want) != len(ms)*perMember {
		t.Fatalf("%s applied %d commands, want %d", ms[0].name, len(want), len(ms)*perMember)
	}
	for _, m := range ms { // each member's own commands in the order it proposed them
		var own []string
		for _, c := range want {
			if strings.HasPrefix(c, m.name+"-") {
				own = append(own, c)
			}
		}
		if !slices.IsSorted(own) || len(own) != perMember {
			t.Errorf("%s's commands applied as %q, want %d in order", m.name, own, perMember)
		}
	}
	waitCmds(t, want, ms...)
}

// TestConsensus_Propose_leaderFails stops the leader: a follower's
// proposals and reads, made at once, find the next leader.
func TestConsensus_Propose_leaderFails(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	rest := followers(ms, leader)
	leader.stop(t)
	if err := rest[0].c.Propose(testCtx(t), []byte("after")); err != nil {
		t.Fatalf("propose while the leader is gone: %v", err)
	}
	if _, err := rest[1].c.ReadIndex(testCtx(t)); err != nil {
		t.Fatalf("read while the leader is gone: %v", err)
	}
	waitCmds(t, []string{"after"}, rest...)
	if next := waitLeader(t, rest...); next == leader {
		t.Fatal("the stopped member still leads")
	}
}

// TestConsensus_ReadIndex_follower checks the read index a follower gets
// covers a write committed before, and that the follower reaches it.
func TestConsensus_ReadIndex_follower(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	f := followers(ms, leader)[0]
	if err := f.c.Propose(testCtx(t), []byte("before")); err != nil {
		t.Fatal(err)
	}
	written := leader.sm.indexOf("before")
	if written == 0 {
		t.Fatal("the leader has not applied a command Propose returned for")
	}
	got, err := f.c.ReadIndex(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got < written {
		t.Fatalf("read index %d, want at least %d, the write's", got, written)
	}
	testutil.EventuallyTrue(t, 10*time.Second, "the follower applied the read index", func() bool {
		return f.sm.Applied() >= got
	})
	if f.sm.indexOf("before") != written {
		t.Fatalf("the follower applied %q at %d, want %d", "before", f.sm.indexOf("before"), written)
	}

	// The leader answers its own reads the same way.
	if got, err := leader.c.ReadIndex(testCtx(t)); err != nil || got < written {
		t.Fatalf("leader's read index: %d, %v; want at least %d", got, err, written)
	}
}

// TestConsensus_ReadIndex_coalesces holds the leader's state machine
// with a command committed but not applied, and sends many reads at
// once: they share a few leadership checks, none takes a barrier (the
// term's is done), and each index covers the held command, which the
// reader, not the consensus, waits for.
func TestConsensus_ReadIndex_coalesces(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	c := leader.c
	if _, err := c.ReadIndex(testCtx(t)); err != nil { // the term's barrier
		t.Fatal(err)
	}

	release := leader.sm.hold()
	t.Cleanup(release)
	proposed := make(chan error, 1)
	go func() { proposed <- c.Propose(testCtx(t), []byte("held")) }()
	testutil.EventuallyTrue(t, 10*time.Second, "the leader's state machine holds a command", func() bool {
		return leader.sm.heldApplies() == 1
	})
	committed := leader.raft.CommitIndex()
	barriers, verifies := c.barriers.Load(), c.verifies.Load()

	const n = 50
	results := make(chan error, n)
	indexes := make(chan uint64, n)
	for range n {
		go func() {
			i, err := c.ReadIndex(testCtx(t))
			indexes <- i
			results <- err
		}()
	}
	for range n {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
		if i := <-indexes; i < committed {
			t.Fatalf("read index %d, want at least %d, the held command's commit", i, committed)
		}
	}
	if got := c.barriers.Load() - barriers; got != 0 {
		t.Fatalf("%d reads took %d barriers, want none: the term's barrier is done", n, got)
	}
	if got := c.verifies.Load() - verifies; got == 0 || got > n/2 {
		t.Fatalf("%d reads took %d leadership checks, want a few shared ones", n, got)
	}
	release()
	if err := <-proposed; err != nil {
		t.Fatal(err)
	}
}

// TestConsensus_RenewLease_forwardedToLeader checks a follower's renewal
// reaches the leader's state machine, and an unknown lease's error
// comes back as kv.ErrLeaseNotFound.
func TestConsensus_RenewLease_forwardedToLeader(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	for _, m := range ms {
		m.sm.mu.Lock()
		m.sm.leases[7] = 30
		m.sm.mu.Unlock()
	}
	f := followers(ms, leader)[0]
	ttl, err := f.c.RenewLease(testCtx(t), 7)
	if err != nil || ttl != 30 {
		t.Fatalf("RenewLease(7) = %d, %v; want 30, nil", ttl, err)
	}
	for _, m := range ms {
		m.sm.mu.Lock()
		renewed := slices.Clone(m.sm.renewed)
		m.sm.mu.Unlock()
		want := []int64(nil)
		if m == leader {
			want = []int64{7}
		}
		if !slices.Equal(renewed, want) {
			t.Errorf("%s renewed %v, want %v", m.name, renewed, want)
		}
	}
	if _, err := f.c.RenewLease(testCtx(t), 8); !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Fatalf("RenewLease(8) on a follower: %v, want %v", err, kv.ErrLeaseNotFound)
	}
	if _, err := leader.c.RenewLease(testCtx(t), 8); !errors.Is(err, kv.ErrLeaseNotFound) {
		t.Fatalf("RenewLease(8) on the leader: %v, want %v", err, kv.ErrLeaseNotFound)
	}
}

// TestConsensus_RenewLease_termEnded: a renewal whose record failed
// because the leader's term ended (kv.ErrNotLeader from the state
// machine) is tried again, of whoever leads then.
func TestConsensus_RenewLease_termEnded(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	leader.sm.mu.Lock()
	leader.sm.leases[7] = 30
	leader.sm.refuse = 1
	leader.sm.mu.Unlock()
	// On the leader itself: a follower's forwarded call is tried again
	// anyway, as the leader answers it "not leader".
	if ttl, err := leader.c.RenewLease(testCtx(t), 7); err != nil || ttl != 30 {
		t.Fatalf("RenewLease(7) = %d, %v; want 30, nil after a second try", ttl, err)
	}
	leader.sm.mu.Lock()
	defer leader.sm.mu.Unlock()
	if leader.sm.refuse != 0 || !slices.Equal(leader.sm.renewed, []int64{7}) {
		t.Errorf("the leader refused %d more and renewed %v; want the refusal used and [7]", leader.sm.refuse, leader.sm.renewed)
	}
}

// TestConsensus_TransferLeader moves the leadership to a follower, and
// refuses a member that is not a voter and a call on a follower.
func TestConsensus_TransferLeader(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	to := followers(ms, leader)[0]

	if err := to.c.TransferLeader(testCtx(t), leader.member); !errors.Is(err, kv.ErrNotLeader) {
		t.Fatalf("TransferLeader on a follower: %v, want %v", err, kv.ErrNotLeader)
	}
	if err := leader.c.TransferLeader(testCtx(t), 0xdead); !errors.Is(err, kv.ErrBadTransferee) {
		t.Fatalf("TransferLeader to an unknown member: %v, want %v", err, kv.ErrBadTransferee)
	}
	if err := leader.c.TransferLeader(testCtx(t), leader.member); err != nil {
		t.Fatalf("TransferLeader to the leader itself: %v, want nil", err)
	}
	// The harness's election timeout is 150 ms: on a loaded machine a
	// member's own election can overtake a transfer (raft answers
	// "leadership transfer timeout"); the new leader is asked again.
	from := leader
	for try := 1; ; try++ {
		err := from.c.TransferLeader(testCtx(t), to.member)
		got := waitLeader(t, ms...)
		if got == to {
			break
		}
		if try == 5 {
			t.Fatalf("leader is %s after %d transfers (the last: %v), want %s", got.name, try, err, to.name)
		}
		t.Logf("transfer %d from %s: %v; %s leads", try, from.name, err, got.name)
		from = got
	}
	if err := leader.c.Propose(testCtx(t), []byte("after")); err != nil {
		t.Fatalf("propose on the old leader: %v", err)
	}
	waitCmds(t, []string{"after"}, ms...)
}

// TestConsensus_Status checks every member names the leader and only
// the leader says it leads, with raft's term and indexes.
func TestConsensus_Status(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	if err := leader.c.Propose(testCtx(t), []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A majority took the command; a follower on a loaded machine may
	// hold nothing yet.
	waitCmds(t, []string{"x"}, ms...)
	for _, m := range ms {
		st := m.c.Status()
		if st.Leader != leader.member || st.IsLeader != (m == leader) {
			t.Errorf("%s: Leader %016x, IsLeader %v; want %016x, %v", m.name, st.Leader, st.IsLeader, leader.member, m == leader)
		}
		if st.Term == 0 || st.LastIndex == 0 || st.CommitIndex > st.LastIndex {
			t.Errorf("%s: term %d, commit %d, last %d", m.name, st.Term, st.CommitIndex, st.LastIndex)
		}
	}
	if st := leader.c.Status(); st.CommitIndex < leader.sm.indexOf("x") {
		t.Errorf("leader's commit index %d is before the command's %d", st.CommitIndex, leader.sm.indexOf("x"))
	}
}

// TestConsensus_majorityDown stops two of three members: the survivor's
// calls fail with no leader or a timeout, within the ApplyTimeout and
// the retries' bounds.
func TestConsensus_majorityDown(t *testing.T) {
	ms := startCluster(t, func(c *Config) { c.ApplyTimeout = time.Second })
	leader := waitLeader(t, ms...)
	survivor := followers(ms, leader)[0]
	for _, m := range ms {
		if m != survivor {
			m.stop(t)
		}
	}
	const bound = 5 * time.Second
	calls := map[string]func(context.Context) error{
		"Propose": func(ctx context.Context) error { return survivor.c.Propose(ctx, []byte("lost")) },
		"ReadIndex": func(ctx context.Context) error {
			_, err := survivor.c.ReadIndex(ctx)
			return err
		},
		"RenewLease": func(ctx context.Context) error {
			_, err := survivor.c.RenewLease(ctx, 1)
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call(testCtx(t))
		if !errors.Is(err, kv.ErrNoLeader) && !errors.Is(err, kv.ErrTimeout) {
			t.Errorf("%s: %v, want %v or %v", name, err, kv.ErrNoLeader, kv.ErrTimeout)
		}
		if took := time.Since(start); took > bound {
			t.Errorf("%s took %v, want at most %v", name, took, bound)
		}
	}
	if st := survivor.c.Status(); st.IsLeader {
		t.Errorf("the survivor of a minority says it leads: %+v", st)
	}

	// A caller's own context ends the wait with its error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := survivor.c.Propose(ctx, []byte("lost")); !errors.Is(err, context.Canceled) {
		t.Errorf("Propose with a cancelled context: %v, want %v", err, context.Canceled)
	}
}

// TestConsensus_Propose_oversized checks a peer's command over
// MaxCommandBytes is refused with InvalidArgument, and so is one
// proposed on a follower before it leaves.
func TestConsensus_Propose_oversized(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	big := make([]byte, 64<<10+1)

	conn, err := peer.Dial(leader.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx := peer.OutgoingContext(testCtx(t), testCluster(), 0x1234)
	_, err = peerpb.NewKVClient(conn).Propose(ctx, &peerpb.ProposeRequest{Commands: [][]byte{big}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("forwarded %d bytes: %v, want InvalidArgument", len(big), err)
	}
	if err := followers(ms, leader)[0].c.Propose(testCtx(t), big); !errors.Is(err, ErrCommandTooLarge) {
		t.Fatalf("propose %d bytes on a follower: %v, want %v", len(big), err, ErrCommandTooLarge)
	}
	for _, bad := range [][][]byte{nil, make([][]byte, maxBatchCommands+1)} {
		_, err = peerpb.NewKVClient(conn).Propose(ctx, &peerpb.ProposeRequest{Commands: bad})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("forwarded %d commands: %v, want InvalidArgument", len(bad), err)
		}
	}
	if got := leader.sm.cmds(); len(got) != 0 {
		t.Fatalf("the leader applied %d commands, want none", len(got))
	}
	// A follower that does not lead refuses the call rather than
	// forwarding it again.
	fconn, err := peer.Dial(followers(ms, leader)[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fconn.Close() })
	_, err = peerpb.NewKVClient(fconn).Propose(ctx, &peerpb.ProposeRequest{Commands: [][]byte{[]byte("x")}})
	if !errors.Is(fromStatus(err), errLeaderGone) {
		t.Fatalf("propose on a follower's service: %v, want etcd's not leader", err)
	}
}

// TestConsensus_Propose_batched proposes many commands on a follower at
// once: they reach the leader in fewer calls than commands (group
// commit), every one is applied once, and a call's results go to their
// own callers.
func TestConsensus_Propose_batched(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	f := followers(ms, leader)[0]
	const n = 200
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	for i := range n {
		wg.Go(func() {
			<-start
			cmd := fmt.Sprintf("batched-%03d", i)
			err := f.c.Propose(testCtx(t), []byte(cmd))
			switch {
			case err == nil:
				mu.Lock()
				acked[cmd] = true
				mu.Unlock()
			case !errors.Is(err, kv.ErrLeaderChanged): // a leader stepping down on a loaded machine
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if calls := f.c.forwards.Load(); calls >= n {
		t.Errorf("%d commands took %d calls, want fewer", n, calls)
	} else {
		t.Logf("%d commands in %d calls, %d acknowledged", n, calls, len(acked))
	}
	if len(acked) < n/2 {
		t.Fatalf("%d of %d commands acknowledged", len(acked), n)
	}
	leader = waitLeader(t, ms...)
	// Applied once committed, on the leader: every command that
	// committed before it is applied when it is.
	if err := leader.c.Propose(testCtx(t), []byte("settle")); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range leader.sm.cmds() {
		count[c]++
	}
	for c := range acked { // Propose returned once applied, on the leader
		if count[c] != 1 {
			t.Errorf("%s acknowledged and applied %d times, want once", c, count[c])
		}
	}
	for c, k := range count {
		if k > 1 {
			t.Errorf("%s applied %d times", c, k)
		}
	}
}

// TestResultError checks a command's result maps back as a whole
// call's error would.
func TestResultError(t *testing.T) {
	if err := resultError(&peerpb.ProposeResult{Index: 7}); err != nil {
		t.Errorf("OK result: %v", err)
	}
	notLeader := status.Convert(rpctypes.ErrGRPCNotLeader)
	if err := resultError(&peerpb.ProposeResult{Code: uint32(notLeader.Code()), Message: notLeader.Message()}); !errors.Is(err, errLeaderGone) {
		t.Errorf("not-leader result: %v, want %v", err, errLeaderGone)
	}
	timeout := status.Convert(rpctypes.ErrGRPCTimeout)
	if err := resultError(&peerpb.ProposeResult{Code: uint32(timeout.Code()), Message: timeout.Message()}); !errors.Is(err, kv.ErrTimeout) {
		t.Errorf("timeout result: %v, want %v", err, kv.ErrTimeout)
	}
}

// TestConsensus_Close checks calls after Close end with kv.ErrStopped
// and that Close may be called twice.
func TestConsensus_Close(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	f := followers(ms, leader)[0]
	for _, m := range []*member{leader, f} {
		if err := m.c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.c.Propose(testCtx(t), []byte("x")); !errors.Is(err, kv.ErrStopped) {
			t.Errorf("%s: Propose after Close: %v, want %v", m.name, err, kv.ErrStopped)
		}
		if _, err := m.c.ReadIndex(testCtx(t)); !errors.Is(err, kv.ErrStopped) {
			t.Errorf("%s: ReadIndex after Close: %v, want %v", m.name, err, kv.ErrStopped)
		}
	}
}

// TestConsensus_ReadIndex_reachableWhenIdle moves the leadership around a
// cluster that writes nothing: after each new leader's barrier, the read
// index every member is handed must be one its state machine reaches
// (the barrier and a new term's no-op never reach it). The race in which
// raft's applied index still lagged the barrier when it answered shows
// on a single node (cmd/chute's TestRunNode_operatorEndpoints stalled in
// 2 of 5 runs), seldom here.
func TestConsensus_ReadIndex_reachableWhenIdle(t *testing.T) {
	ms := startCluster(t, nil)
	for round := range 5 {
		leader := waitLeader(t, ms...)
		for _, m := range ms {
			idx, err := m.c.ReadIndex(testCtx(t))
			if err != nil {
				t.Fatalf("round %d: read index on %s: %v", round, m.name, err)
			}
			testutil.EventuallyTrue(t, 2*time.Second, fmt.Sprintf("round %d: %s applies read index %d", round, m.name, idx), func() bool {
				return m.sm.Applied() >= idx
			})
		}
		var next *member
		for _, m := range ms {
			if m != leader {
				next = m
				break
			}
		}
		// A transfer times out when the target does not catch up within
		// an election timeout, as on a loaded machine: try it again, a
		// bounded number of times.
		var err error
		for range 5 {
			if err = leader.c.TransferLeader(testCtx(t), next.member); err == nil || next.c.Status().IsLeader {
				err = nil
				break
			}
			t.Logf("round %d: transfer to %s: %v; again", round, next.name, err)
			leader = waitLeader(t, ms...)
			if leader == next {
				err = nil
				break
			}
		}
		if err != nil {
			t.Fatalf("round %d: transfer to %s: %v", round, next.name, err)
		}
		testutil.EventuallyTrue(t, 5*time.Second, "the next leader leads", func() bool {
			return next.c.Status().IsLeader
		})
	}
}

// TestConsensus_ProposeAsLeader: the leader's duties go into its own
// log in the term they were decided in, and nowhere else: a follower
// refuses them without forwarding, and so does the leader once the term
// is not its own.
func TestConsensus_ProposeAsLeader(t *testing.T) {
	ms := startCluster(t, nil)
	leader := waitLeader(t, ms...)
	term := leader.raft.CurrentTerm()
	if err := leader.c.ProposeAsLeader(testCtx(t), term, []byte("duty")); err != nil {
		t.Fatalf("on the leader in its term: %v", err)
	}
	waitCmds(t, []string{"duty"}, ms...)

	if err := leader.c.ProposeAsLeader(testCtx(t), term-1, []byte("stale")); !errors.Is(err, kv.ErrNotLeader) {
		t.Errorf("on the leader in an earlier term: %v, want %v", err, kv.ErrNotLeader)
	}
	for _, f := range followers(ms, leader) {
		before := f.c.forwards.Load()
		if err := f.c.ProposeAsLeader(testCtx(t), term, []byte("forwarded")); !errors.Is(err, kv.ErrNotLeader) {
			t.Errorf("on %s, a follower: %v, want %v", f.name, err, kv.ErrNotLeader)
		}
		if n := f.c.forwards.Load() - before; n != 0 {
			t.Errorf("on %s, a follower: %d calls forwarded, want none", f.name, n)
		}
	}
	// The applier checks the term again right before raft.Apply: a
	// command queued for a term that is not (or no longer) the leader's
	// is dropped there.
	out, err := leader.c.applies.apply(testCtx(t), term+1, [][]byte{[]byte("queued")})
	if err != nil {
		t.Fatal(err)
	}
	if o := <-out[0]; !errors.Is(o.err, kv.ErrNotLeader) {
		t.Errorf("queued for term %d on the leader of %d: %v, want %v", term+1, term, o.err, kv.ErrNotLeader)
	}
	// Nothing but the duty reached any log.
	if err := leader.c.Propose(testCtx(t), []byte("after")); err != nil {
		t.Fatal(err)
	}
	waitCmds(t, []string{"duty", "after"}, ms...)
}

// TestConsensus_route_tryTimeout: a read or renewal forwarded to a
// leader that holds it without answering (a frozen one) is asked again
// after TryTimeout; a command, which may still commit, is not.
func TestConsensus_route_tryTimeout(t *testing.T) {
	const try = 100 * time.Millisecond
	ms := startCluster(t, func(c *Config) { c.TryTimeout = try })
	f := followers(ms, waitLeader(t, ms...))[0]
	local := func(context.Context) error { return errors.New("the follower ran the call itself") }
	var tries atomic.Int32
	holdFirst := func(ctx context.Context, _ raft.ServerAddress) error {
		if tries.Add(1) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}

	start := time.Now()
	if err := f.c.route(testCtx(t), true, local, holdFirst); err != nil {
		t.Fatalf("idempotent: %v", err)
	}
	if took := time.Since(start); tries.Load() != 2 || took < try || took >= testApplyTimeout {
		t.Errorf("idempotent: %d tries in %v, want 2 after %v and within %v", tries.Load(), took, try, testApplyTimeout)
	}

	tries.Store(0)
	ctx, cancel := context.WithTimeout(testCtx(t), 5*try)
	defer cancel()
	if err := f.c.route(ctx, false, local, holdFirst); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("command: %v, want the caller's deadline", err)
	}
	if n := tries.Load(); n != 1 {
		t.Errorf("command: %d tries, want 1", n)
	}
}
