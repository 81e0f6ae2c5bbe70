package kv

import (
	"bytes"
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/kv/mvcc"
)

// Get returns the current value of key, or nil when it does not exist. It
// is how other packages of this node read the KV (dispatcher records,
// queue settings).
func (s *Server) Get(key string) []byte { return s.store.Value(key) }

// Changes returns a count that grows with every change of the key space
// (mvcc.Store.Changes): what Get returned after it returned n is still
// current while it returns n.
func (s *Server) Changes() uint64 { return s.store.Changes() }

// Linearize returns once this member's copy of the key space holds every
// write the cluster committed before the call (etcd's read index): what
// Get returns after it is at least that new. It fails when no leader
// answered within ctx (none known, cut off from a majority, a term that
// ended), and returns at once for a member alone.
func (s *Server) Linearize(ctx context.Context) error { return s.linearize(ctx) }

// CompareAndPut sets key to value when its current value equals old
// (nil: the key does not exist), as a write of the whole cluster. It
// reports whether it wrote; an error (ErrNoLeader, ErrTimeout, ctx's
// error) means the write was not committed in time, and may still be
// committed later. A ctx without a deadline is bounded by
// internalWriteTimeout.
func (s *Server) CompareAndPut(ctx context.Context, key string, old, value []byte) (bool, error) {
	cmp := valueIs(key, old)
	if old == nil {
		cmp = &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_CreateRevision{}}
	}
	return s.writeIf(ctx, cmp, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: value}}})
}

// CompareAndDelete deletes key when its current value equals old, as a
// write of the whole cluster, and reports whether it deleted it. Errors
// are CompareAndPut's.
func (s *Server) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	return s.writeIf(ctx, valueIs(key, old), &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key)}}})
}

// valueIs compares key's value with v.
func valueIs(key string, v []byte) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: v}}
}

// writeIf makes op when cmp holds, as one txn of the whole cluster, and
// reports whether it did.
func (s *Server) writeIf(ctx context.Context, cmp *pb.Compare, op *pb.RequestOp) (bool, error) {
	res := s.writeOwn(ctx, &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Compare: []*pb.Compare{cmp}, Success: []*pb.RequestOp{op}}})
	if res.Err != nil {
		return false, res.Err
	}
	return res.Resp.(*pb.TxnResponse).Succeeded, nil
}

// Put sets key to value as a write of the whole cluster. Errors are
// CompareAndPut's.
func (s *Server) Put(ctx context.Context, key string, value []byte) error {
	return s.writeOwn(ctx, &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(key), Value: value}}).Err
}

// Delete deletes key, if it exists, as a write of the whole cluster.
// Errors are CompareAndPut's.
func (s *Server) Delete(ctx context.Context, key string) error {
	return s.writeOwn(ctx, &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte(key)}}).Err
}

// KeyValue is one put of Apply.
type KeyValue struct {
	Key   string
	Value []byte
}

// Apply deletes the keys deletes and then puts puts, as one write of the
// whole cluster: one txn, one command of the consensus (one raft entry)
// and one revision, all or nothing. A key must not appear twice. It is
// bounded by what one command may carry (raftkv's MaxCommandBytes), not
// by the client limit of ops per txn (MaxTxnOps), which is for requests:
// the caller keeps each call well under the command bound. A NOSPACE
// alarm refuses the whole write when it puts anything (ErrNoSpace);
// other errors are CompareAndPut's. Nothing to write returns nil at once.
func (s *Server) Apply(ctx context.Context, puts []KeyValue, deletes []string) error {
	if len(puts) == 0 && len(deletes) == 0 {
		return nil
	}
	ops := make([]*pb.RequestOp, 0, len(deletes)+len(puts))
	for _, k := range deletes {
		ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(k)}}})
	}
	for _, p := range puts {
		ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(p.Key), Value: p.Value}}})
	}
	return s.writeOwn(ctx, &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Success: ops}}).Err
}

// Writable reports whether a write can commit now: this member is alone,
// or a leader is known.
func (s *Server) Writable() bool {
	return s.consensus == nil || s.consensus.Status().Leader != 0
}

// writeOwn runs a write of this node's own (another package's, or the
// leader's duties), under ctx (whose client call, if any, it is not),
// bounded by internalWriteTimeout when ctx has no deadline. Without a
// known leader it fails at once with ErrNoLeader instead of waiting for
// an election: its callers (dispatch's claims) have a way on meanwhile,
// such as holding a queue's messages as copies, and a producer's put
// must not wait for raft.
func (s *Server) writeOwn(ctx context.Context, req *pb.InternalRaftRequest) mvcc.Result {
	if s.consensus != nil && s.consensus.Status().Leader == 0 {
		return mvcc.Result{Err: ErrNoLeader}
	}
	if _, ok := checkedFrom(ctx); ok {
		// A claim made during a client's put is this node's write, not
		// the client's: its apply must not check the client's auth.
		ctx = context.WithValue(ctx, checkedByKey{}, nil)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, internalWriteTimeout)
		defer cancel()
	}
	return s.write(ctx, req)
}

// Page returns the current keys and values from from (included) to end
// (excluded; not empty), in key order, at most limit of them; the
// values are copies.
func (s *Server) Page(from, end string, limit int) []KeyValue {
	var out []KeyValue
	s.store.Page([]byte(from), []byte(end), limit, func(key string, value []byte) {
		out = append(out, KeyValue{Key: key, Value: bytes.Clone(value)})
	})
	return out
}

// Prefix returns the current values of every key starting with prefix.
func (s *Server) Prefix(prefix string) map[string][]byte { return s.store.Prefix(prefix) }
