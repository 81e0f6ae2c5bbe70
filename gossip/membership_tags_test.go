package gossip

import (
	"errors"
	"strings"
	"testing"
	"time"

	"chute/internal/testutil"
)

// TestMembership_SetTags checks that tags another package publishes reach
// the other members as an update and in Member.Tags, replace the ones set
// before, and that chute's own tags can be neither overwritten nor pushed
// past serf's size limit.
func TestMembership_SetTags(t *testing.T) {
	a, b, _ := startTrio(t, 21, nil)
	tape := tapeEvents(t, b)
	if err := a.SetTags(map[string]string{"raft": "1", "expect": "3"}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, settle, "b to see a's tags", func() bool {
		m, ok := b.Member(a.Local().ID)
		return ok && m.Tags["raft"] == "1" && m.Tags["expect"] == "3" && len(m.Tags) == 2
	})
	// The event reaches subscribers after serf updated the member.
	testutil.EventuallyTrue(t, settle, "b to get an update event for a", func() bool { return tape.has(EventUpdate, "a") })
	if err := a.SetTags(map[string]string{"raft": "0"}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, settle, "b to see a's tags replaced", func() bool {
		m, ok := b.Member(a.Local().ID)
		return ok && m.Tags["raft"] == "0" && len(m.Tags) == 1
	})
	if m, _ := b.Member(a.Local().ID); len(m.PeerURLs) != len(a.cfg.PeerURLs) || m.Version != a.cfg.Version {
		t.Fatalf("a's own tags changed with SetTags: %+v", m)
	}

	if err := a.SetTags(map[string]string{"cluster": "other"}); !errors.Is(err, ErrReservedTag) {
		t.Fatalf("overwriting the cluster tag: got %v, want ErrReservedTag", err)
	}
	if err := a.SetTags(map[string]string{"big": strings.Repeat("x", 600)}); !errors.Is(err, ErrTagsTooLarge) {
		t.Fatalf("600 bytes of tags: got %v, want ErrTagsTooLarge", err)
	}
	if got := a.Local().Tags; len(got) != 1 || got["raft"] != "0" {
		t.Fatalf("a refused SetTags changed a's tags: %v", got)
	}
}

// TestMembership_startTags: Config.Tags are published from the node's
// first gossip on, beside its own, until SetTags replaces them.
func TestMembership_startTags(t *testing.T) {
	a, b, _ := startTrio(t, 22, func(c *Config) { c.Tags = map[string]string{"raft": "?"} })
	m, ok := b.Member(a.Local().ID)
	if !ok || m.Tags["raft"] != "?" || len(m.Tags) != 1 || m.Version != "test-1" {
		t.Fatalf("a as b saw it when they joined: %+v, %v; want the tag raft=? and a's own", m, ok)
	}
	if err := a.SetTags(map[string]string{"raft": "1"}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, settle, "b to see a's start tags replaced", func() bool {
		m, ok := b.Member(a.Local().ID)
		return ok && m.Tags["raft"] == "1" && len(m.Tags) == 1
	})
}

// TestMembership_SetTags_broadcastSlow: SetTags succeeds when serf gives
// up waiting for the update's broadcast to go out (a starved gossip loop
// on a loaded machine once made a restarted node exit so): the tags are
// set and gossip carries them to the others.
func TestMembership_SetTags_broadcastSlow(t *testing.T) {
	a, b, _ := startTrio(t, 23, nil)
	a.serfConf.BroadcastTimeout = time.Nanosecond // the broadcast cannot be out in time
	if err := a.SetTags(map[string]string{"raft": "1"}); err != nil {
		t.Fatalf("SetTags with a broadcast not out in time: %v, want nil", err)
	}
	if got := a.Local().Tags; got["raft"] != "1" {
		t.Fatalf("a's own tags: %v, want raft=1", got)
	}
	testutil.EventuallyTrue(t, settle, "b to see a's tags", func() bool {
		m, ok := b.Member(a.Local().ID)
		return ok && m.Tags["raft"] == "1"
	})
}

// TestMembership_MarkLeaving: a member that began to stop says so to the
// others (Member.Leaving, Peer.Leaving), keeping the tags set before,
// and a later SetTags keeps saying it.
func TestMembership_MarkLeaving(t *testing.T) {
	a, b, _ := startTrio(t, 23, nil)
	if err := a.SetTags(map[string]string{"raft": "1"}); err != nil {
		t.Fatal(err)
	}
	leaving := func() bool {
		m, ok := b.Member(a.Local().ID)
		if !ok || !m.Leaving || m.Tags["raft"] == "" {
			return false
		}
		for _, p := range b.Peers() {
			if p.ID == a.Local().ID {
				return p.Leaving
			}
		}
		return false
	}
	if m, _ := b.Member(a.Local().ID); m.Leaving {
		t.Fatal("a leaving before MarkLeaving")
	}
	if err := a.MarkLeaving(); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, settle, "b to see a leaving, its raft tag kept", leaving)
	if err := a.SetTags(map[string]string{"raft": "2"}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyTrue(t, settle, "b to see a's new tag", func() bool {
		m, _ := b.Member(a.Local().ID)
		return m.Tags["raft"] == "2"
	})
	if !leaving() {
		t.Fatal("a SetTags after MarkLeaving dropped the leaving tag")
	}
	if err := a.SetTags(map[string]string{"leaving": "0"}); !errors.Is(err, ErrReservedTag) {
		t.Fatalf("SetTags of the leaving tag: got %v, want ErrReservedTag", err)
	}
}
