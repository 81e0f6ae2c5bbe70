package raftnode

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

func member3(id string, status Status, state bool, expect int) Member {
	return Member{Addr: raft.ServerAddress(id + ":1"), Status: status, Tags: Tags(raft.ServerID(id), expect, state)}
}

func TestBootstrapConfiguration(t *testing.T) {
	alive := func(id string) Member { return member3(id, StatusAlive, false, 3) }
	tests := []struct {
		name    string
		self    string
		members []Member
		want    []raft.ServerID // nil: no bootstrap
	}{
		{"too few", "a", []Member{alive("a"), alive("b")}, nil},
		{"three", "b", []Member{alive("c"), alive("a"), alive("b")}, []raft.ServerID{"a", "b", "c"}},
		{"failed ones do not count", "a", []Member{alive("a"), alive("b"), member3("c", StatusFailed, false, 3)}, nil},
		{"lowest three", "a", []Member{alive("d"), alive("a"), alive("b"), alive("c")}, []raft.ServerID{"a", "b", "c"}},
		{"not among the lowest", "d", []Member{alive("d"), alive("a"), alive("b"), alive("c")}, nil},
		{"a member has state", "a", []Member{alive("a"), alive("b"), alive("c"), member3("z", StatusAlive, true, 3)}, nil},
		{"another expect", "a", []Member{alive("a"), alive("b"), member3("c", StatusAlive, false, 5)}, nil},
		{"no raft tags", "a", []Member{alive("a"), alive("b"), alive("c"), {Addr: "x:1", Status: StatusAlive}}, []raft.ServerID{"a", "b", "c"}},
		// A member seen before it opened its raft stores may have state:
		// its wiped peer, started at the same time, must wait for its tags.
		{"a member still opening its raft", "a", []Member{alive("a"), alive("b"), alive("c"), {Addr: "x:1", Status: StatusAlive, Tags: PendingTags()}}, nil},
		{"a failed member still opening its raft", "a", []Member{alive("a"), alive("b"), alive("c"), {Addr: "x:1", Status: StatusFailed, Tags: PendingTags()}}, []raft.ServerID{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, why := bootstrapConfiguration(raft.ServerID(tt.self), 3, 3, tt.members)
			if tt.want == nil {
				if why == "" {
					t.Fatalf("got %v, want no bootstrap", cfg.Servers)
				}
				return
			}
			if why != "" {
				t.Fatalf("got no bootstrap (%s), want %v", why, tt.want)
			}
			if len(cfg.Servers) != len(tt.want) {
				t.Fatalf("got %v, want %v", cfg.Servers, tt.want)
			}
			for i, s := range cfg.Servers {
				if s.ID != tt.want[i] || s.Suffrage != raft.Voter {
					t.Fatalf("got %v, want voters %v", cfg.Servers, tt.want)
				}
			}
		})
	}
}

// TestBootstrapConfiguration_waitsForPendingPeer: with the default
// expect of 1, a member whose data dir is gone, started together with
// the others, sees a peer alive before the peer's tags tell it has raft
// state: it must wait for them rather than bootstrap a cluster of its own.
func TestBootstrapConfiguration_waitsForPendingPeer(t *testing.T) {
	self := member3("a", StatusAlive, false, 1)
	peer := Member{Addr: "b:1", Status: StatusAlive, Tags: PendingTags()}
	if cfg, why := bootstrapConfiguration("a", 1, 3, []Member{self, peer}); why == "" {
		t.Fatalf("a peer still opening its raft: got a bootstrap of %v, want none", cfg.Servers)
	}
	peer = member3("b", StatusAlive, true, 1) // its tags arrived: it has state
	if cfg, why := bootstrapConfiguration("a", 1, 3, []Member{self, peer}); why == "" {
		t.Fatalf("a peer with raft state: got a bootstrap of %v, want none", cfg.Servers)
	}
}

func TestBootstrapConfiguration_moreThanVoters(t *testing.T) {
	var ms []Member
	for _, id := range []string{"a", "b", "c", "d"} {
		ms = append(ms, member3(id, StatusAlive, false, 4))
	}
	cfg, why := bootstrapConfiguration("a", 4, 3, ms)
	if why != "" {
		t.Fatal(why)
	}
	got := suffrages(cfg)
	want := map[raft.ServerID]raft.ServerSuffrage{"a": raft.Voter, "b": raft.Voter, "c": raft.Voter, "d": raft.Nonvoter}
	if !equalSuffrages(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestPlanChange(t *testing.T) {
	now := time.Unix(1000, 0)
	grace := 30 * time.Second
	srv := func(id string, s raft.ServerSuffrage) raft.Server {
		return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1"), Suffrage: s}
	}
	alive := func(id string) Member { return member3(id, StatusAlive, true, 1) }
	tests := []struct {
		name    string
		servers []raft.Server
		members []Member
		failed  failures
		want    change // zero: none
	}{
		{"in line", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter)},
			[]Member{alive("a"), alive("b")}, nil, change{}},
		{"new voter", []raft.Server{srv("a", raft.Voter)},
			[]Member{alive("a"), alive("b")}, nil, change{kind: addVoter, id: "b"}},
		{"new non-voter", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter), srv("c", raft.Voter)},
			[]Member{alive("a"), alive("b"), alive("c"), alive("d")}, nil, change{kind: addNonvoter, id: "d"}},
		{"left", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter)},
			[]Member{alive("a"), member3("b", StatusLeft, true, 1)}, nil, change{kind: removeServer, id: "b"}},
		{"failed within grace", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter)},
			[]Member{alive("a"), member3("b", StatusFailed, true, 1)}, failures{"b": now.Add(-grace + time.Second)}, change{}},
		{"failed past grace", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter)},
			[]Member{alive("a"), member3("b", StatusFailed, true, 1)}, failures{"b": now.Add(-grace)}, change{kind: removeServer, id: "b"}},
		{"gone past grace", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter)},
			[]Member{alive("a")}, failures{"b": now.Add(-grace)}, change{kind: removeServer, id: "b"}},
		{"replaced at its address", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter)},
			[]Member{alive("a"), {Addr: "b:1", Status: StatusAlive, Tags: Tags("b2", 1, false)}}, nil, change{kind: removeServer, id: "b"}},
		{"promote", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter), srv("d", raft.Nonvoter)},
			[]Member{alive("a"), alive("b"), alive("d")}, nil, change{kind: addVoter, id: "d"}},
		{"never the leader itself", []raft.Server{srv("a", raft.Voter), srv("b", raft.Voter)},
			[]Member{member3("a", StatusLeft, true, 1), alive("b")}, failures{"a": now.Add(-time.Hour)}, change{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := tt.failed
			if failed == nil {
				failed = failures{}
			}
			got, ok := planChange("a", "", raft.Configuration{Servers: tt.servers}, byServerID(tt.members), failed, now, grace, 3)
			if tt.want.kind == 0 {
				if ok {
					t.Fatalf("got %v %s (%s), want no change", got.kind, got.id, got.reason)
				}
				return
			}
			if !ok || got.kind != tt.want.kind || got.id != tt.want.id {
				t.Fatalf("got %v %s (ok %v), want %v %s", got.kind, got.id, ok, tt.want.kind, tt.want.id)
			}
		})
	}
}

// TestPlanChange_foreign: a leader adds no member of another raft
// cluster: one naming another id, or, once the leader has an id, one with
// raft state and none. A member without state joins as a non-voter and
// is promoted once it took the leader's id; a member of the leader's own
// raft cluster (removed, back with its data dir) is a voter at once; a
// server that took another cluster's id is removed.
func TestPlanChange_foreign(t *testing.T) {
	const own, other = "00000000000000c1", "00000000000000c2"
	alone := []raft.Server{{ID: "a", Address: "a:1", Suffrage: raft.Voter}}
	withB := func(s raft.ServerSuffrage) []raft.Server {
		return append(slices.Clone(alone), raft.Server{ID: "b", Address: "b:1", Suffrage: s})
	}
	of := func(state bool, cluster string) Member {
		m := member3("b", StatusAlive, state, 1)
		if cluster != "" {
			m.Tags[TagCluster] = cluster
		}
		return m
	}
	tests := []struct {
		name    string
		own     string
		servers []raft.Server
		b       Member
		want    changeKind // 0: none
		foreign bool       // foreignMembers lists b
	}{
		{"another raft cluster", own, alone, of(true, other), 0, true},
		{"state and no id", own, alone, of(true, ""), 0, true},
		{"leader without id, member with one", "", alone, of(true, other), 0, true},
		{"no state", own, alone, of(false, ""), addNonvoter, false},
		{"own raft cluster", own, alone, of(true, own), addVoter, false},
		{"neither has one", "", alone, of(true, ""), addVoter, false},
		{"non-voter without the id yet", own, withB(raft.Nonvoter), of(true, ""), 0, false},
		{"non-voter that took the id", own, withB(raft.Nonvoter), of(true, own), addVoter, false},
		{"server that took another id", own, withB(raft.Nonvoter), of(true, other), removeServer, false},
		{"voter that took another id", own, withB(raft.Voter), of(true, other), removeServer, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := raft.Configuration{Servers: tt.servers}
			members := byServerID([]Member{member3("a", StatusAlive, true, 1), tt.b})
			got, ok := planChange("a", tt.own, cfg, members, failures{}, time.Unix(1000, 0), time.Minute, 3)
			switch {
			case tt.want == 0 && ok:
				t.Fatalf("got %v %s, want no change", got.kind, got.id)
			case tt.want != 0 && (!ok || got.kind != tt.want || got.id != "b"):
				t.Fatalf("got %v %s (ok %v), want %v b", got.kind, got.id, ok, tt.want)
			}
			if found := foreignMembers(tt.own, cfg, members); (len(found) == 1) != tt.foreign {
				t.Fatalf("foreignMembers: got %v, want b listed: %v", found, tt.foreign)
			}
		})
	}
}

// TestNoteForeign_waitsForMembersWithoutID: a member of another raft
// cluster is logged at once; one with raft state and no id only once it
// stayed so for noIDWait (one of this cluster from before the id takes
// the id within a round), and each once.
func TestNoteForeign_waitsForMembersWithoutID(t *testing.T) {
	const own, other = "00000000000000c1", "00000000000000c2"
	var buf testutil.Buffer
	n := &Node{log: slog.New(slog.NewTextHandler(&buf, nil)), foreign: map[raft.ServerID]foreignNote{}}
	cfg := raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "a:1", Suffrage: raft.Voter}}}
	b, c := member3("b", StatusAlive, true, 1), member3("c", StatusAlive, true, 1)
	c.Tags[TagCluster] = other
	members := byServerID([]Member{member3("a", StatusAlive, true, 1), b, c})
	start := time.Unix(1000, 0)
	logged := func(what string) int { return strings.Count(buf.String(), what) }
	for _, step := range []struct {
		after      time.Duration
		noID, rest int // lines logged so far
	}{
		{0, 0, 1},
		{noIDWait - time.Second, 0, 1},
		{noIDWait, 1, 1},
		{2 * noIDWait, 1, 1},
	} {
		n.noteForeign(own, cfg, members, start.Add(step.after))
		if got := logged("peer=b"); got != step.noID {
			t.Fatalf("after %v: b (state, no id) logged %d times, want %d:\n%s", step.after, got, step.noID, buf.String())
		}
		if got := logged("peer=c"); got != step.rest {
			t.Fatalf("after %v: c (another raft cluster) logged %d times, want %d:\n%s", step.after, got, step.rest, buf.String())
		}
	}
}

func TestFailures_observe(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := raft.Configuration{Servers: []raft.Server{{ID: "a"}, {ID: "b"}}}
	f := failures{"gone": t0}
	members := byServerID([]Member{member3("a", StatusAlive, true, 1), member3("b", StatusFailed, true, 1)})
	f.observe(cfg, members, t0)
	f.observe(cfg, members, t0.Add(time.Second))
	if len(f) != 1 || !f["b"].Equal(t0) {
		t.Fatalf("got %v, want b failed since %v", f, t0)
	}
	members = byServerID([]Member{member3("a", StatusAlive, true, 1), member3("b", StatusAlive, true, 1)})
	f.observe(cfg, members, t0.Add(2*time.Second))
	if len(f) != 0 {
		t.Fatalf("got %v, want none failed", f)
	}
}

func TestConfig_Validate(t *testing.T) {
	var fe *FieldError
	if err := (Config{}).Validate(); !errors.As(err, &fe) {
		t.Fatalf("got %v, want field errors", err)
	}
	cfg := DefaultConfig()
	cfg.Dir, cfg.MemberID, cfg.LocalAddr = "d", 1, "127.0.0.1:1"
	_, tr := raft.NewInmemTransport("")
	cfg.Transport, cfg.FSM, cfg.Members = tr, &countFSM{}, &fakeSource{}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("got %v, want a valid config", err)
	}
	cfg.Voters = 4
	if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != "Voters" {
		t.Fatalf("got %v, want a Voters error", err)
	}
}

// TestMemberOf reads the member id a server id starts with.
func TestMemberOf(t *testing.T) {
	tests := []struct {
		id   raft.ServerID
		want uint64
	}{
		{"a0faff8d2ec0891d-00000abc", 0xa0faff8d2ec0891d},
		{"0000000000000001-deadbeef", 1},
		{"", 0},
		{"a0faff8d2ec0891d", 0},
		{"a0faff8d2ec0891dx00000abc", 0},
		{"zzzzzzzzzzzzzzzz-00000abc", 0},
	}
	for _, tt := range tests {
		if got, ok := MemberOf(tt.id); got != tt.want || ok != (tt.want != 0) {
			t.Errorf("MemberOf(%q) = %x, %v; want %x", tt.id, got, ok, tt.want)
		}
	}
}
