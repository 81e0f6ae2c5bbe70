package kv

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Route says how kv treats a key of the queue namespace (/q/ and /queue/).
type Route int

const (
	// RouteKV is an ordinary key, kept in the store: every key outside the
	// queue namespace, and a queue's dispatcher record.
	RouteKV Route = iota
	// RouteProduce is a producer key: a put is a message, not a key.
	RouteProduce
	// RouteDelivery is a delivery key: a delete acknowledges the message.
	RouteDelivery
	// RouteConsumer is a consumer key: a watch on it consumes the queue.
	// Puts, reads and deletes of it are ordinary KV (consumer records).
	RouteConsumer
	// RouteInvalid is a key under a queue that is none of the above.
	RouteInvalid
	// RouteChecked is an ordinary key whose value Queues.Check validates
	// before a put stores it (a queue's settings, its dispatcher record).
	RouteChecked
)

// Queues serves the queue namespace: messages never enter the store. kv
// calls it for the keys it routes away from the store; the dispatch
// package implements it, so kv never imports dispatch. Errors returned are
// gRPC status errors, passed to the client as they are.
type Queues interface {
	// Route classifies a key. It is pure and cheap: kv calls it on every
	// key of every request.
	Route(key []byte) Route
	// Produce enqueues the values of puts to producer keys, all or none,
	// in order, and returns once the queue holds them.
	Produce(ctx context.Context, puts []*pb.PutRequest) error
	// Check validates the value a put would store under a RouteChecked
	// key; an error (InvalidArgument) refuses the request.
	Check(key, value []byte) error
	// Ack acknowledges the message of a delivery key and reports whether
	// there was one.
	Ack(ctx context.Context, key []byte) (bool, error)
	// Consume registers the watch of a consumer key as a consumer; the
	// queue delivers to d until cancel is called (the watch was cancelled
	// or its stream ended), after which its unacknowledged messages go to
	// other consumers.
	Consume(key []byte, d Deliveries) (cancel func(), err error)
}

// ConsumerChecker is what a Queues implements so that a consumer key it
// would refuse is refused as etcd refuses a watch, before the watch is
// created: Consume's own refusals come after.
type ConsumerChecker interface {
	// CheckConsumer returns the error Consume would refuse key with
	// (InvalidArgument) without registering anything. It is cheap.
	CheckConsumer(key []byte) error
}

// Deliveries receives a consumer's messages as the PUT events of its
// watch. Deliver never blocks and never refuses: the queue bounds how many
// unacknowledged messages a consumer holds.
type Deliveries interface {
	Deliver(kvs []*mvccpb.KeyValue)
}

// Stallable is what a Deliveries implements so that the queue can tell a
// consumer that does not read: messages delivered to it still wait to be
// written to its client when its deliveries expire. Redelivering to it
// would only pile copies up in memory, one per visibility timeout for
// as long as its connection stays open (a frozen process keeps it so).
type Stallable interface {
	// Backlog returns how many messages delivered are not yet written
	// to the client.
	Backlog() int
	// Stall ends the consumer's watch with reason, as the queue has
	// removed it (its messages went to others). It does not block.
	Stall(reason string)
}

// errNotSynced refuses a put to a queue on a member whose key space has
// not caught up since it started: the queue's settings (its ack mode)
// are not known yet.
var errNotSynced = status.Error(codes.Unavailable, "etcdserver: the key space is catching up with the cluster (queue settings not known yet); retry, or use another endpoint")

// errQueueOp is the error for a request that mixes queue keys with others
// or uses them in a way queues do not support.
func errQueueOp(msg string) error {
	return status.Error(codes.InvalidArgument, "etcdserver: "+msg)
}

// route returns the route of key, RouteKV when no Queues is set.
func (k *kvService) route(key []byte) Route {
	if k.queues == nil {
		return RouteKV
	}
	return k.queues.Route(key)
}

// putToQueue handles a put whose key is not plain KV. Messages never go
// through the log, so a NOSPACE alarm refuses them here, as this member
// last applied the alarms: the queue namespace does not wait for raft.
func (k *kvService) putToQueue(ctx context.Context, r *pb.PutRequest, rt Route) (*pb.PutResponse, error) {
	if rt != RouteProduce {
		return nil, errQueueOp("a put under a queue must use a producer key /q/{name}/p/{key}")
	}
	if err := checkProduce(r); err != nil {
		return nil, err
	}
	if !k.srv.Synced() {
		return nil, errNotSynced
	}
	if k.store.NoSpace() {
		return nil, toGRPC(ErrNoSpace)
	}
	if err := k.queues.Produce(ctx, []*pb.PutRequest{r}); err != nil {
		return nil, err
	}
	return &pb.PutResponse{Header: k.store.Header(k.store.Rev())}, nil
}

// checkProduce refuses put options that mean nothing for a message.
func checkProduce(r *pb.PutRequest) error {
	if r.Lease != 0 || r.IgnoreLease || r.IgnoreValue || r.PrevKv {
		return errQueueOp("a message put takes no lease, prev_kv, ignore_value or ignore_lease")
	}
	return nil
}

// deleteInQueue handles a single-key delete whose key is not plain KV.
func (k *kvService) deleteInQueue(ctx context.Context, r *pb.DeleteRangeRequest, rt Route) (*pb.DeleteRangeResponse, error) {
	if rt != RouteDelivery {
		return nil, errQueueOp("only a delivery key /q/{name}/{seq}/{key} can be deleted (acknowledged) under a queue")
	}
	if r.PrevKv {
		return nil, errQueueOp("acknowledging a message takes no prev_kv")
	}
	ok, err := k.queues.Ack(ctx, r.Key)
	if err != nil {
		return nil, err
	}
	resp := &pb.DeleteRangeResponse{Header: k.store.Header(k.store.Rev())}
	if ok {
		resp.Deleted = 1
	}
	return resp, nil
}

// txnQueueKeys reports whether a txn names a key that is not plain KV,
// anywhere in it.
func (k *kvService) txnQueueKeys(r *pb.TxnRequest) bool {
	if k.queues == nil {
		return false
	}
	for _, c := range r.Compare {
		if !plainRoute(k.route(c.Key)) {
			return true
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestPut:
				if !plainRoute(k.route(o.RequestPut.Key)) {
					return true
				}
			case *pb.RequestOp_RequestDeleteRange:
				if !plainRoute(k.route(o.RequestDeleteRange.Key)) && len(o.RequestDeleteRange.RangeEnd) == 0 {
					return true
				}
			case *pb.RequestOp_RequestTxn:
				if k.txnQueueKeys(o.RequestTxn) {
					return true
				}
			}
		}
	}
	return false
}

// plainRoute reports whether keys of rt are stored like any other key.
func plainRoute(rt Route) bool {
	return rt == RouteKV || rt == RouteConsumer || rt == RouteChecked
}

// checkPutValue validates a put to a RouteChecked key; a put that keeps
// the stored value (ignore_value) was checked when that value was put.
func (k *kvService) checkPutValue(r *pb.PutRequest) error {
	if r.IgnoreValue || k.route(r.Key) != RouteChecked {
		return nil
	}
	return k.queues.Check(r.Key, r.Value)
}

// checkTxnValues validates the puts to RouteChecked keys in every branch
// of a txn, nested ones included, before any is applied.
func (k *kvService) checkTxnValues(r *pb.TxnRequest) error {
	if k.queues == nil {
		return nil
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			var err error
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestPut:
				err = k.checkPutValue(o.RequestPut)
			case *pb.RequestOp_RequestTxn:
				err = k.checkTxnValues(o.RequestTxn)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// produceTxn runs a batch produce: a txn whose success ops are all puts to
// producer keys and whose failure branch is empty. Its compares, on plain
// keys only, decide whether the batch is enqueued; they see every write
// acknowledged before the call, as etcd's.
func (k *kvService) produceTxn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	const shape = "a txn with queue keys must be a batch produce: only puts to producer keys in success, none in failure, compares on plain keys only"
	if len(r.Failure) != 0 || len(r.Success) == 0 {
		return nil, errQueueOp(shape)
	}
	for _, c := range r.Compare {
		if !plainRoute(k.route(c.Key)) {
			return nil, errQueueOp(shape)
		}
	}
	puts := make([]*pb.PutRequest, len(r.Success))
	for i, op := range r.Success {
		p, ok := op.Request.(*pb.RequestOp_RequestPut)
		if !ok || k.route(p.RequestPut.Key) != RouteProduce {
			return nil, errQueueOp(shape)
		}
		if err := checkProduce(p.RequestPut); err != nil {
			return nil, err
		}
		puts[i] = p.RequestPut
	}
	if !k.srv.Synced() {
		return nil, errNotSynced
	}
	if k.store.NoSpace() {
		// Whatever the compares say, as etcd refuses a txn with puts.
		return nil, toGRPC(ErrNoSpace)
	}
	if len(r.Compare) > 0 {
		// At a linearizable point, as a read-only txn's compares: a
		// member behind the leader judged them on what it had applied,
		// and a write acknowledged before the txn could be missed.
		if err := k.srv.linearize(ctx); err != nil {
			return nil, toGRPC(err)
		}
		ok := k.store.CompareNow(r.Compare)
		if err := k.srv.authMoved(ctx); err != nil {
			return nil, toGRPC(err)
		}
		if !ok {
			return &pb.TxnResponse{Header: k.store.Header(k.store.Rev())}, nil
		}
	}
	if err := k.produce(ctx, r, puts); err != nil {
		return nil, err
	}
	hdr := k.store.Header(k.store.Rev())
	// Every put's answer is the same, a header with the revision: one
	// answer stands for all of them, rather than four messages per put.
	// Nothing changes a response once it is returned; the codec encodes
	// each entry in turn (appendPutTxnResponse).
	op := &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: &pb.ResponseHeader{Revision: hdr.Revision}}}}
	resp := &pb.TxnResponse{Header: hdr, Succeeded: true, Responses: make([]*pb.ResponseOp, len(puts))}
	for i := range resp.Responses {
		resp.Responses[i] = op
	}
	return resp, nil
}

// produce is Queues.Produce for the puts of r, a batch produce; when the
// queues detach from them, r's call (txnCall) may reuse its memory.
func (k *kvService) produce(ctx context.Context, r *pb.TxnRequest, puts []*pb.PutRequest) error {
	call := txnCallOf(ctx, r)
	dq, ok := k.queues.(DetachingQueues)
	if call == nil || call.arena == nil || !ok {
		return k.queues.Produce(ctx, puts)
	}
	detached, err := dq.ProduceDetached(ctx, puts)
	call.detached = detached && err == nil
	return err
}
