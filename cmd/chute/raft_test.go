package main

import (
	"testing"
	"time"

	"chute/gossip"
)

// TestRaftMembers_rememberLeft: a member removed with etcdctl member
// remove while failed is marked left by serf, then forgotten a moment
// later; a raft leader that saw it only as failed, then gone, kept its
// seat for the dead-server grace. raftMembers reports a member that left
// as left for leftMemory after serf forgot it, unless it comes back.
func TestRaftMembers_rememberLeft(t *testing.T) {
	now := time.Unix(1000, 0)
	rm := &raftMembers{left: make(map[string]leftMember), now: func() time.Time { return now }}
	a := gossip.Member{Name: "a", Status: gossip.StatusAlive}
	b := gossip.Member{Name: "b", Status: gossip.StatusFailed, Tags: map[string]string{"raft_id": "x"}}
	statusOf := func(all []gossip.Member, name string) (gossip.Status, bool) {
		for _, m := range all {
			if m.Name == name {
				return m.Status, true
			}
		}
		return 0, false
	}

	rm.note(gossip.Event{Type: gossip.EventLeave, Member: b})
	rm.note(gossip.Event{Type: gossip.EventReap, Member: b})
	all := rm.withLeft([]gossip.Member{a}) // serf forgot b
	if st, ok := statusOf(all, "b"); !ok || st != gossip.StatusLeft {
		t.Fatalf("b, forgotten by serf after it left: %v %v, want left", st, ok)
	}
	for _, m := range all {
		if m.Name == "b" && m.Tags["raft_id"] != "x" {
			t.Errorf("b's tags %v, want its raft tags kept", m.Tags)
		}
	}
	// While serf still lists it, serf's own status is kept.
	if all := rm.withLeft([]gossip.Member{a, {Name: "b", Status: gossip.StatusLeft}}); len(all) != 2 {
		t.Errorf("b listed twice: %v", all)
	}
	now = now.Add(leftMemory + time.Second)
	if _, ok := statusOf(rm.withLeft([]gossip.Member{a}), "b"); ok {
		t.Error("b still reported past leftMemory")
	}

	rm.note(gossip.Event{Type: gossip.EventLeave, Member: b})
	rm.note(gossip.Event{Type: gossip.EventJoin, Member: gossip.Member{Name: "b", Status: gossip.StatusAlive}})
	if _, ok := statusOf(rm.withLeft([]gossip.Member{a}), "b"); ok {
		t.Error("b reported left after it came back")
	}
}
