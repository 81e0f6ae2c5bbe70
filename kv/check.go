package kv

import (
	"sync"
	"unsafe"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"chute/kv/mvcc"
)

// limits are the request limits a checker enforces; see Config.
type limits struct {
	maxTxnOps   int
	maxKeyBytes int
	keySets     *sync.Pool // of the emptied sets distinctPuts uses; nil: a new set each time
	// produces reports whether a key is a queue's producer key (its route
	// RouteProduce); nil: none is.
	produces func(key []byte) bool
}

// checkPut validates a PutRequest without looking at the store.
func (l limits) checkPut(r *pb.PutRequest) error {
	if len(r.Key) == 0 {
		return ErrEmptyKey
	}
	if len(r.Key) > l.maxKeyBytes {
		return ErrKeyTooLarge
	}
	if r.IgnoreValue && len(r.Value) != 0 {
		return ErrValueProvided
	}
	if r.IgnoreLease && r.Lease != 0 {
		return ErrLeaseProvided
	}
	return nil
}

// checkRange validates a RangeRequest without looking at the store.
func (l limits) checkRange(r *pb.RangeRequest) error {
	if len(r.Key) == 0 {
		return ErrEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return ErrInvalidSort
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return ErrInvalidSort
	}
	return nil
}

// checkDelete validates a DeleteRangeRequest without looking at the store.
func (l limits) checkDelete(r *pb.DeleteRangeRequest) error {
	if len(r.Key) == 0 {
		return ErrEmptyKey
	}
	return nil
}

// nestedOpsFactor bounds the compares and ops of a txn and of all the
// txns nested in it, together, at this many times MaxTxnOps (1024 by
// default). etcd bounds each level alone, so nesting took a txn within
// the request limit to about 190,000 ops, and telling whether a key is
// written twice on one path (writtenKeys, which compares each put with
// each delete before it) then cost one request minutes of CPU. Nested
// txns are rare, and small: etcd's recipes, STM and chute's batch
// produce do not nest.
const nestedOpsFactor = 8

// checkTxnRequest validates a client's TxnRequest: its ops, nested ones
// included, at most nestedOpsFactor times MaxTxnOps in all, then
// checkTxn.
func (l limits) checkTxnRequest(r *pb.TxnRequest) error {
	budget := nestedOpsFactor * l.maxTxnOps
	if !withinOps(r, &budget) {
		return ErrTooManyOps
	}
	return l.checkTxn(r)
}

// withinOps takes r's compares and ops, nested txns' included, from
// budget, and reports false as soon as it would go below zero: it never
// walks more than the budget.
func withinOps(r *pb.TxnRequest, budget *int) bool {
	*budget -= len(r.Compare) + len(r.Success) + len(r.Failure)
	if *budget < 0 {
		return false
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if t, ok := op.Request.(*pb.RequestOp_RequestTxn); ok && t.RequestTxn != nil && !withinOps(t.RequestTxn, budget) {
				return false
			}
		}
	}
	return true
}

// checkTxn validates a TxnRequest and every request nested in it: op counts,
// each op, and that no key is written twice on one path.
func (l limits) checkTxn(r *pb.TxnRequest) error {
	if len(r.Compare) > l.maxTxnOps || len(r.Success) > l.maxTxnOps || len(r.Failure) > l.maxTxnOps {
		return ErrTooManyOps
	}
	for _, c := range r.Compare {
		if len(c.Key) == 0 {
			return ErrEmptyKey
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if err := l.checkOp(op); err != nil {
				return err
			}
		}
		if putsOnly(ops) {
			if l.distinctPuts(ops) || l.producesAll(ops) {
				continue
			}
			return ErrDuplicateKey
		}
		if _, _, err := writtenKeys(ops); err != nil {
			return err
		}
	}
	return nil
}

// producesAll reports whether ops, all puts, all put to producer keys: a
// batch produce, whose puts are messages, not keys, and may name a key
// twice (a ClickHouse producer whose rows all go under one key).
func (l limits) producesAll(ops []*pb.RequestOp) bool {
	if l.produces == nil {
		return false
	}
	for _, op := range ops {
		if !l.produces(op.Request.(*pb.RequestOp_RequestPut).RequestPut.Key) {
			return false
		}
	}
	return true
}

// putsOnly reports whether every op is a put, as in a batch produce.
func putsOnly(ops []*pb.RequestOp) bool {
	for _, op := range ops {
		if _, ok := op.Request.(*pb.RequestOp_RequestPut); !ok {
			return false
		}
	}
	return true
}

// distinctPuts reports whether no two of ops, all puts, put the same
// key: writtenKeys for puts alone, without copying every key to a
// string. The set reads the requests' bytes in place; it is emptied
// before it goes back to keySets, a batch produce's keys being views of
// a buffer the next call may reuse (txnCall).
func (l limits) distinctPuts(ops []*pb.RequestOp) bool {
	if l.keySets == nil {
		return distinctKeys(make(map[string]struct{}, len(ops)), ops)
	}
	seen, _ := l.keySets.Get().(map[string]struct{})
	if seen == nil {
		seen = make(map[string]struct{}, len(ops))
	}
	ok := distinctKeys(seen, ops)
	clear(seen)
	l.keySets.Put(seen)
	return ok
}

// distinctKeys adds the keys of ops, all puts, to seen until one is
// there already, and reports whether none was.
func distinctKeys(seen map[string]struct{}, ops []*pb.RequestOp) bool {
	for _, op := range ops {
		k := op.Request.(*pb.RequestOp_RequestPut).RequestPut.Key
		ks := unsafe.String(unsafe.SliceData(k), len(k))
		if _, dup := seen[ks]; dup {
			return false
		}
		seen[ks] = struct{}{}
	}
	return true
}

func (l limits) checkOp(op *pb.RequestOp) error {
	switch o := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		return l.checkRange(o.RequestRange)
	case *pb.RequestOp_RequestPut:
		return l.checkPut(o.RequestPut)
	case *pb.RequestOp_RequestDeleteRange:
		return l.checkDelete(o.RequestDeleteRange)
	case *pb.RequestOp_RequestTxn:
		return l.checkTxn(o.RequestTxn)
	}
	return ErrEmptyKey
}

// writtenKeys returns the keys put and the ranges deleted by ops, nested txns
// included, and ErrDuplicateKey when a key is written twice on one path (as
// etcd's checkIntervals does). A nested txn's two branches are alternatives,
// so they may put the same key.
func writtenKeys(ops []*pb.RequestOp) (map[string]struct{}, []mvcc.KeyRange, error) {
	var dels []mvcc.KeyRange
	for _, op := range ops {
		if d, ok := op.Request.(*pb.RequestOp_RequestDeleteRange); ok {
			dels = append(dels, mvcc.KeyRange{Key: d.RequestDeleteRange.Key, End: d.RequestDeleteRange.RangeEnd})
		}
	}
	deleted := func(k string) bool {
		for _, d := range dels {
			if d.Contains([]byte(k)) {
				return true
			}
		}
		return false
	}
	puts := make(map[string]struct{}, len(ops))
	for _, op := range ops {
		t, ok := op.Request.(*pb.RequestOp_RequestTxn)
		if !ok {
			continue
		}
		putsThen, delsThen, err := writtenKeys(t.RequestTxn.Success)
		if err != nil {
			return nil, nil, err
		}
		putsElse, delsElse, err := writtenKeys(t.RequestTxn.Failure)
		if err != nil {
			return nil, nil, err
		}
		for k := range putsThen {
			if _, dup := puts[k]; dup || deleted(k) {
				return nil, nil, ErrDuplicateKey
			}
			puts[k] = struct{}{}
		}
		for k := range putsElse {
			_, inThen := putsThen[k]
			if _, dup := puts[k]; (dup && !inThen) || deleted(k) {
				return nil, nil, ErrDuplicateKey
			}
			puts[k] = struct{}{}
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}
	for _, op := range ops {
		p, ok := op.Request.(*pb.RequestOp_RequestPut)
		if !ok {
			continue
		}
		k := string(p.RequestPut.Key)
		if _, dup := puts[k]; dup || deleted(k) {
			return nil, nil, ErrDuplicateKey
		}
		puts[k] = struct{}{}
	}
	return puts, dels, nil
}
