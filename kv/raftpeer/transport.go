package raftpeer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"chute/gossip/peer"
	"chute/gossip/peer/peerpb"
)

// Transport is raft's transport over the peer link: the client side of
// every raft RPC, and the Raft service (Register) that hands received RPCs
// to raft through Consumer. It is safe for concurrent use.
type Transport struct {
	cfg Config
	log *slog.Logger
	mh  *codec.MsgpackHandle // configured once, then only read

	consumeCh chan raft.RPC

	// ctx is cancelled by Close: it ends every call, pipeline and wait.
	ctx    context.Context
	cancel context.CancelFunc

	hbMu        sync.Mutex // guards heartbeatFn
	heartbeatFn func(raft.RPC)

	conns *peer.Conns // to the other members' listeners

	mu        sync.Mutex // guards pipelines and closed
	pipelines map[*pipeline]struct{}
	closed    bool

	answers answers // the AppendEntries requests peers accepted: Accepted

	localID atomic.Pointer[raft.ServerID] // SetLocalID's: the server requests must be for
	cluster atomic.Pointer[raftCluster]   // SetRaftCluster's
}

// raftCluster is what SetRaftCluster was given.
type raftCluster struct {
	get   func() string
	adopt func(string) (string, error)

	mu     sync.Mutex // guards warned
	warned string     // the other cluster's id last logged
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

// New builds a transport. It dials nothing: connections open on first use.
func New(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Transport{
		cfg:       cfg,
		log:       cfg.Logger,
		mh:        msgpackHandle(),
		consumeCh: make(chan raft.RPC),
		ctx:       ctx,
		cancel:    cancel,
		conns:     peer.NewConns(cfg.DialOptions...),
		pipelines: make(map[*pipeline]struct{}),
	}, nil
}

// Register adds the Raft service to a gRPC server, normally the peer
// listener (a peer.Server), before it serves.
func (t *Transport) Register(s grpc.ServiceRegistrar) {
	peerpb.RegisterRaftServer(s, &service{t: t})
}

// Consumer returns the channel of received RPCs. It is never closed.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consumeCh }

// LocalAddr returns Config.LocalAddr.
func (t *Transport) LocalAddr() raft.ServerAddress { return t.cfg.LocalAddr }

// EncodePeer returns addr as bytes.
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

// DecodePeer returns buf as an address.
func (t *Transport) DecodePeer(buf []byte) raft.ServerAddress { return raft.ServerAddress(buf) }

// SetHeartbeatHandler sets the function received heartbeats go to instead
// of Consumer, so that they do not wait behind a disk write. It is called
// on the serving goroutine and must not block long.
func (t *Transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	t.heartbeatFn = cb
}

func (t *Transport) heartbeatHandler() func(raft.RPC) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	return t.heartbeatFn
}

// Close ends every call and pipeline in flight, closes the connections,
// and makes the service answer Unavailable. It is safe to call more than
// once; it always returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.cancel()
	pipes := make([]*pipeline, 0, len(t.pipelines))
	for p := range t.pipelines {
		pipes = append(pipes, p)
	}
	t.mu.Unlock()
	for _, p := range pipes {
		_ = p.Close()
	}
	t.conns.Close()
	return nil
}

// client returns the client of target's listener, dialing it on first use.
func (t *Transport) client(target raft.ServerAddress) (peerpb.RaftClient, error) {
	conn, err := t.conns.Get(string(target))
	if errors.Is(err, peer.ErrConnsClosed) {
		return nil, raft.ErrTransportShutdown
	}
	if err != nil {
		return nil, err
	}
	return peerpb.NewRaftClient(conn), nil
}

// callContext returns a context for one call to a peer: this member's
// identity, ended by Close.
func (t *Transport) callContext(to raft.ServerID) context.Context {
	ctx := peer.OutgoingContext(t.ctx, t.cfg.ClusterID, t.cfg.MemberID)
	if to != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, mdServer, string(to))
	}
	if rc := t.cluster.Load(); rc != nil {
		if id := rc.get(); id != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, mdRaftCluster, id)
		}
	}
	return ctx
}

// mdRaftCluster is the peer metadata that carries the sender's raft
// cluster id, when it has one (SetRaftCluster).
const mdRaftCluster = "chute-raft-cluster"

// maxClusterIDBytes bounds a raft cluster id received; adopt judges its
// form.
const maxClusterIDBytes = 64

// SetRaftCluster gives the transport this member's raft cluster id: get
// returns it ("" while there is none) for every request sent, and
// requests from the servers of another raft cluster are refused
// (ErrOtherCluster). A member without one takes the id of the first
// AppendEntries or InstallSnapshot that carries one, by adopt, which
// returns the id then in force. Requests without an id (from members
// before the id, or from a leader whose id is not set yet) are served.
// Two raft clusters under one cluster name thus never merge: the id
// names the raft cluster a member's state belongs to.
func (t *Transport) SetRaftCluster(get func() string, adopt func(string) (string, error)) {
	t.cluster.Store(&raftCluster{get: get, adopt: adopt})
}

// checkCluster refuses a request whose sender is in another raft cluster
// than this member, and adopts the sender's id when this member has none
// and cmd is a leader's entries or snapshot.
func (t *Transport) checkCluster(ctx context.Context, cmd any) error {
	rc := t.cluster.Load()
	if rc == nil {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(mdRaftCluster)
	if len(vals) == 0 {
		return nil
	}
	if len(vals) > 1 || len(vals[0]) == 0 || len(vals[0]) > maxClusterIDBytes {
		return fmt.Errorf("%w: raft cluster id %.40q", ErrMalformed, vals[0])
	}
	from, own := vals[0], rc.get()
	if own == "" {
		switch cmd.(type) {
		case *raft.AppendEntriesRequest, *raft.InstallSnapshotRequest:
			var err error
			if own, err = rc.adopt(from); err != nil {
				return fmt.Errorf("%w: %w", ErrMalformed, err)
			}
			if own == from {
				t.log.Info("raft cluster id taken from the leader", "raft_cluster", own)
			}
		default:
			return nil
		}
	}
	if from == own {
		return nil
	}
	rc.mu.Lock()
	if rc.warned != from {
		rc.warned = from
		t.log.Error("raft requests of a member of another raft cluster under the same cluster name refused",
			"its_raft_cluster", from, "raft_cluster", own)
	}
	rc.mu.Unlock()
	return fmt.Errorf("%w: the sender is in raft cluster %s, this member in %s", ErrOtherCluster, from, own)
}

// mdServer is the peer metadata that names the raft server a request is
// for: raft sends to an address, and counts the answer (a vote, an
// append) as that server's.
const mdServer = "chute-raft-server"

// SetLocalID makes the transport refuse the requests for any other raft
// server (ErrNotAddressee): a member restarted on an empty data dir
// under its name is a new server at the old one's address, and would
// otherwise answer for the old one, voting with none of its memory (two
// leaders in a term) and acknowledging appends it never kept. Requests
// that name no server (from members before this check) are served.
func (t *Transport) SetLocalID(id raft.ServerID) { t.localID.Store(&id) }

// checkAddressee refuses a request for another server than this one.
func (t *Transport) checkAddressee(ctx context.Context) error {
	local := t.localID.Load()
	if local == nil {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if to := md.Get(mdServer); len(to) > 0 && to[0] != string(*local) {
		return fmt.Errorf("%w: a request for raft server %.80q reached %q (its data dir replaced?)", ErrNotAddressee, to[0], *local)
	}
	return nil
}

// unaryMethod is one of the Raft service's unary methods.
type unaryMethod func(peerpb.RaftClient, context.Context, *peerpb.RaftRequest, ...grpc.CallOption) (*peerpb.RaftResponse, error)

// call sends args to server id at target with method and fills resp,
// within Timeout.
func (t *Transport) call(id raft.ServerID, target raft.ServerAddress, method unaryMethod, args, resp any) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	msg, err := t.encodeRequest(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(t.callContext(id), t.cfg.Timeout)
	defer cancel()
	out, err := method(c, ctx, &peerpb.RaftRequest{Msgpack: msg})
	if err != nil {
		return err
	}
	return t.decodeResponse(out, resp)
}

// AppendEntries sends one AppendEntries request and waits for the answer.
func (t *Transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	seq := t.answers.number()
	if err := t.call(id, target, peerpb.RaftClient.AppendEntries, args, resp); err != nil {
		return err
	}
	t.answers.record(target, args.Term, seq, resp)
	return nil
}

// RequestVote asks target for its vote.
func (t *Transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.call(id, target, peerpb.RaftClient.RequestVote, args, resp)
}

// RequestPreVote asks target whether it would vote.
func (t *Transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.call(id, target, peerpb.RaftClient.RequestPreVote, args, resp)
}

// TimeoutNow tells target to start an election now: a leadership transfer.
func (t *Transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.call(id, target, peerpb.RaftClient.TimeoutNow, args, resp)
}

// InstallSnapshot sends args and then data, read to its end, in chunks of
// SnapshotChunkBytes. The call may last Timeout for every 256 KiB of the
// announced size, at least Timeout, as with raft's NetworkTransport.
func (t *Transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	c, err := t.client(target)
	if err != nil {
		return err
	}
	msg, err := t.encodeRequest(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(t.callContext(id), t.snapshotTimeout(args.Size))
	defer cancel()
	stream, err := c.InstallSnapshot(ctx)
	if err != nil {
		return err
	}
	out, err := sendSnapshot(stream, msg, data, t.cfg.SnapshotChunkBytes)
	if err != nil {
		return err
	}
	return t.decodeResponse(out, resp)
}
