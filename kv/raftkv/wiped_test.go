package raftkv

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

// TestWipedMember_doesNotVoteAsItsOldServer: a member restarted on an
// empty data dir under its name (a new server id at the old address)
// does not answer for its old server. Before, it granted the old
// server's vote with no memory of it: with m1 down, m2, which missed an
// acknowledged write, was elected by the wiped m3 and the write was
// lost. Now m2 cannot lead until m1 is back, and the write survives.
func TestWipedMember_doesNotVoteAsItsOldServer(t *testing.T) {
	addrs := []string{testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)}
	disks := []*disk{newDisk(), newDisk(), newDisk()}
	ms := make([]*member, 3)
	var servers []raft.Server
	for i := range ms {
		ms[i] = startOn(t, fmt.Sprintf("m%d", i+1), addrs[i], 0xabc, disks[i], nil)
		servers = append(servers, raft.Server{ID: ms[i].id, Address: raft.ServerAddress(ms[i].addr)})
	}
	if err := ms[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	// A transfer asked for in one round may land during the next one's
	// write ("leadership lost while committing"): the write is asked
	// again, and may then be applied twice.
	testutil.Eventually(t, 20*time.Second, "m1 leads and commits a write", func() error {
		leader := waitLeader(t, ms...)
		if leader != ms[0] {
			_ = leader.c.TransferLeader(testCtx(t), ms[0].member)
			return fmt.Errorf("%s leads", leader.name)
		}
		return ms[0].c.Propose(testCtx(t), []byte("before"))
	})
	testutil.Eventually(t, 20*time.Second, "every member applied the same commands", func() error {
		want := ms[0].sm.cmds()
		for _, m := range ms {
			if got := m.sm.cmds(); !slices.Contains(got, "before") || !slices.Equal(got, want) {
				return fmt.Errorf("%s applied %q, %s %q", m.name, got, ms[0].name, want)
			}
		}
		return nil
	})

	ms[1].stop(t) // m2 misses the next write
	// Committed by m1 and m3, whichever leads them: on a loaded machine
	// m1 may step down during the write (a slow heartbeat), and the
	// write is asked again.
	testutil.Eventually(t, 20*time.Second, "the write committed without m2", func() error {
		return waitLeader(t, ms[0], ms[2]).c.Propose(testCtx(t), []byte("acked"))
	})
	ms[2].stop(t) // acknowledged on m1 and m3; then m3's data dir is wiped
	m3 := startOn(t, "m3", addrs[2], 0xdef, newDisk(), nil)
	ms[0].stop(t) // m1 crashes; m2 comes back on its own disk
	m2 := startOn(t, "m2", addrs[1], 0xabc, disks[1], nil)

	// m2 would win within an election or two with m3's old vote.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if m2.raft.State() == raft.Leader {
			t.Fatalf("m2, which missed the acknowledged write, leads with the wiped m3's vote; m2 applied %q", m2.sm.cmds())
		}
		time.Sleep(50 * time.Millisecond)
	}
	m1 := startOn(t, "m1", addrs[0], 0xabc, disks[0], nil)
	// As the write before: the leader may step down during it on a
	// loaded machine (seen under make test: leadership lost while
	// committing), and it is asked again.
	testutil.Eventually(t, 20*time.Second, "a write after m1's return", func() error {
		return waitLeader(t, m1, m2).c.Propose(testCtx(t), []byte("after"))
	})
	testutil.Eventually(t, 20*time.Second, "m1 and m2 apply the acknowledged write", func() error {
		for _, m := range []*member{m1, m2} {
			if got := m.sm.cmds(); !slices.Contains(got, "acked") || !slices.Contains(got, "after") {
				return fmt.Errorf("%s applied %q", m.name, got)
			}
		}
		return nil
	})
	_ = m3
}
