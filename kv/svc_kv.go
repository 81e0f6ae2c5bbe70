package kv

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"chute/kv/mvcc"
)

// kvService is etcd's KV service: check the request, run it on the store,
// map the error, fill the header.
type kvService struct {
	pb.UnimplementedKVServer
	srv    *Server
	store  *mvcc.Store
	limits limits
	queues Queues // nil: no queue namespace; every key is plain KV
}

var _ pb.KVServer = (*kvService)(nil)

func (k *kvService) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := k.limits.checkRange(r); err != nil {
		return nil, toGRPC(err)
	}
	if !r.Serializable {
		if err := k.srv.linearize(ctx); err != nil {
			return nil, toGRPC(err)
		}
	}
	resp, rev, err := k.store.Range(r)
	if err == nil {
		err = k.srv.authMoved(ctx)
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = k.store.Header(rev)
	return resp, nil
}

// RangeStream answers with the whole range in one chunk; clients merge
// chunks, so one is a valid stream.
func (k *kvService) RangeStream(r *pb.RangeRequest, stream grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	resp, err := k.Range(stream.Context(), r)
	if err != nil {
		return err
	}
	return stream.Send(&pb.RangeStreamResponse{RangeResponse: resp})
}

func (k *kvService) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := k.limits.checkPut(r); err != nil {
		return nil, toGRPC(err)
	}
	if rt := k.route(r.Key); !plainRoute(rt) {
		return k.putToQueue(ctx, r, rt)
	}
	if err := k.checkPutValue(r); err != nil {
		return nil, err
	}
	res := k.srv.writeClient(ctx, &pb.InternalRaftRequest{Put: r})
	if res.Err != nil {
		return nil, toGRPC(res.Err)
	}
	resp := res.Resp.(*pb.PutResponse)
	resp.Header = k.store.Header(res.Rev)
	return resp, nil
}

func (k *kvService) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if err := k.limits.checkDelete(r); err != nil {
		return nil, toGRPC(err)
	}
	if len(r.RangeEnd) == 0 {
		if rt := k.route(r.Key); !plainRoute(rt) {
			return k.deleteInQueue(ctx, r, rt)
		}
	}
	res := k.srv.writeClient(ctx, &pb.InternalRaftRequest{DeleteRange: r})
	if res.Err != nil {
		return nil, toGRPC(res.Err)
	}
	resp := res.Resp.(*pb.DeleteRangeResponse)
	resp.Header = k.store.Header(res.Rev)
	return resp, nil
}

func (k *kvService) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := k.limits.checkTxnRequest(r); err != nil {
		return nil, toGRPC(err)
	}
	if k.txnQueueKeys(r) {
		return k.produceTxn(ctx, r)
	}
	if err := k.checkTxnValues(r); err != nil {
		return nil, err
	}
	if txnReadOnly(r) {
		// Compares and reads only: served here at a linearizable point,
		// as etcd serves a read-only txn, without a log entry.
		if err := k.srv.linearize(ctx); err != nil {
			return nil, toGRPC(err)
		}
		resp, rev, err := k.store.Txn(r)
		if err == nil {
			err = k.srv.authMoved(ctx)
		}
		if err != nil {
			return nil, toGRPC(err)
		}
		resp.Header = k.store.Header(rev)
		return resp, nil
	}
	res := k.srv.writeClient(ctx, &pb.InternalRaftRequest{Txn: r})
	if res.Err != nil {
		return nil, toGRPC(res.Err)
	}
	resp := res.Resp.(*pb.TxnResponse)
	resp.Header = k.store.Header(res.Rev)
	return resp, nil
}

// txnReadOnly reports whether no branch of r, nested ones included,
// writes.
func txnReadOnly(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestPut, *pb.RequestOp_RequestDeleteRange:
				return false
			case *pb.RequestOp_RequestTxn:
				if !txnReadOnly(o.RequestTxn) {
					return false
				}
			}
		}
	}
	return true
}

func (k *kvService) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	res := k.srv.write(ctx, &pb.InternalRaftRequest{Compaction: r})
	if res.Err != nil {
		return nil, toGRPC(res.Err)
	}
	return &pb.CompactionResponse{Header: k.store.Header(res.Rev)}, nil
}
