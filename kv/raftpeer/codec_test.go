package raftpeer

import (
	"errors"
	"runtime"
	"testing"
	"time"

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

// TestSnapshotReader_wholeDeadline: chunks that each come within the
// per-chunk timeout do not hold raft's read past the whole snapshot's
// deadline: a peer trickling a byte now and then stalled raft's main
// loop for as long as it liked.
func TestSnapshotReader_wholeDeadline(t *testing.T) {
	r := &snapshotReader{chunks: make(chan []byte), stop: make(chan struct{}),
		timeout: 200 * time.Millisecond, deadline: time.Now().Add(400 * time.Millisecond)}
	quit := make(chan struct{})
	fed := make(chan struct{})
	go func() { // a byte every 50 ms, well within the per-chunk timeout
		defer close(fed)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			select {
			case r.chunks <- []byte{1}:
			case <-quit:
				return
			}
		}
	}()
	defer func() { close(quit); <-fed }()
	start := time.Now()
	var err error
	for n := 0; err == nil && n < 40; n++ { // 2 s of bytes
		_, err = r.Read(make([]byte, 1))
	}
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("reading a trickled snapshot: got %v, want ErrStalled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the read ended after %v; want about the deadline, 400ms", d)
	}
}

// TestDecodeRequest_countsEntriesBeforeMakingThem: an AppendEntries of
// many empty entries (one byte each in msgpack, some 160 bytes decoded)
// is refused as too many without decoding them: the check used to come
// after the decode, so a request within MaxMessageBytes made about 160
// times its size in memory first.
func TestDecodeRequest_countsEntriesBeforeMakingThem(t *testing.T) {
	tr := newTransport(t, testutil.FreeAddr(t), nil)
	const n = 200_000
	b, err := tr.encode(&struct { // each entry an empty map, as a peer may write it
		RPCHeader raft.RPCHeader
		Term      uint64
		Entries   []struct{}
	}{raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, 5, make([]struct{}, n)})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err = tr.decodeRequest(b, &raft.AppendEntriesRequest{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooManyEntries) {
		t.Fatalf("%d entries: got %v, want ErrTooManyEntries", n, err)
	}
	if made := after.TotalAlloc - before.TotalAlloc; made > 4*uint64(len(b))+1<<20 {
		t.Fatalf("refusing a %d-byte request of %d entries allocated %d bytes; want about its size", len(b), n, made)
	}
}

// TestEntriesPerRequest_fits: an AppendEntries of EntriesPerRequest
// entries of the largest command encodes within the message bound, as
// raft's leader sends it (each entry with its term, index, type and
// append time), and is accepted by the receiver's checks.
func TestEntriesPerRequest_fits(t *testing.T) {
	tr := newTransport(t, testutil.FreeAddr(t), nil)
	const entryBytes = 2<<20 + 256<<10 // raftkv.DefaultMaxCommandBytes
	n := EntriesPerRequest(DefaultMaxMessageBytes, entryBytes)
	if n < 16 {
		t.Fatalf("EntriesPerRequest = %d, want at least 16 of %d bytes in %d", n, entryBytes, DefaultMaxMessageBytes)
	}
	data := make([]byte, entryBytes)
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Index: 1<<40 + uint64(i), Term: 1 << 30, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
	}
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: make([]byte, 64), Addr: make([]byte, 64)},
		Term: 1 << 30, PrevLogEntry: 1 << 40, PrevLogTerm: 1 << 30, Entries: logs, LeaderCommitIndex: 1 << 40}
	b, err := tr.encodeRequest(req)
	if err != nil {
		t.Fatalf("%d entries of %d bytes: %v", n, entryBytes, err)
	}
	if err := tr.decodeRequest(b, &raft.AppendEntriesRequest{}); err != nil {
		t.Fatalf("%d entries of %d bytes: refused by the receiver: %v", n, entryBytes, err)
	}
	req.Entries = append(req.Entries, logs[0], logs[1])
	if _, err := tr.encodeRequest(req); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("%d entries: got %v, want ErrMessageTooLarge (the count is not far below the bound)", n+2, err)
	}
}
