package raftkv

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"chute/internal/setting"
	"chute/kv/raftpeer"
)

// TestConfig_Validate names each field that cannot work.
func TestConfig_Validate(t *testing.T) {
	err := Config{ApplyTimeout: -1, MaxCommandBytes: -1, NudgeInterval: -1}.Validate()
	want := map[string]bool{"Raft": true, "Answers": true, "SM": true, "MemberID": true, "ApplyTimeout": true, "MaxCommandBytes": true, "NudgeInterval": true}
	var fields []*setting.FieldError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *setting.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a FieldError", e)
		}
		fields = append(fields, fe)
	}
	if len(fields) != len(want) {
		t.Fatalf("got %v, want errors for %v", err, want)
	}
	for _, fe := range fields {
		if !want[fe.Field] || fe.Pkg != "raftkv" {
			t.Errorf("unexpected error %v", fe)
		}
	}
	ok := Config{Raft: &raft.Raft{}, Answers: &raftpeer.Transport{}, SM: newTestSM(), MemberID: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate of a complete config: %v", err)
	}
	if d := ok.withDefaults(); d.ApplyTimeout != DefaultApplyTimeout || d.MaxCommandBytes != DefaultMaxCommandBytes || d.NudgeInterval != DefaultNudgeInterval || d.Logger == nil {
		t.Fatalf("withDefaults = %+v", d)
	}
}

// TestVoterOf finds a member's voter and skips non-voters.
func TestVoterOf(t *testing.T) {
	cfg := raft.Configuration{Servers: []raft.Server{
		{ID: "0000000000000001-aaaaaaaa", Address: "a:1", Suffrage: raft.Voter},
		{ID: "0000000000000002-bbbbbbbb", Address: "b:1", Suffrage: raft.Nonvoter},
		{ID: "0000000000000013-cccccccc", Address: "c:1", Suffrage: raft.Voter},
	}}
	if id, addr, ok := voterOf(cfg, 1); !ok || id != "0000000000000001-aaaaaaaa" || addr != "a:1" {
		t.Errorf("voterOf(1) = %q, %q, %v", id, addr, ok)
	}
	for _, m := range []uint64{2, 3, 0x13 << 4} {
		if _, _, ok := voterOf(cfg, m); ok {
			t.Errorf("voterOf(%x) found a voter", m)
		}
	}
}
