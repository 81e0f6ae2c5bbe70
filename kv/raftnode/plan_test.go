package raftnode

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
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
			got, ok := planChange("a", raft.Configuration{Servers: tt.servers}, byServerID(tt.members), failed, now, grace, 3)
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
