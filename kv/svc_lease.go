package kv

import (
	"context"
	"errors"
	"io"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"chute/kv/mvcc"
)

// leaseService is etcd's Lease service.
type leaseService struct {
	pb.UnimplementedLeaseServer
	srv    *Server
	store  *mvcc.Store
	minTTL int64           // Config.MinLeaseTTL: shorter grants are raised to it
	wg     *sync.WaitGroup // the server's: receive loops are waited for at shutdown
	stop   <-chan struct{}
}

var _ pb.LeaseServer = (*leaseService)(nil)

// leaseGrantAttempts bounds the ids tried for a grant that lets the server
// choose: an id this member chose may meet one another member granted
// meanwhile.
const leaseGrantAttempts = 3

// LeaseGrant decides what depends on this member before proposing: the
// TTL raised to its minimum, and the id when the client lets the server
// choose. Whether the id is free is decided when the grant is applied.
func (l *leaseService) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if r.TTL > mvcc.MaxLeaseTTL {
		return nil, toGRPC(mvcc.ErrLeaseTTLTooBig)
	}
	ttl := max(r.TTL, l.minTTL)
	for attempt := 1; ; attempt++ {
		id := r.ID
		if id == 0 {
			id = l.store.ChooseLeaseID()
		}
		res := l.srv.write(ctx, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: id, TTL: ttl}})
		if errors.Is(res.Err, mvcc.ErrLeaseExists) && r.ID == 0 && attempt < leaseGrantAttempts {
			continue
		}
		if res.Err != nil {
			return nil, toGRPC(res.Err)
		}
		resp := res.Resp.(*pb.LeaseGrantResponse)
		resp.Header = l.store.Header(res.Rev)
		return resp, nil
	}
}

func (l *leaseService) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	res := l.srv.writeClient(ctx, &pb.InternalRaftRequest{LeaseRevoke: r})
	if res.Err != nil {
		return nil, toGRPC(res.Err)
	}
	return &pb.LeaseRevokeResponse{Header: l.store.Header(res.Rev)}, nil
}

// keepAlivesInFlight bounds the renewals of one keep-alive stream made at
// once. clientv3 sends every lease's keep-alive on one stream: renewed
// one after another, each waiting for its checkpoint's commit (5 ms to
// gather, then raft), a client keeping a few hundred leases alive fell
// behind and its leases expired.
const keepAlivesInFlight = 256

// LeaseKeepAlive renews each lease the client names; a lease that is gone is
// answered with TTL 0, as etcd does. Renewals of one stream run at once,
// up to keepAlivesInFlight, and are answered as each is done. It returns
// when the client goes or the server stops, so a shutdown never waits for
// idle keep-alive streams.
func (l *leaseService) LeaseKeepAlive(stream grpc.BidiStreamingServer[pb.LeaseKeepAliveRequest, pb.LeaseKeepAliveResponse]) error {
	reqs := make(chan *pb.LeaseKeepAliveRequest)
	recvErr := make(chan error, 1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-stream.Context().Done():
				recvErr <- stream.Context().Err()
				return
			}
		}
	}()
	// The renewals end before the handler returns (a Send after it is not
	// allowed): ctx is cancelled first, then they are waited for.
	var renewals sync.WaitGroup
	defer renewals.Wait()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	var sendMu sync.Mutex
	failed := make(chan error, 1)
	fail := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	slots := make(chan struct{}, keepAlivesInFlight)
	for {
		var req *pb.LeaseKeepAliveRequest
		select {
		case req = <-reqs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				// The client sent all it will (the JSON gateway posts one
				// request and closes; python-etcd3's refresh_lease
				// too): the renewals under way are answered first, as
				// etcd answers them. They ended unanswered.
				done := make(chan struct{})
				go func() {
					renewals.Wait()
					close(done)
				}()
				select {
				case <-done:
				case <-l.stop:
				case <-ctx.Done():
				}
				return nil
			}
			return err
		case err := <-failed:
			return err
		case <-l.stop:
			return toGRPC(ErrStopped)
		case <-ctx.Done(): // an interceptor may end it (requireleader.go)
			return ctx.Err()
		}
		select {
		case slots <- struct{}{}:
		case err := <-failed:
			return err
		case <-l.stop:
			return toGRPC(ErrStopped)
		case <-ctx.Done():
			return ctx.Err()
		}
		renewals.Add(1)
		go func() {
			defer renewals.Done()
			defer func() { <-slots }()
			ttl, err := l.srv.renewLease(ctx, req.ID)
			if err != nil && !errors.Is(err, mvcc.ErrLeaseNotFound) {
				fail(toGRPC(err))
				return
			}
			resp := &pb.LeaseKeepAliveResponse{Header: l.store.Header(l.store.Rev()), ID: req.ID, TTL: ttl}
			sendMu.Lock()
			defer sendMu.Unlock()
			if ctx.Err() != nil {
				return // the handler is returning
			}
			if err := stream.Send(resp); err != nil {
				fail(err)
			}
		}()
	}
}

// LeaseTimeToLive reports a lease; a lease that is gone has TTL -1, as etcd
// reports it.
func (l *leaseService) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	if err := l.srv.linearize(ctx); err != nil {
		return nil, toGRPC(err)
	}
	info, err := l.store.TimeToLive(r.ID, r.Keys)
	hdr := l.store.Header(l.store.Rev())
	if errors.Is(err, mvcc.ErrLeaseNotFound) {
		return &pb.LeaseTimeToLiveResponse{Header: hdr, ID: r.ID, TTL: -1}, nil
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.LeaseTimeToLiveResponse{Header: hdr, ID: info.ID, TTL: info.TTL, GrantedTTL: info.GrantedTTL, Keys: info.Keys}, nil
}

func (l *leaseService) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	if err := l.srv.linearize(ctx); err != nil {
		return nil, toGRPC(err)
	}
	ids := l.store.LeaseIDs()
	resp := &pb.LeaseLeasesResponse{Header: l.store.Header(l.store.Rev()), Leases: make([]*pb.LeaseStatus, len(ids))}
	for i, id := range ids {
		resp.Leases[i] = &pb.LeaseStatus{ID: id}
	}
	return resp, nil
}
