package raftnode

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

// The tests here assert what must not happen before a span of real time
// (a grace period, unanswered seeds), so they wait for it on the real clock.

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
	cmds := applyOn(t, w, "x", 5)
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
	cmds = append(cmds, applyOn(t, w, "y", 3)...)
	for _, m := range ms {
		if m != victim {
			waitApplied(t, m, cmds)
		}
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
