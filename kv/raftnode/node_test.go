package raftnode

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

// TestNode_bootstrapExpect_anyOrder starts three members expecting three
// in each order, each appearing to the others as it starts: exactly one
// cluster of the three comes up, with one leader.
func TestNode_bootstrapExpect_anyOrder(t *testing.T) {
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			w := &world{}
			ms := []*member{newMember(t, w, "a"), newMember(t, w, "b"), newMember(t, w, "c")}
			for i, idx := range order {
				ms[idx].start(t, w, true, func(c *Config) { c.BootstrapExpect = 3 })
				if i < len(order)-1 {
					time.Sleep(300 * time.Millisecond) // the started ones look at a partial world
					if n := ms[idx].node; n.HasState() {
						t.Fatalf("%s bootstrapped with %d of 3 members", ms[idx].name, i+1)
					}
				}
			}
			leader := waitLeader(t, w)
			want := map[raft.ServerID]raft.ServerSuffrage{}
			for _, m := range ms {
				want[m.node.ID()] = raft.Voter
			}
			waitConfiguration(t, w, want)
			cmds := applyOn(t, leader, "x", 3)
			for _, m := range ms {
				waitApplied(t, m, cmds)
				if got := strings.Count(m.log.String(), "bootstrapped raft cluster"); got > 1 {
					t.Errorf("%s bootstrapped %d times", m.name, got)
				}
			}
		})
	}
}

// TestNode_growAndReplace grows a default (expect 1) cluster one member
// at a time: the first bootstraps alone, the next two become voters, the
// fourth a non-voter. A voter killed is removed once the grace period
// has passed and the non-voter promoted.
func TestNode_growAndReplace(t *testing.T) {
	w := &world{}
	ms := []*member{newMember(t, w, "a"), newMember(t, w, "b"), newMember(t, w, "c"), newMember(t, w, "d")}
	ms[0].start(t, w, true, nil)
	waitLeader(t, w)
	want := map[raft.ServerID]raft.ServerSuffrage{ms[0].node.ID(): raft.Voter}
	waitConfiguration(t, w, want)
	for _, m := range ms[1:3] {
		m.start(t, w, true, nil)
		want[m.node.ID()] = raft.Voter
		waitConfiguration(t, w, want)
	}
	ms[3].start(t, w, true, nil)
	want[ms[3].node.ID()] = raft.Nonvoter
	waitConfiguration(t, w, want)
	leader := waitLeader(t, w)
	cmds := applyOn(t, leader, "x", 5)
	for _, m := range ms {
		waitApplied(t, m, cmds)
		if m != ms[0] && strings.Contains(m.log.String(), "bootstrapped raft cluster") {
			t.Errorf("%s bootstrapped; want it added by the leader", m.name)
		}
	}

	// Kill a voter that does not lead.
	var victim *member
	for _, m := range ms[:3] {
		if m.node != leader {
			victim = m
			break
		}
	}
	killed := time.Now()
	victim.kill(t, w)
	grace := 2 * time.Second // start's DeadServerGrace
	time.Sleep(grace / 4)
	if cfg, err := leader.Configuration(); err != nil {
		t.Fatal(err)
	} else if _, ok := suffrages(cfg)[victim.node.ID()]; !ok {
		t.Fatalf("%s removed %v after it failed, before the grace period", victim.name, time.Since(killed))
	}
	delete(want, victim.node.ID())
	want[ms[3].node.ID()] = raft.Voter
	waitConfiguration(t, w, want)
	if took := time.Since(killed); took < grace {
		t.Fatalf("replaced after %v, want after the grace period %v", took, grace)
	}
	cmds = append(cmds, applyOn(t, waitLeader(t, w), "y", 3)...)
	for _, m := range ms {
		if m != victim {
			waitApplied(t, m, cmds)
		}
	}
}

// TestNode_restart restarts a cluster of three on its data dirs (their
// logs and configuration come back, no second bootstrap), then one
// member on a wiped data dir (it is a new server, and the old one is
// removed at once).
func TestNode_restart(t *testing.T) {
	w := &world{}
	ms := []*member{newMember(t, w, "a"), newMember(t, w, "b"), newMember(t, w, "c")}
	want := map[raft.ServerID]raft.ServerSuffrage{}
	for _, m := range ms {
		m.start(t, w, true, nil)
		want[m.node.ID()] = raft.Voter
		waitConfiguration(t, w, want)
	}
	cmds := applyOn(t, waitLeader(t, w), "x", 5)
	for _, m := range ms {
		waitApplied(t, m, cmds)
	}

	// The whole cluster goes down and comes back on its data dirs.
	ids := make([]raft.ServerID, len(ms))
	for i, m := range ms {
		ids[i] = m.node.ID()
		m.kill(t, w)
	}
	bootstraps := strings.Count(ms[0].log.String(), "bootstrapped raft cluster")
	for i, m := range ms {
		m.start(t, w, true, nil)
		if !m.node.HasState() {
			t.Fatalf("%s restarted without raft state", m.name)
		}
		if m.node.ID() != ids[i] {
			t.Fatalf("%s restarted as %s, want %s", m.name, m.node.ID(), ids[i])
		}
	}
	waitConfiguration(t, w, want)
	for _, m := range ms {
		waitApplied(t, m, cmds)
	}
	if got := strings.Count(ms[0].log.String(), "bootstrapped raft cluster"); got != bootstraps {
		t.Fatalf("a bootstrapped again on restart")
	}

	// b comes back on a wiped data dir: a new server at the old address.
	b := ms[1]
	oldB := b.node.ID()
	b.kill(t, w)
	if err := os.RemoveAll(b.dir); err != nil {
		t.Fatal(err)
	}
	b.start(t, w, true, nil)
	if b.node.ID() == oldB {
		t.Fatalf("b kept its server id %s on a wiped data dir", oldB)
	}
	delete(want, oldB)
	want[b.node.ID()] = raft.Voter
	waitConfiguration(t, w, want)
	cmds = append(cmds, applyOn(t, waitLeader(t, w), "y", 2)...)
	for _, m := range ms {
		waitApplied(t, m, cmds)
	}
}

// TestNode_seedsUnanswered: a member whose seeds have not answered does
// not bootstrap, even expecting only itself, until one answers.
func TestNode_seedsUnanswered(t *testing.T) {
	w := &world{}
	m := newMember(t, w, "a")
	src := m.start(t, w, false, nil)
	time.Sleep(time.Second) // ten reconcile intervals
	if m.node.HasState() || m.node.Raft().LastIndex() != 0 {
		t.Fatal("bootstrapped before a seed answered")
	}
	src.answer()
	testutil.EventuallyTrue(t, 30*time.Second, "bootstrap once a seed answered", m.node.HasState)
	waitLeader(t, w)
}
