package kv

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// DetachingQueues is Queues whose Produce can say that the queues kept
// nothing of the puts: a batch produce's keys and values are then views
// of a buffer the server reuses for the next call.
type DetachingQueues interface {
	// Detaches reports whether ProduceDetached can report detached at
	// all. When it cannot, batch produces are decoded into memory of
	// their own, the size of each, as the queues will keep it.
	Detaches() bool
	// ProduceDetached is Queues.Produce, and reports detached when
	// nothing the queues hold, or anything still running, refers to the
	// keys or values of puts once it returns. When in doubt it reports
	// false: the puts' memory is then left to the collector.
	ProduceDetached(ctx context.Context, puts []*pb.PutRequest) (detached bool, err error)
}

// detaches reports whether q can say it kept nothing of a batch
// produce (DetachingQueues).
func detaches(q Queues) bool {
	dq, ok := q.(DetachingQueues)
	return ok && dq.Detaches()
}

// txnCall is the request of a Txn call as the KV service decodes it
// (kvServiceDesc): a batch produce (decodePutTxn) goes into an arena, a
// buffer and arrays the codec reuses, which the call gives back when it
// ends if produceTxn found the queues detached from it. Nothing else
// reads the request after the handler returns: grpc encodes the answer,
// which holds none of it.
type txnCall struct {
	r        pb.TxnRequest
	arena    *putTxnArena // nil unless r was decoded into one
	detached bool         // set by produceTxn: nothing refers to arena now
}

// txnCallKey is the context key of a Txn call's txnCall.
type txnCallKey struct{}

// txnCallOf returns the call whose request is r, or nil when r did not
// come through kvServiceDesc's Txn handler.
func txnCallOf(ctx context.Context, r *pb.TxnRequest) *txnCall {
	c, _ := ctx.Value(txnCallKey{}).(*txnCall)
	if c == nil || &c.r != r {
		return nil
	}
	return c
}

// end gives the arena back if the call is detached from it.
func (c *txnCall) end() {
	if c.arena == nil || !c.detached {
		return
	}
	c.r.Success = nil
	c.arena.release()
	c.arena = nil
}

// kvServiceDesc is pb.KV_ServiceDesc with a Txn handler that decodes
// into a txnCall. The other methods are the generated ones.
func kvServiceDesc() *grpc.ServiceDesc {
	d := pb.KV_ServiceDesc
	d.Methods = append([]grpc.MethodDesc(nil), d.Methods...)
	for i := range d.Methods {
		if d.Methods[i].MethodName == "Txn" {
			d.Methods[i].Handler = txnHandler
		}
	}
	return &d
}

// txnHandler is the generated KV Txn handler, decoding into a txnCall
// and ending it once the interceptors and the service have returned.
func txnHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	call := new(txnCall)
	if err := dec(call); err != nil {
		return nil, err
	}
	defer call.end()
	if call.arena != nil { // only what was decoded into an arena may give it back
		ctx = context.WithValue(ctx, txnCallKey{}, call)
	}
	handler := func(ctx context.Context, req any) (any, error) {
		return srv.(pb.KVServer).Txn(ctx, req.(*pb.TxnRequest))
	}
	if interceptor == nil {
		return handler(ctx, &call.r)
	}
	return interceptor(ctx, &call.r, &grpc.UnaryServerInfo{Server: srv, FullMethod: pb.KV_Txn_FullMethodName}, handler)
}

// putTxnArena is what a batch produce is decoded into: the received
// bytes, whose views its keys and values are, and the arrays of its ops.
type putTxnArena struct {
	buf     mem.Buffer // nil until decoded into
	success []*pb.RequestOp
	ops     []pb.RequestOp
	wraps   []pb.RequestOp_RequestPut
	puts    []pb.PutRequest
	size    int        // proto.Size of the txn decoded (fill)
	home    *sync.Pool // where release puts it; nil: nowhere
}

// reserve makes the arrays n long, allocating them when shorter.
func (a *putTxnArena) reserve(n int) {
	if cap(a.puts) < n {
		a.success = make([]*pb.RequestOp, n)
		a.ops = make([]pb.RequestOp, n)
		a.wraps = make([]pb.RequestOp_RequestPut, n)
		a.puts = make([]pb.PutRequest, n)
	}
	a.success, a.ops, a.wraps, a.puts = a.success[:n], a.ops[:n], a.wraps[:n], a.puts[:n]
}

// clear clears the arrays, so that they keep nothing alive.
func (a *putTxnArena) clear() {
	clear(a.success)
	clear(a.ops)
	clear(a.wraps)
	clear(a.puts)
}

// release frees the buffer and clears the arrays, then puts the arena
// in its pool.
func (a *putTxnArena) release() {
	if a.buf != nil {
		a.buf.Free()
		a.buf = nil
	}
	a.clear()
	if a.home != nil {
		a.home.Put(a)
	}
}

// unmarshalTxnCall decodes a Txn request into call: with c.txns a batch
// produce into an arena of that pool, anything else with
// proto.Unmarshal, which copies what it keeps; without, as any
// TxnRequest.
func (c protoCodec) unmarshalTxnCall(data mem.BufferSlice, call *txnCall) error {
	if c.txns == nil {
		return c.Unmarshal(data, &call.r)
	}
	a, _ := c.txns.Get().(*putTxnArena)
	if a == nil {
		a = &putTxnArena{home: c.txns}
	}
	buf := data.MaterializeToBuffer(c.pool)
	if decodePutTxn(buf.ReadOnlyData(), &call.r, a) {
		a.buf, call.arena = buf, a
		return nil
	}
	c.txns.Put(a)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), &call.r)
}
