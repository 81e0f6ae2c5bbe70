package raftpeer

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

// TestDecodeRequest_refusesWhatRaftPanicsOn: requests that decode but
// that hashicorp/raft would panic on (a null entry, a configuration it
// cannot decode in an entry or a snapshot, the peer changes of before
// configurations) are refused as malformed, before
// raft sees them; a good configuration entry passes.
func TestDecodeRequest_refusesWhatRaftPanicsOn(t *testing.T) {
	tr := newTransport(t, testutil.FreeAddr(t), nil)
	good := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "a:1"}}})
	entries := func(logs ...*raft.Log) any {
		return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, Term: 5, Entries: logs}
	}
	snapshot := func(version raft.SnapshotVersion, conf []byte) any {
		return &raft.InstallSnapshotRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax},
			SnapshotVersion: version, Term: 5, LastLogIndex: 10, LastLogTerm: 5, Configuration: conf, Size: 1}
	}
	for _, tc := range []struct {
		name string
		req  any
		bad  bool
	}{
		{"null entry", entries(nil), true},
		{"undecodable configuration entry", entries(&raft.Log{Index: 1, Term: 5, Type: raft.LogConfiguration, Data: []byte{0xc1}}), true},
		{"peer change of before configurations", entries(&raft.Log{Index: 1, Term: 5, Type: raft.LogAddPeerDeprecated, Data: []byte{0xc1}}), true},
		{"undecodable snapshot configuration", snapshot(raft.SnapshotVersionMax, []byte{0xc1}), true},
		{"good configuration entry", entries(&raft.Log{Index: 1, Term: 5, Type: raft.LogConfiguration, Data: good}), false},
		{"good snapshot", snapshot(raft.SnapshotVersionMax, good), false},
	} {
		b, err := tr.encode(tc.req)
		if err != nil {
			t.Fatalf("%s: encode: %v", tc.name, err)
		}
		var out any
		switch tc.req.(type) {
		case *raft.AppendEntriesRequest:
			out = &raft.AppendEntriesRequest{}
		default:
			out = &raft.InstallSnapshotRequest{}
		}
		err = tr.decodeRequest(b, out)
		if tc.bad && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", tc.name, err)
		}
		if !tc.bad && err != nil {
			t.Errorf("%s: got %v, want it accepted", tc.name, err)
		}
	}
}
