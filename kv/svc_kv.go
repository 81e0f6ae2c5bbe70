package kv

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// kvService is etcd's KV service: check the request, run it on the store,
// map the error, fill the header.
type kvService struct {
	pb.UnimplementedKVServer
	store  *store
	limits limits
	queues Queues // nil: no queue namespace; every key is plain KV
}

var _ pb.KVServer = (*kvService)(nil)

func (k *kvService) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := k.limits.checkRange(r); err != nil {
		return nil, toGRPC(err)
	}
	resp, rev, err := k.store.Range(r)
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = k.store.header(rev)
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
	resp, rev, err := k.store.Put(r)
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = k.store.header(rev)
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
	resp, rev, err := k.store.DeleteRange(r)
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = k.store.header(rev)
	return resp, nil
}

func (k *kvService) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := k.limits.checkTxn(r); err != nil {
		return nil, toGRPC(err)
	}
	if k.txnQueueKeys(r) {
		return k.produceTxn(ctx, r)
	}
	if err := k.checkTxnValues(r); err != nil {
		return nil, err
	}
	resp, rev, err := k.store.Txn(r)
	if err != nil {
		return nil, toGRPC(err)
	}
	resp.Header = k.store.header(rev)
	return resp, nil
}

func (k *kvService) Compact(_ context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	if err := k.store.compact(r.Revision); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.CompactionResponse{Header: k.store.header(k.store.currentRev())}, nil
}
