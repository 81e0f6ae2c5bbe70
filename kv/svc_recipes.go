package kv

import (
	"bytes"
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv/mvcc"
	"chute/kv/v3electionpb"
	"chute/kv/v3lockpb"
)

// etcd's Lock and Election services run etcd's client recipes
// (clientv3/concurrency's Mutex and Election) on the server, so that
// clients without them (jetcd, Rust's etcd-client) lock and elect by one
// call. The keys are the recipes' own: a holder's key is the name, "/",
// and its lease in hex, created with the lease; the oldest key under the
// name holds the lock or leads. A clientv3 Mutex and a Lock call on one
// name therefore exclude each other.
//
// Each step is a KV call of this server, checked as the caller's own
// (recipes.callAs): the caller needs write on the name's keys to lock or
// campaign, read to see the leader, as with the recipes in a client.

// recipeLeaseTTL is the TTL of the lease a Lock or Campaign without one
// gets, as etcd's session grants it; nobody keeps it alive.
const recipeLeaseTTL = 60

// Errors of etcd's recipes, with the messages clients see from etcd
// (which returns them as unknown gRPC errors).
var (
	errNotLeader     = status.Error(codes.Unknown, "election: not leader")
	errNoLeader      = status.Error(codes.Unknown, "election: no leader")
	errLockExpired   = status.Error(codes.Unknown, "mutex: session is expired")
	errMissingLeader = status.Error(codes.Unknown, `"leader" field must be provided`)
)

// recipes runs the recipes' steps as KV calls of the caller.
type recipes struct {
	srv   *Server
	kv    *kvService
	lease *leaseService
	z     *authorizer
}

// callAs checks req as the authorizer checks a call of ctx's caller,
// then runs do.
func callAs[Req, Resp any](r *recipes, ctx context.Context, req Req, do func(context.Context, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	u, on, err := r.z.authenticate(ctx)
	if err != nil {
		return zero, toGRPC(err)
	}
	if on {
		if ctx, err = r.z.checked(ctx, u, req); err != nil {
			return zero, toGRPC(err)
		}
	}
	return do(ctx, req)
}

func (r *recipes) txn(ctx context.Context, t *pb.TxnRequest) (*pb.TxnResponse, error) {
	return callAs(r, ctx, t, r.kv.Txn)
}

func (r *recipes) get(ctx context.Context, g *pb.RangeRequest) (*pb.RangeResponse, error) {
	return callAs(r, ctx, g, r.kv.Range)
}

// recipeErr is err as etcd's lock and election services return it: they
// run the recipe through a client of their own, whose errors reach the
// caller with gRPC code Unknown and etcd's message ("etcdserver:
// requested lease not found"), where chute's KV steps kept their own
// codes (NotFound, InvalidArgument). A context's end keeps its code.
func recipeErr(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	switch st.Code() {
	case codes.Unknown, codes.Canceled, codes.DeadlineExceeded:
		return err
	}
	return status.Error(codes.Unknown, st.Message())
}

// holder is a caller's place under a lock's or an election's name.
type holder struct {
	pfx, key []byte // the name's prefix, and the caller's key under it
	lease    int64
}

// holderOf returns the place of the caller with lease under name; for
// lease 0 the caller gets a new lease of recipeLeaseTTL.
func (r *recipes) holderOf(ctx context.Context, name []byte, lease int64) (holder, error) {
	if lease == 0 {
		g, err := callAs(r, ctx, &pb.LeaseGrantRequest{TTL: recipeLeaseTTL}, r.lease.LeaseGrant)
		if err != nil {
			return holder{}, err
		}
		lease = g.ID
	}
	pfx := prefixOf(name)
	return holder{pfx: pfx, key: holderKey(pfx, lease), lease: lease}, nil
}

// holderKey is the key of the holder with lease under pfx.
func holderKey(pfx []byte, lease int64) []byte {
	return fmt.Appendf(bytes.Clone(pfx), "%x", lease)
}

// prefixOf is name's key prefix: name and "/".
func prefixOf(name []byte) []byte { return append(bytes.Clone(name), '/') }

// oldest reads the key under pfx created first.
func oldest(pfx []byte) *pb.RangeRequest {
	return &pb.RangeRequest{Key: pfx, RangeEnd: mvcc.PrefixEnd(pfx), Limit: 1,
		SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_CREATE}
}

// place is where join left the caller: its key's create revision (rev),
// the value it held before (was) unless join created it (created), the
// create revision of the oldest key under the name (first; rev: the
// caller holds the lock or leads), and the header.
type place struct {
	rev, first int64
	was        []byte
	created    bool
	hdr        *pb.ResponseHeader
}

// join creates h's key with value and h's lease unless it exists (the
// same lease holding it already), and reads the oldest key under the
// name.
func (r *recipes) join(ctx context.Context, h holder, value []byte) (place, error) {
	t, err := r.txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: h.key, Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}},
		Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: h.key, Value: value, Lease: h.lease}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: oldest(h.pfx)}},
		},
		Failure: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: h.key}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: oldest(h.pfx)}},
		},
	})
	if err != nil {
		return place{}, err
	}
	p := place{rev: t.Header.Revision, created: t.Succeeded, hdr: t.Header}
	if !t.Succeeded {
		kvs := t.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return place{}, errLockExpired // gone between compare and read: cannot be
		}
		p.rev, p.was = kvs[0].CreateRevision, kvs[0].Value
	}
	if kvs := t.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		p.first = kvs[0].CreateRevision
	}
	return p, nil
}

// waitAhead returns once no key under pfx created before rev is left: the
// holders ahead of the caller's key are gone. It reads the newest of
// them, waits for its deletion, and again.
func (r *recipes) waitAhead(ctx context.Context, pfx []byte, rev int64) (*pb.ResponseHeader, error) {
	for {
		g, err := r.get(ctx, &pb.RangeRequest{Key: pfx, RangeEnd: mvcc.PrefixEnd(pfx), Limit: 1, MaxCreateRevision: rev - 1,
			SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_CREATE})
		if err != nil {
			return nil, err
		}
		if len(g.Kvs) == 0 {
			return g.Header, nil
		}
		w := r.srv.watchInternal(&pb.WatchCreateRequest{Key: g.Kvs[0].Key, StartRevision: g.Header.Revision + 1,
			Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}})
		err = w.next(ctx, r.srv.stop)
		w.stop()
		if err != nil {
			return nil, err
		}
	}
}

// release deletes key if it was created at rev, after the caller gave up
// (its context ended): with a context of its own, bounded.
func (r *recipes) release(ctx context.Context, key []byte, rev int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), internalWriteTimeout)
	defer cancel()
	_, _ = r.deleteIf(ctx, key, rev)
}

// deleteIf deletes key if it was created at rev.
func (r *recipes) deleteIf(ctx context.Context, key []byte, rev int64) (*pb.TxnResponse, error) {
	return r.txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: key, Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: rev}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: key}}}},
	})
}

// lockService serves etcd's Lock API with clientv3's Mutex.
type lockService struct {
	v3lockpb.UnimplementedLockServer
	r *recipes
}

func (l *lockService) Lock(ctx context.Context, req *v3lockpb.LockRequest) (*v3lockpb.LockResponse, error) {
	resp, err := l.lock(ctx, req)
	return resp, recipeErr(err)
}

func (l *lockService) lock(ctx context.Context, req *v3lockpb.LockRequest) (*v3lockpb.LockResponse, error) {
	h, err := l.r.holderOf(ctx, req.Name, req.Lease)
	if err != nil {
		return nil, err
	}
	p, err := l.r.join(ctx, h, nil)
	if err != nil {
		return nil, err
	}
	rev, hdr := p.rev, p.hdr
	if p.first != rev {
		if _, err := l.r.waitAhead(ctx, h.pfx, rev); err != nil {
			l.r.release(ctx, h.key, rev)
			return nil, err
		}
		// The lease may have ended while the caller waited.
		g, err := l.r.get(ctx, &pb.RangeRequest{Key: h.key})
		if err != nil {
			return nil, err
		}
		if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != rev {
			return nil, errLockExpired
		}
		hdr = g.Header
	}
	return &v3lockpb.LockResponse{Header: lockHeader(hdr), Key: h.key}, nil
}

func (l *lockService) Unlock(ctx context.Context, req *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	resp, err := l.unlock(ctx, req)
	return resp, recipeErr(err)
}

func (l *lockService) unlock(ctx context.Context, req *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	d, err := callAs(l.r, ctx, &pb.DeleteRangeRequest{Key: req.Key}, l.r.kv.DeleteRange)
	if err != nil {
		return nil, err
	}
	return &v3lockpb.UnlockResponse{Header: lockHeader(d.Header)}, nil
}

func lockHeader(h *pb.ResponseHeader) *v3lockpb.ResponseHeader {
	return &v3lockpb.ResponseHeader{ClusterId: h.ClusterId, MemberId: h.MemberId, Revision: h.Revision, RaftTerm: h.RaftTerm}
}

// electionService serves etcd's Election API with clientv3's Election.
type electionService struct {
	v3electionpb.UnimplementedElectionServer
	r *recipes
}

func (e *electionService) Campaign(ctx context.Context, req *v3electionpb.CampaignRequest) (*v3electionpb.CampaignResponse, error) {
	resp, err := e.campaign(ctx, req)
	return resp, recipeErr(err)
}

func (e *electionService) campaign(ctx context.Context, req *v3electionpb.CampaignRequest) (*v3electionpb.CampaignResponse, error) {
	h, err := e.r.holderOf(ctx, req.Name, req.Lease)
	if err != nil {
		return nil, err
	}
	p, err := e.r.join(ctx, h, req.Value)
	if err != nil {
		return nil, err
	}
	// The header is the campaign's own write's, or its proclaim's, as
	// etcd's Campaign answers: not the read that saw the way clear.
	rev, hdr := p.rev, p.hdr
	if !p.created && !bytes.Equal(p.was, req.Value) {
		if hdr, err = e.proclaim(ctx, h.key, rev, h.lease, req.Value); err != nil {
			e.r.release(ctx, h.key, rev)
			return nil, err
		}
	}
	if _, err := e.r.waitAhead(ctx, h.pfx, rev); err != nil {
		if ctx.Err() != nil {
			e.r.release(ctx, h.key, rev)
		}
		return nil, err
	}
	return &v3electionpb.CampaignResponse{Header: electionHeader(hdr),
		Leader: &v3electionpb.LeaderKey{Name: req.Name, Key: h.key, Rev: rev, Lease: h.lease}}, nil
}

// proclaim puts value to key if it was created at rev: the caller still
// leads.
func (e *electionService) proclaim(ctx context.Context, key []byte, rev, lease int64, value []byte) (*pb.ResponseHeader, error) {
	t, err := e.r.txn(ctx, &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: key, Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: rev}}},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Value: value, Lease: lease}}}},
	})
	if err != nil {
		return nil, err
	}
	if !t.Succeeded {
		return nil, errNotLeader
	}
	return t.Header, nil
}

func (e *electionService) Proclaim(ctx context.Context, req *v3electionpb.ProclaimRequest) (*v3electionpb.ProclaimResponse, error) {
	resp, err := e.proclaimCall(ctx, req)
	return resp, recipeErr(err)
}

func (e *electionService) proclaimCall(ctx context.Context, req *v3electionpb.ProclaimRequest) (*v3electionpb.ProclaimResponse, error) {
	if req.Leader == nil {
		return nil, errMissingLeader
	}
	lease := req.Leader.Lease
	if lease == 0 {
		// etcd proclaims in a session of the leader's lease, and a
		// session of lease 0 grants one of 60 s that nobody keeps
		// alive: put with lease 0, the leader's key lost its lease and
		// never went, and every other candidate waited for ever.
		g, err := callAs(e.r, ctx, &pb.LeaseGrantRequest{TTL: recipeLeaseTTL}, e.r.lease.LeaseGrant)
		if err != nil {
			return nil, err
		}
		lease = g.ID
	}
	hdr, err := e.proclaim(ctx, req.Leader.Key, req.Leader.Rev, lease, req.Value)
	if err != nil {
		return nil, err
	}
	return &v3electionpb.ProclaimResponse{Header: electionHeader(hdr)}, nil
}

func (e *electionService) Resign(ctx context.Context, req *v3electionpb.ResignRequest) (*v3electionpb.ResignResponse, error) {
	resp, err := e.resign(ctx, req)
	return resp, recipeErr(err)
}

func (e *electionService) resign(ctx context.Context, req *v3electionpb.ResignRequest) (*v3electionpb.ResignResponse, error) {
	if req.Leader == nil {
		return nil, errMissingLeader
	}
	t, err := e.r.deleteIf(ctx, req.Leader.Key, req.Leader.Rev)
	if err != nil {
		return nil, err
	}
	return &v3electionpb.ResignResponse{Header: electionHeader(t.Header)}, nil
}

func (e *electionService) Leader(ctx context.Context, req *v3electionpb.LeaderRequest) (*v3electionpb.LeaderResponse, error) {
	resp, err := e.leader(ctx, req)
	return resp, recipeErr(err)
}

func (e *electionService) leader(ctx context.Context, req *v3electionpb.LeaderRequest) (*v3electionpb.LeaderResponse, error) {
	g, err := e.r.get(ctx, oldest(prefixOf(req.Name)))
	if err != nil {
		return nil, err
	}
	if len(g.Kvs) == 0 {
		return nil, errNoLeader
	}
	return &v3electionpb.LeaderResponse{Header: electionHeader(g.Header), Kv: electionKV(g.Kvs[0])}, nil
}

// Observe sends the leader's key and value, then each new value it
// proclaims, then the next leader's, until the caller goes.
func (e *electionService) Observe(req *v3electionpb.LeaderRequest, stream grpc.ServerStreamingServer[v3electionpb.LeaderResponse]) error {
	return recipeErr(e.observe(req, stream))
}

func (e *electionService) observe(req *v3electionpb.LeaderRequest, stream grpc.ServerStreamingServer[v3electionpb.LeaderResponse]) error {
	ctx := stream.Context()
	pfx := prefixOf(req.Name)
	for {
		g, err := e.r.get(ctx, oldest(pfx))
		if err != nil {
			return err
		}
		if len(g.Kvs) == 0 {
			// No leader: wait for a key under the name, then read again.
			w := e.r.srv.watchInternal(&pb.WatchCreateRequest{Key: pfx, RangeEnd: mvcc.PrefixEnd(pfx), StartRevision: g.Header.Revision + 1,
				Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}})
			err := w.next(ctx, e.r.srv.stop)
			w.stop()
			if err != nil {
				return err
			}
			continue
		}
		leader := g.Kvs[0]
		if err := stream.Send(&v3electionpb.LeaderResponse{Header: electionHeader(g.Header), Kv: electionKV(leader)}); err != nil {
			return err
		}
		if err := e.follow(ctx, stream, leader.Key, g.Header.Revision); err != nil {
			return err
		}
	}
}

// follow sends each new value of the leader's key after rev until it is
// deleted.
func (e *electionService) follow(ctx context.Context, stream grpc.ServerStreamingServer[v3electionpb.LeaderResponse], key []byte, rev int64) error {
	w := e.r.srv.watchInternal(&pb.WatchCreateRequest{Key: key, StartRevision: rev + 1})
	defer w.stop()
	for {
		resp, err := w.recv(ctx, e.r.srv.stop)
		if err != nil {
			return err
		}
		if resp.CompactRevision != 0 {
			return nil // history gone: read the leader again
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
			hdr := &pb.ResponseHeader{ClusterId: resp.Header.GetClusterId(), MemberId: resp.Header.GetMemberId(), Revision: ev.Kv.ModRevision, RaftTerm: resp.Header.GetRaftTerm()}
			if err := stream.Send(&v3electionpb.LeaderResponse{Header: electionHeader(hdr), Kv: electionKV(ev.Kv)}); err != nil {
				return err
			}
		}
	}
}

func electionHeader(h *pb.ResponseHeader) *v3electionpb.ResponseHeader {
	return &v3electionpb.ResponseHeader{ClusterId: h.ClusterId, MemberId: h.MemberId, Revision: h.Revision, RaftTerm: h.RaftTerm}
}

func electionKV(kv *mvccpb.KeyValue) *v3electionpb.KeyValue {
	return &v3electionpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
}

// internalWatch is a watcher of the store for a recipe: its responses
// go to a small buffer; when it is full the store holds them back and
// feeds them again from history, as for a slow watch stream. The store's
// cancel of the watcher (its history compacted while it was behind) has
// a slot of its own: dropped when the buffer was full, it left a recipe
// waiting for ever on a watcher the store no longer fed (Observe after a
// compaction).
type internalWatch struct {
	sink  internalSink
	stopF func()
}

// watchSignalBuffer is how many responses an internal watcher holds.
const watchSignalBuffer = 16

// internalSink is an internal watcher's buffer and its cancel's slot.
type internalSink struct {
	ch       chan *pb.WatchResponse
	canceled chan *pb.WatchResponse // capacity 1
}

func (c internalSink) PushEvents(resp *pb.WatchResponse) bool {
	select {
	case c.ch <- resp:
		return true
	default:
		return false
	}
}

func (c internalSink) PushControl(resp *pb.WatchResponse) {
	if resp.Canceled || resp.CompactRevision != 0 {
		select {
		case c.canceled <- resp:
		default: // a cancel is there already: the watcher is gone
		}
		return
	}
	select {
	case c.ch <- resp:
	default: // full: the events waiting wake the recipe anyway
	}
}

// watchInternal registers a watcher of cr with the store.
func (s *Server) watchInternal(cr *pb.WatchCreateRequest) *internalWatch {
	sink := internalSink{ch: make(chan *pb.WatchResponse, watchSignalBuffer), canceled: make(chan *pb.WatchResponse, 1)}
	w := s.store.Watch(0, cr, sink)
	return &internalWatch{sink: sink, stopF: func() { s.store.Unwatch(w) }}
}

// recv returns the watcher's next response: the cancel only once the
// responses before it are taken.
func (w *internalWatch) recv(ctx context.Context, stop <-chan struct{}) (*pb.WatchResponse, error) {
	select {
	case resp := <-w.sink.ch:
		return resp, nil
	default:
	}
	select {
	case resp := <-w.sink.ch:
		return resp, nil
	case resp := <-w.sink.canceled:
		select {
		case first := <-w.sink.ch: // came in meanwhile, before the cancel
			select {
			case w.sink.canceled <- resp:
			default: // another cancel took the slot: one is enough
			}
			return first, nil
		default:
		}
		return resp, nil
	case <-ctx.Done():
		return nil, toGRPC(ctx.Err())
	case <-stop:
		return nil, toGRPC(ErrStopped)
	}
}

// next waits for the watcher's next response, whatever it holds.
func (w *internalWatch) next(ctx context.Context, stop <-chan struct{}) error {
	_, err := w.recv(ctx, stop)
	return err
}

func (w *internalWatch) stop() { w.stopF() }
