package mvcc

import (
	"bytes"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The request-level operations of the store. Each runs under mu as one
// atomic step and returns the response without its header, plus the store
// revision the header must carry. Requests are checked by kv's limits
// beforehand; these functions check only what depends on the store's
// state. Writes come only through StateMachine, so that every member
// applies them in one order.

// Range answers a RangeRequest.
func (s *Store) Range(r *pb.RangeRequest) (*pb.RangeResponse, int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	resp, err := s.rangeOp(r, s.rev)
	return resp, s.rev, err
}

// put answers a PutRequest.
func (s *Store) put(r *pb.PutRequest) (*pb.PutResponse, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// etcd judges a put's lease before its key, where a txn's put has its
	// key judged first (checkPutState): a put wrong in both gets etcd's
	// error.
	if _, ok := s.leases[r.Lease]; r.Lease != 0 && !ok {
		return nil, s.rev, ErrLeaseNotFound
	}
	if err := s.checkPutState(r); err != nil {
		return nil, s.rev, err
	}
	w := s.beginWrite()
	resp := w.putOp(r)
	w.commit()
	return resp, s.rev, nil
}

// deleteRange answers a DeleteRangeRequest.
func (s *Store) deleteRange(r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.beginWrite()
	resp := w.deleteOp(r)
	w.commit()
	return resp, s.rev, nil
}

// Txn answers a TxnRequest: compares are evaluated against the state before
// the txn, nested ones included, then the chosen ops are checked and applied
// as one revision. Called directly rather than through StateMachine, it
// must be given only txns that write nothing (kv serves those without a
// log entry, as etcd does).
func (s *Store) Txn(r *pb.TxnRequest) (*pb.TxnResponse, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.txnPath(r)
	if err := s.checkTxnState(r, path.cursor()); err != nil {
		return nil, s.rev, err
	}
	w := s.beginWrite()
	resp := w.txnOp(r, path.cursor())
	w.commit()
	return resp, s.rev, nil
}

// rangeOp reads as etcd's applier does: sort and revision filters need every
// match, so the limit is applied after them. cur is the revision a request
// without one reads at. The caller holds mu.
func (s *Store) rangeOp(r *pb.RangeRequest, cur int64) (*pb.RangeResponse, error) {
	rev := r.Revision
	if rev <= 0 {
		rev = cur
	} else if rev > cur {
		return nil, ErrFutureRev
	}
	if rev < s.compactRev {
		return nil, ErrCompacted
	}
	filtered := r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
	limit := r.Limit
	if r.SortOrder != pb.RangeRequest_NONE || filtered {
		limit = 0
	} else if limit > 0 {
		limit++ // one more than asked tells whether there is more
	}
	res := s.rangeLocked(KeyRange{Key: r.Key, End: r.RangeEnd}, rev, limit, r.CountOnly)
	kvs := res.kvs
	if filtered {
		kvs = filterKVs(kvs, r)
	}
	order := r.SortOrder
	if r.SortTarget != pb.RangeRequest_KEY && order == pb.RangeRequest_NONE {
		order = pb.RangeRequest_ASCEND
	} else if r.SortTarget == pb.RangeRequest_KEY && order == pb.RangeRequest_ASCEND {
		order = pb.RangeRequest_NONE // already in key order
	}
	if order != pb.RangeRequest_NONE {
		sortKVs(kvs, sortTarget(r.SortTarget), order == pb.RangeRequest_DESCEND)
	}
	resp := &pb.RangeResponse{Count: res.count}
	if r.Limit > 0 && int64(len(kvs)) > r.Limit {
		kvs = kvs[:r.Limit]
		resp.More = true
	}
	if r.KeysOnly {
		stripped := make([]*mvccpb.KeyValue, len(kvs))
		for i, kv := range kvs {
			stripped[i] = &mvccpb.KeyValue{
				Key:            kv.Key,
				CreateRevision: kv.CreateRevision,
				ModRevision:    kv.ModRevision,
				Version:        kv.Version,
				Lease:          kv.Lease,
			}
		}
		kvs = stripped
	}
	resp.Kvs = kvs
	return resp, nil
}

func filterKVs(kvs []*mvccpb.KeyValue, r *pb.RangeRequest) []*mvccpb.KeyValue {
	out := kvs[:0:0]
	for _, kv := range kvs {
		switch {
		case r.MinModRevision != 0 && kv.ModRevision < r.MinModRevision,
			r.MaxModRevision != 0 && kv.ModRevision > r.MaxModRevision,
			r.MinCreateRevision != 0 && kv.CreateRevision < r.MinCreateRevision,
			r.MaxCreateRevision != 0 && kv.CreateRevision > r.MaxCreateRevision:
			continue
		}
		out = append(out, kv)
	}
	return out
}

// checkPutState returns the error a put would meet: a missing lease, or a
// missing key when the put keeps the key's value or lease.
func (s *Store) checkPutState(r *pb.PutRequest) error {
	if r.IgnoreValue || r.IgnoreLease {
		if s.get(r.Key) == nil {
			return ErrKeyNotFound
		}
	}
	if r.Lease != 0 && !r.IgnoreLease {
		if _, ok := s.leases[r.Lease]; !ok {
			return ErrLeaseNotFound
		}
	}
	return nil
}

func (w *writeTxn) putOp(r *pb.PutRequest) *pb.PutResponse {
	value, leaseID := r.Value, r.Lease
	if r.IgnoreValue || r.IgnoreLease {
		cur := w.s.get(r.Key)
		if r.IgnoreValue {
			value = cur.Value
		}
		if r.IgnoreLease {
			leaseID = cur.Lease
		}
	}
	prev := w.put(r.Key, value, leaseID)
	resp := &pb.PutResponse{}
	if r.PrevKv {
		resp.PrevKv = prev
	}
	return resp
}

func (w *writeTxn) deleteOp(r *pb.DeleteRangeRequest) *pb.DeleteRangeResponse {
	deleted := w.deleteRange(KeyRange{Key: r.Key, End: r.RangeEnd})
	resp := &pb.DeleteRangeResponse{Deleted: int64(len(deleted))}
	if r.PrevKv {
		resp.PrevKvs = deleted
	}
	return resp
}

// txnPath records which branch every txn on the chosen path takes, in
// depth-first order, so checking and applying walk the same path.
type txnPath []bool

type pathCursor struct {
	path txnPath
	i    int
}

func (p txnPath) cursor() *pathCursor { return &pathCursor{path: p} }

func (c *pathCursor) next() bool {
	b := c.path[c.i]
	c.i++
	return b
}

// txnPath evaluates the compares of r and of the txns nested on the branch
// it takes. The caller holds mu.
func (s *Store) txnPath(r *pb.TxnRequest) txnPath {
	var path txnPath
	var walk func(r *pb.TxnRequest)
	walk = func(r *pb.TxnRequest) {
		ok := s.compareAll(r.Compare)
		path = append(path, ok)
		for _, op := range branch(r, ok) {
			if t, isTxn := op.Request.(*pb.RequestOp_RequestTxn); isTxn {
				walk(t.RequestTxn)
			}
		}
	}
	walk(r)
	return path
}

func branch(r *pb.TxnRequest, succeeded bool) []*pb.RequestOp {
	if succeeded {
		return r.Success
	}
	return r.Failure
}

// checkTxnState checks every op on the path against the store before any is
// applied, so a txn fails whole or applies whole.
func (s *Store) checkTxnState(r *pb.TxnRequest, c *pathCursor) error {
	for _, op := range branch(r, c.next()) {
		var err error
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			if rev := o.RequestRange.Revision; rev > s.rev {
				err = ErrFutureRev
			} else if rev > 0 && rev < s.compactRev {
				err = ErrCompacted
			}
		case *pb.RequestOp_RequestPut:
			err = s.checkPutState(o.RequestPut)
		case *pb.RequestOp_RequestTxn:
			err = s.checkTxnState(o.RequestTxn, c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *writeTxn) txnOp(r *pb.TxnRequest, c *pathCursor) *pb.TxnResponse {
	ok := c.next()
	ops := branch(r, ok)
	resp := &pb.TxnResponse{Succeeded: ok, Responses: make([]*pb.ResponseOp, len(ops))}
	for i, op := range ops {
		var out pb.ResponseOp
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			rr, err := w.s.rangeOp(o.RequestRange, w.readRev())
			if err != nil {
				rr = &pb.RangeResponse{} // checked before; cannot happen
			}
			rr.Header = &pb.ResponseHeader{Revision: w.readRev()}
			out.Response = &pb.ResponseOp_ResponseRange{ResponseRange: rr}
		case *pb.RequestOp_RequestPut:
			pr := w.putOp(o.RequestPut)
			pr.Header = &pb.ResponseHeader{Revision: w.readRev()}
			out.Response = &pb.ResponseOp_ResponsePut{ResponsePut: pr}
		case *pb.RequestOp_RequestDeleteRange:
			dr := w.deleteOp(o.RequestDeleteRange)
			dr.Header = &pb.ResponseHeader{Revision: w.readRev()}
			out.Response = &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: dr}
		case *pb.RequestOp_RequestTxn:
			tr := w.txnOp(o.RequestTxn, c)
			// etcd's nested answers have a header, all zero: code reading
			// its revision must not find it nil.
			tr.Header = &pb.ResponseHeader{}
			out.Response = &pb.ResponseOp_ResponseTxn{ResponseTxn: tr}
		}
		resp.Responses[i] = &out
	}
	return resp
}

// CompareNow reports whether every compare holds against the current
// state.
func (s *Store) CompareNow(cs []*pb.Compare) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.compareAll(cs)
}

// compareAll reports whether every compare holds. The caller holds mu.
func (s *Store) compareAll(cs []*pb.Compare) bool {
	for _, c := range cs {
		if !s.compare(c) {
			return false
		}
	}
	return true
}

// compare evaluates one compare as etcd does: over a range every key must
// hold; a missing key compares as zero values, except that a value compare
// on a missing key is always false.
func (s *Store) compare(c *pb.Compare) bool {
	res := s.rangeLocked(KeyRange{Key: c.Key, End: c.RangeEnd}, s.rev, 0, false)
	if len(res.kvs) == 0 {
		if c.Target == pb.Compare_VALUE {
			return false
		}
		return compareKV(c, &mvccpb.KeyValue{})
	}
	for _, kv := range res.kvs {
		if !compareKV(c, kv) {
			return false
		}
	}
	return true
}

func compareKV(c *pb.Compare, kv *mvccpb.KeyValue) bool {
	var result int
	switch c.Target {
	case pb.Compare_VALUE:
		result = bytes.Compare(kv.Value, c.GetValue())
	case pb.Compare_CREATE:
		result = cmpInt64(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		result = cmpInt64(kv.ModRevision, c.GetModRevision())
	case pb.Compare_VERSION:
		result = cmpInt64(kv.Version, c.GetVersion())
	case pb.Compare_LEASE:
		result = cmpInt64(kv.Lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return result == 0
	case pb.Compare_NOT_EQUAL:
		return result != 0
	case pb.Compare_GREATER:
		return result > 0
	case pb.Compare_LESS:
		return result < 0
	}
	return false
}
