package raftpeer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
	"chute/internal/testutil"
)

// fakeRaft answers what a transport's Consumer yields as raft would, with
// canned answers, until the test ends.
type fakeRaft struct {
	mu       sync.Mutex // guards got, snapshot, readErr
	got      []any      // the commands received, in order
	snapshot []byte     // the last snapshot read
	readErr  error      // the error reading it, if any
}

func serveFake(t *testing.T, tr *Transport) *fakeRaft {
	t.Helper()
	f := &fakeRaft{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case rpc := <-tr.Consumer():
				f.answer(rpc)
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	return f
}

func (f *fakeRaft) answer(rpc raft.RPC) {
	f.mu.Lock()
	f.got = append(f.got, rpc.Command)
	f.mu.Unlock()
	switch c := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		rpc.Respond(&raft.AppendEntriesResponse{Term: c.Term, LastLog: c.PrevLogEntry + uint64(len(c.Entries)), Success: true}, nil)
	case *raft.RequestVoteRequest:
		var err error
		if c.Term == unluckyTerm {
			err = errors.New("unlucky term")
		}
		rpc.Respond(&raft.RequestVoteResponse{Term: c.Term, Granted: err == nil}, err)
	case *raft.RequestPreVoteRequest:
		rpc.Respond(&raft.RequestPreVoteResponse{Term: c.Term, Granted: true}, nil)
	case *raft.TimeoutNowRequest:
		rpc.Respond(&raft.TimeoutNowResponse{}, nil)
	case *raft.InstallSnapshotRequest:
		data, err := io.ReadAll(rpc.Reader)
		f.mu.Lock()
		f.snapshot, f.readErr = data, err
		f.mu.Unlock()
		rpc.Respond(&raft.InstallSnapshotResponse{Term: c.Term, Success: err == nil}, err)
	default:
		rpc.Respond(nil, errors.New("unexpected command"))
	}
}

// unluckyTerm is a term fakeRaft refuses to vote in, with an error.
const unluckyTerm = 13

// all returns the commands received so far.
func (f *fakeRaft) all() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]any(nil), f.got...)
}

func (f *fakeRaft) last() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) == 0 {
		return nil
	}
	return f.got[len(f.got)-1]
}

func (f *fakeRaft) snapshotRead() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshot, f.readErr
}

func entries(n, size int) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		out[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)}
	}
	return out
}

func TestTransport_roundTrips(t *testing.T) {
	server := servedTransport(t, func(c *Config) { c.SnapshotChunkBytes = 1000 })
	fake := serveFake(t, server)
	client := newTransport(t, testutil.FreeAddr(t), func(c *Config) { c.SnapshotChunkBytes = 1000 })
	target := server.LocalAddr()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("client"), Addr: []byte(client.LocalAddr())}

	t.Run("AppendEntries", func(t *testing.T) {
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3, PrevLogEntry: 10, PrevLogTerm: 2, Entries: entries(5, 100), LeaderCommitIndex: 9}
		var resp raft.AppendEntriesResponse
		if err := client.AppendEntries("s", target, req, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Term != 3 || resp.LastLog != 15 || !resp.Success {
			t.Fatalf("got %+v, want term 3, last log 15, success", resp)
		}
		got, ok := fake.last().(*raft.AppendEntriesRequest)
		if !ok || len(got.Entries) != 5 || !bytes.Equal(got.Entries[4].Data, req.Entries[4].Data) || string(got.Addr) != string(hdr.Addr) {
			t.Fatalf("server got %+v, want the request sent", fake.last())
		}
	})
	t.Run("RequestVote", func(t *testing.T) {
		var resp raft.RequestVoteResponse
		if err := client.RequestVote("s", target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 4}, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Term != 4 || !resp.Granted {
			t.Fatalf("got %+v, want term 4, granted", resp)
		}
	})
	t.Run("RequestPreVote", func(t *testing.T) {
		var resp raft.RequestPreVoteResponse
		if err := client.RequestPreVote("s", target, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 5}, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Term != 5 || !resp.Granted {
			t.Fatalf("got %+v, want term 5, granted", resp)
		}
	})
	t.Run("TimeoutNow", func(t *testing.T) {
		var resp raft.TimeoutNowResponse
		if err := client.TimeoutNow("s", target, &raft.TimeoutNowRequest{RPCHeader: hdr}, &resp); err != nil {
			t.Fatal(err)
		}
		if _, ok := fake.last().(*raft.TimeoutNowRequest); !ok {
			t.Fatalf("server got %T, want TimeoutNow", fake.last())
		}
	})
	t.Run("heartbeat", func(t *testing.T) {
		beats := make(chan uint64, 1)
		server.SetHeartbeatHandler(func(rpc raft.RPC) {
			c := rpc.Command.(*raft.AppendEntriesRequest)
			beats <- c.Term
			rpc.Respond(&raft.AppendEntriesResponse{Term: c.Term, Success: true}, nil)
		})
		defer server.SetHeartbeatHandler(nil)
		var resp raft.AppendEntriesResponse
		if err := client.AppendEntries("s", target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7}, &resp); err != nil {
			t.Fatal(err)
		}
		if got := <-beats; got != 7 || resp.Term != 7 {
			t.Fatalf("handler got term %d, answer %+v; want 7 both", got, resp)
		}
	})
	t.Run("InstallSnapshot", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789"), 350) // 3.5 chunks
		req := &raft.InstallSnapshotRequest{RPCHeader: hdr, Term: 6, LastLogIndex: 100, Size: int64(len(data))}
		var resp raft.InstallSnapshotResponse
		if err := client.InstallSnapshot("s", target, req, &resp, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		got, err := fake.snapshotRead()
		if err != nil || !bytes.Equal(got, data) || !resp.Success {
			t.Fatalf("server read %d bytes, err %v, answer %+v; want %d bytes, success", len(got), err, resp, len(data))
		}
	})
	t.Run("pipeline", func(t *testing.T) {
		p, err := client.AppendEntriesPipeline("s", target)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = p.Close() }()
		const n = 20
		sent := make(chan error, 1)
		go func() { // raft sends and consumes on two goroutines too
			for i := range n {
				req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 8, PrevLogEntry: uint64(i * 10), Entries: entries(1, 10), LeaderCommitIndex: 1}
				if _, err := p.AppendEntries(req, &raft.AppendEntriesResponse{}); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		timeout := time.After(10 * time.Second)
		for i := range n {
			select {
			case f := <-p.Consumer():
				if err := f.Error(); err != nil {
					t.Fatal(err)
				}
				if want := uint64(i*10 + 1); f.Response().LastLog != want || f.Request().PrevLogEntry != uint64(i*10) {
					t.Fatalf("answer %d: last log %d, want %d (in order)", i, f.Response().LastLog, want)
				}
			case <-timeout:
				t.Fatalf("answer %d: none within 10s", i)
			}
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("remote error", func(t *testing.T) {
		var resp raft.RequestVoteResponse
		err := client.RequestVote("s", target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: unluckyTerm}, &resp)
		if !errors.Is(err, ErrRemote) || resp.Term != unluckyTerm {
			t.Fatalf("got %v, answer %+v; want ErrRemote and the answer too", err, resp)
		}
	})
	t.Run("unreadable snapshot", func(t *testing.T) {
		req := &raft.InstallSnapshotRequest{RPCHeader: hdr, Term: 6, Size: 10}
		err := client.InstallSnapshot("s", target, req, &raft.InstallSnapshotResponse{}, errReader{})
		if err == nil {
			t.Fatal("got nil, want the read error")
		}
	})
}

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestTransport_pipelineOff(t *testing.T) {
	tr := newTransport(t, testutil.FreeAddr(t), func(c *Config) { c.MaxInFlight = 1 })
	if _, err := tr.AppendEntriesPipeline("s", "127.0.0.1:1"); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("got %v, want ErrPipelineReplicationNotSupported", err)
	}
}

func TestTransport_closed(t *testing.T) {
	tr := newTransport(t, testutil.FreeAddr(t), nil)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	_ = tr.Close()
	err := tr.RequestVote("s", "127.0.0.1:1", &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{})
	if !errors.Is(err, raft.ErrTransportShutdown) {
		t.Fatalf("got %v, want ErrTransportShutdown", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []Config{
		{},
		{LocalAddr: "nohost"},
		{LocalAddr: "127.0.0.1:1", Timeout: -1},
		{LocalAddr: "127.0.0.1:1", MaxEntries: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v): got nil, want an error", c)
		}
	}
}

func TestService_bounds(t *testing.T) {
	server := servedTransport(t, func(c *Config) {
		c.MaxMessageBytes = 4 << 10
		c.MaxEntries = 4
		c.SnapshotChunkBytes = 100
		c.MaxSnapshotBytes = 1000
	})
	fake := serveFake(t, server)
	target := server.LocalAddr()
	client := newTransport(t, testutil.FreeAddr(t), func(c *Config) { c.SnapshotChunkBytes = 100 })
	bigChunks := newTransport(t, testutil.FreeAddr(t), func(c *Config) { c.SnapshotChunkBytes = 200 })

	snapshot := func(tr *Transport, size int64, data []byte) error {
		req := &raft.InstallSnapshotRequest{Term: 1, Size: size}
		return tr.InstallSnapshot("s", target, req, &raft.InstallSnapshotResponse{}, bytes.NewReader(data))
	}
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"message over MaxMessageBytes", func() error {
			req := &raft.AppendEntriesRequest{Term: 1, Entries: entries(1, 8<<10)}
			return client.AppendEntries("s", target, req, &raft.AppendEntriesResponse{})
		}, codes.ResourceExhausted},
		{"entries over MaxEntries", func() error {
			req := &raft.AppendEntriesRequest{Term: 1, Entries: entries(5, 1)}
			return client.AppendEntries("s", target, req, &raft.AppendEntriesResponse{})
		}, codes.ResourceExhausted},
		{"entries over MaxEntries on a pipeline", func() error {
			p, err := client.AppendEntriesPipeline("s", target)
			if err != nil {
				return err
			}
			defer func() { _ = p.Close() }()
			f, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1, Entries: entries(5, 1)}, &raft.AppendEntriesResponse{})
			if err != nil {
				return err
			}
			return f.Error()
		}, codes.ResourceExhausted},
		{"snapshot longer than announced", func() error { return snapshot(client, 150, make([]byte, 250)) }, codes.InvalidArgument},
		{"snapshot longer by a whole chunk", func() error { return snapshot(client, 100, make([]byte, 200)) }, codes.InvalidArgument},
		{"snapshot shorter than announced", func() error { return snapshot(client, 250, make([]byte, 150)) }, codes.InvalidArgument},
		{"snapshot announced over MaxSnapshotBytes", func() error { return snapshot(client, 1001, make([]byte, 1001)) }, codes.ResourceExhausted},
		{"negative snapshot size", func() error { return snapshot(client, -1, nil) }, codes.ResourceExhausted},
		{"chunk over SnapshotChunkBytes", func() error { return snapshot(bigChunks, 200, make([]byte, 200)) }, codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("raft never reads a wrong-size snapshot whole", func(t *testing.T) {
		_ = snapshot(client, 150, make([]byte, 250))
		if got, err := fake.snapshotRead(); err == nil {
			t.Fatalf("raft read %d bytes without error, want an error", len(got))
		}
	})
	t.Run("within bounds", func(t *testing.T) {
		if err := snapshot(client, 1000, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		req := &raft.AppendEntriesRequest{Term: 1, Entries: entries(4, 100)}
		if err := client.AppendEntries("s", target, req, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTransport_sendTooLarge(t *testing.T) {
	tr := newTransport(t, testutil.FreeAddr(t), func(c *Config) { c.MaxMessageBytes = 1 << 10 })
	req := &raft.AppendEntriesRequest{Term: 1, Entries: entries(1, 2<<10)}
	err := tr.AppendEntries("s", "127.0.0.1:1", req, &raft.AppendEntriesResponse{})
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("got %v, want ErrMessageTooLarge before sending", err)
	}
}

func TestService_consumerStalled(t *testing.T) {
	server := servedTransport(t, func(c *Config) { c.Timeout = 100 * time.Millisecond })
	client := newTransport(t, testutil.FreeAddr(t), nil) // nobody consumes server's RPCs
	err := client.RequestVote("s", server.LocalAddr(), &raft.RequestVoteRequest{Term: 1}, &raft.RequestVoteResponse{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", err)
	}
}

// TestService_callerRefused: the peer listener refuses raft calls without
// this cluster's id, before the transport sees them.
func TestService_callerRefused(t *testing.T) {
	server := servedTransport(t, nil)
	fake := serveFake(t, server)
	conn, err := peer.Dial(string(server.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := server.encode(&raft.RequestVoteRequest{Term: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{
		"no metadata":     ctx,
		"another cluster": peer.OutgoingContext(ctx, gossip.ClusterID("other"), 1),
	} {
		_, err := peerpb.NewRaftClient(conn).RequestVote(ctx, &peerpb.RaftRequest{Msgpack: msg})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: got %v, want PermissionDenied", name, err)
		}
	}
	other := newTransport(t, testutil.FreeAddr(t), func(c *Config) { c.ClusterID = gossip.ClusterID("other") })
	err = other.RequestVote("s", server.LocalAddr(), &raft.RequestVoteRequest{Term: 1}, &raft.RequestVoteResponse{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("transport of another cluster: got %v, want PermissionDenied", err)
	}
	if got := fake.last(); got != nil {
		t.Fatalf("raft got %T from a refused caller, want nothing", got)
	}
}

// TestTransport_requestsForAnotherServer: a transport given its server
// id refuses every request for another server (a member whose data dir
// was replaced under its name, at the old server's address), heartbeats
// and pipelines and snapshots included, before raft sees them, and
// serves the requests for itself and those that name no server.
func TestTransport_requestsForAnotherServer(t *testing.T) {
	server := servedTransport(t, nil)
	fake := serveFake(t, server)
	server.SetLocalID("new")
	client := newTransport(t, testutil.FreeAddr(t), nil)
	target := server.LocalAddr()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("client"), Addr: []byte(client.LocalAddr())}
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `"old"`) {
			t.Errorf("%s for server old: got %v, want FailedPrecondition naming it", what, err)
		}
	}
	var vote raft.RequestVoteResponse
	refused("RequestVote", client.RequestVote("old", target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 4}, &vote))
	sendEveryKind(t, client, "old", target, hdr, 3, refused)
	if n := len(fake.all()); n != 0 {
		t.Fatalf("raft got %d requests for another server", n)
	}
	if err := client.RequestVote("new", target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 4}, &vote); err != nil || !vote.Granted {
		t.Fatalf("RequestVote for server new: %+v %v, want served", vote, err)
	}
	if err := client.RequestVote("", target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 5}, &vote); err != nil || !vote.Granted {
		t.Fatalf("RequestVote naming no server: %+v %v, want served", vote, err)
	}
}

// clusterIDs is a member's raft cluster id as raftnode keeps it: set
// once, by adopt.
type clusterIDs struct {
	mu      sync.Mutex
	id      string
	adopted int
}

func (c *clusterIDs) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id
}

func (c *clusterIDs) adopt(id string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id == "" {
		c.id, c.adopted = id, c.adopted+1
	}
	return c.id, nil
}

// TestTransport_requestsFromAnotherRaftCluster: a member of one raft
// cluster refuses every request of another's servers (same cluster name,
// so the peer listener lets them in) before raft sees them; a member
// without a raft cluster id takes the first one a leader's entries carry,
// not a candidate's, and then refuses the others. Requests that carry
// none are served.
func TestTransport_requestsFromAnotherRaftCluster(t *testing.T) {
	const own, other = "00000000000000d1", "00000000000000d2"
	server := servedTransport(t, nil)
	fake := serveFake(t, server)
	ids := &clusterIDs{}
	server.SetRaftCluster(ids.get, ids.adopt)
	target := server.LocalAddr()
	client := func(id string) *Transport {
		c := newTransport(t, testutil.FreeAddr(t), nil)
		if id != "" {
			c.SetRaftCluster(func() string { return id }, func(string) (string, error) { return id, nil })
		}
		return c
	}
	ours, theirs, old := client(own), client(other), client("")
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("client"), Addr: []byte("client:1")}
	var vote raft.RequestVoteResponse
	if err := theirs.RequestVote("", target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 4}, &vote); err != nil {
		t.Fatalf("a vote request before this member has an id: %v, want served", err)
	}
	if got := ids.get(); got != "" {
		t.Fatalf("a candidate's id %q taken", got)
	}
	var app raft.AppendEntriesResponse
	if err := ours.AppendEntries("", target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 5, Entries: entries(1, 10)}, &app); err != nil {
		t.Fatalf("the first leader's entries: %v", err)
	}
	if got := ids.get(); got != own {
		t.Fatalf("id %q after a leader's entries, want %q", got, own)
	}
	served := len(fake.all())
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), other) {
			t.Errorf("%s from raft cluster %s: got %v, want FailedPrecondition naming it", what, other, err)
		}
	}
	sendEveryKind(t, theirs, "", target, hdr, 6, refused)
	if n := len(fake.all()); n != served {
		t.Fatalf("raft got %d requests of another raft cluster", n-served)
	}
	if ids.get() != own || ids.adopted != 1 {
		t.Fatalf("id %q adopted %d times, want %q once", ids.get(), ids.adopted, own)
	}
	// An id past any raft cluster id's length, to a member without one,
	// is refused as malformed and not taken.
	fresh := servedTransport(t, nil)
	serveFake(t, fresh)
	freshIDs := &clusterIDs{}
	fresh.SetRaftCluster(freshIDs.get, freshIDs.adopt)
	long := client(strings.Repeat("e", maxClusterIDBytes+1))
	if err := long.AppendEntries("", fresh.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 5, Entries: entries(1, 10)}, &app); err == nil || !strings.Contains(err.Error(), ErrMalformed.Error()) {
		t.Fatalf("entries with an id of %d bytes: %v, want refused as malformed", maxClusterIDBytes+1, err)
	}
	if got := freshIDs.get(); got != "" {
		t.Fatalf("an id of %d bytes taken: %.20q...", len(got), got)
	}
	for _, c := range []*Transport{ours, old} {
		if err := c.AppendEntries("", target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 7, Entries: entries(1, 10)}, &app); err != nil {
			t.Fatalf("entries of this raft cluster, or with no id: %v, want served", err)
		}
	}
}

// sendEveryKind sends to the server at target, as server to, every kind
// of request at term (pre-vote, entries, a heartbeat, a snapshot, and
// entries on a pipeline), and hands each one's error to check.
func sendEveryKind(t *testing.T, c *Transport, to raft.ServerID, target raft.ServerAddress, hdr raft.RPCHeader, term uint64, check func(what string, err error)) {
	t.Helper()
	var pre raft.RequestPreVoteResponse
	check("RequestPreVote", c.RequestPreVote(to, target, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: term + 1}, &pre))
	var app raft.AppendEntriesResponse
	check("AppendEntries", c.AppendEntries(to, target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term, Entries: entries(1, 10)}, &app))
	check("heartbeat", c.AppendEntries(to, target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term}, &app))
	var snap raft.InstallSnapshotResponse
	check("InstallSnapshot", c.InstallSnapshot(to, target, &raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: raft.SnapshotVersionMax, Term: term, Size: 3,
		Configuration: raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "a:1"}}})}, &snap, bytes.NewReader([]byte("abc"))))
	p, err := c.AppendEntriesPipeline(to, target)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	f, err := p.AppendEntries(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: term, Entries: entries(1, 10)}, &raft.AppendEntriesResponse{})
	if err != nil {
		check("a pipeline's AppendEntries", err)
		return
	}
	select {
	case <-p.Consumer():
		check("a pipeline's AppendEntries", f.Error())
	case <-time.After(10 * time.Second):
		t.Error("a pipeline's AppendEntries: no answer in 10s")
	}
}
