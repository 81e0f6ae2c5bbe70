package raftkv

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
	"chute/kv"
)

// quietTick is a commit tick far longer than the tests below wait for a
// follower: what a follower learns within promptly it learned from a
// nudge, since raft's heartbeats carry no commit index.
const quietTick = 20 * time.Second

// promptly bounds a follower's apply after the leader's, a few round
// trips on loopback with room for a loaded machine (make test stalled
// a test process for 1.3 s), and far below quietTick.
const promptly = 5 * time.Second

func quietRaft(c *raft.Config) { c.CommitTimeout = quietTick }

// TestNudge_followersApplyPromptly: with raft's commit tick out of
// reach, each command a quiet cluster commits reaches the followers'
// state machines within a few round trips, and so does the read index
// a follower is handed for it; the nudges stop once they told the
// followers (one for each command, none while the cluster stays quiet).
func TestNudge_followersApplyPromptly(t *testing.T) {
	ms := startTunedCluster(t, nil, quietRaft)
	leader := waitLeader(t, ms...)
	fs := followers(ms, leader)
	for round := range 4 {
		cmd := fmt.Sprintf("cmd-%d", round)
		proposer := ms[round%len(ms)]
		if err := proposer.c.Propose(testCtx(t), []byte(cmd)); err != nil {
			t.Fatalf("round %d: propose on %s: %v", round, proposer.name, err)
		}
		at := leader.sm.indexOf(cmd)
		for _, f := range fs {
			testutil.EventuallyTrue(t, promptly, fmt.Sprintf("round %d: %s applies %s", round, f.name, cmd), func() bool {
				return f.sm.indexOf(cmd) == at
			})
			idx, err := f.c.ReadIndex(testCtx(t))
			if err != nil {
				t.Fatalf("round %d: read index on %s: %v", round, f.name, err)
			}
			if idx < at {
				t.Fatalf("round %d: read index %d on %s, below the command's %d", round, idx, f.name, at)
			}
			testutil.EventuallyTrue(t, promptly, fmt.Sprintf("round %d: %s reaches read index %d", round, f.name, idx), func() bool {
				return f.sm.Applied() >= idx
			})
		}
	}
	// Quiet: the last nudge told of everything before it, and no other
	// follows it.
	testutil.EventuallyTrue(t, promptly, "the leader's log all committed", func() bool {
		return leader.raft.CommitIndex() == leader.raft.LastIndex()
	})
	issued := leader.c.nudges.Load()
	time.Sleep(500 * time.Millisecond)
	if got := leader.c.nudges.Load(); got != issued {
		t.Fatalf("the quiet leader issued %d nudges in half a second", got-issued)
	}
	if issued == 0 || issued > 4+2 {
		t.Fatalf("%d nudges for 4 commands and a term's barrier", issued)
	}
	for _, m := range ms {
		if m != leader && m.c.nudges.Load() != 0 {
			t.Fatalf("follower %s issued %d nudges", m.name, m.c.nudges.Load())
		}
	}
}

// TestNudge_concurrentWritesAndReads: proposals from every member at
// once, with reads on the followers between them; every read index is
// at least the last command its reader saw acknowledged, and the
// follower reaches it promptly, though the commit tick never comes. The
// nudges then cover commands appended while one was on its way.
func TestNudge_concurrentWritesAndReads(t *testing.T) {
	// A short interval keeps a nudge on its way most of the time, so
	// that writes answer while one is.
	ms := startTunedCluster(t, func(c *Config) { c.NudgeInterval = time.Millisecond }, quietRaft)
	waitLeader(t, ms...)
	const writers, each = 3, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*len(ms))
	for w := range writers {
		for _, m := range ms {
			wg.Go(func() {
				for i := range each {
					cmd := fmt.Sprintf("%s-%d-%d", m.name, w, i)
					err := m.c.Propose(testCtx(t), []byte(cmd))
					if errors.Is(err, kv.ErrLeaderChanged) {
						continue // a leader stepping down on a loaded machine: cmd may or may not commit
					}
					if err != nil {
						errs <- fmt.Errorf("propose %s: %w", cmd, err)
						return
					}
					idx, err := m.c.ReadIndex(testCtx(t))
					if err != nil {
						errs <- fmt.Errorf("read on %s: %w", m.name, err)
						return
					}
					deadline := time.Now().Add(promptly)
					for m.sm.indexOf(cmd) == 0 || m.sm.Applied() < idx {
						if time.Now().After(deadline) {
							errs <- fmt.Errorf("%s: %s applied at %d, %d applied of read index %d, after %v",
								m.name, cmd, m.sm.indexOf(cmd), m.sm.Applied(), idx, promptly)
							return
						}
						time.Sleep(5 * time.Millisecond)
					}
					if at := m.sm.indexOf(cmd); idx < at {
						errs <- fmt.Errorf("read on %s: index %d, below %s's %d, acknowledged before", m.name, idx, cmd, at)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var nudges uint64
	for _, m := range ms {
		nudges += m.c.nudges.Load()
	}
	if nudges == 0 {
		t.Fatal("no nudge issued")
	}
}

// TestNudge_boundedBySteadyWrites: a command every 10 ms, each committed
// well before the next, would each be the last of its burst; the
// nudges, each an entry every member writes, stay at one per
// NudgeInterval.
func TestNudge_boundedBySteadyWrites(t *testing.T) {
	ms := startTunedCluster(t, nil, quietRaft)
	leader := waitLeader(t, ms...)
	time.Sleep(2 * DefaultNudgeInterval) // the term's nudge
	before := leader.c.nudges.Load()
	start := time.Now()
	writes := 0
	for time.Since(start) < time.Second {
		if err := leader.c.Propose(testCtx(t), fmt.Appendf(nil, "w-%d", writes)); err != nil {
			t.Fatal(err)
		}
		writes++
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	time.Sleep(2 * DefaultNudgeInterval) // the last write's nudge
	got := leader.c.nudges.Load() - before
	if limit := uint64(elapsed/DefaultNudgeInterval) + 2; got > limit {
		t.Fatalf("%d nudges for %d writes in %v, want at most %d (one per %v)", got, writes, elapsed, limit, DefaultNudgeInterval)
	}
	if got == 0 {
		t.Fatal("no nudge after the writes")
	}
	t.Logf("%d nudges for %d writes in %v", got, writes, elapsed)
}

// TestNudge_oneMemberNone: a cluster of one has no follower to tell, and
// appends no nudge after its commands.
func TestNudge_oneMemberNone(t *testing.T) {
	m := startMember(t, "solo", nil)
	if err := m.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: m.id, Address: raft.ServerAddress(m.addr)}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, m)
	for i := range 3 {
		if err := m.c.Propose(testCtx(t), fmt.Appendf(nil, "solo-%d", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * DefaultNudgeInterval)
	}
	if got := m.c.nudges.Load(); got != 0 {
		t.Fatalf("a cluster of one appended %d nudges", got)
	}
}

// TestNudge_firstAtOnce: a write that comes when no nudge went for
// NudgeInterval is nudged at once: with the interval at 5 s, followers
// apply it well within it.
func TestNudge_firstAtOnce(t *testing.T) {
	const interval = 5 * time.Second
	ms := startTunedCluster(t, func(c *Config) { c.NudgeInterval = interval }, quietRaft)
	leader := waitLeader(t, ms...)
	time.Sleep(interval + interval/5) // past the term's nudge
	if err := leader.c.Propose(testCtx(t), []byte("lone")); err != nil {
		t.Fatal(err)
	}
	at := leader.sm.indexOf("lone")
	for _, f := range followers(ms, leader) {
		testutil.EventuallyTrue(t, interval/2, f.name+" applies the lone write", func() bool {
			return f.sm.indexOf("lone") == at
		})
	}
}
