package kv

import (
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Get returns the current value of key, or nil when it does not exist. It
// is how other packages of this node read the KV (dispatcher records,
// queue settings).
func (s *Server) Get(key string) []byte {
	st := s.store
	st.mu.RLock()
	defer st.mu.RUnlock()
	if kv := st.getString(key); kv != nil {
		return kv.Value
	}
	return nil
}

// CompareAndPut sets key to value when its current value equals old
// (nil: the key does not exist), as a write of the whole cluster. It
// reports whether it wrote: false also when the write could not be
// committed in time (no leader), so the caller tries again later.
func (s *Server) CompareAndPut(key string, old, value []byte) bool {
	cmp := &pb.Compare{Key: []byte(key), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: old}}
	if old == nil {
		cmp = &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_CreateRevision{}}
	}
	res := s.writeInternal(&pb.InternalRaftRequest{Txn: &pb.TxnRequest{
		Compare: []*pb.Compare{cmp},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: value}}}},
	}})
	if res.err != nil {
		s.log.Debug("compare-and-put not written", "key", key, "err", res.err)
		return false
	}
	return res.resp.(*pb.TxnResponse).Succeeded
}

// Put sets key to value as a write of the whole cluster; it gives up
// after internalWriteTimeout.
func (s *Server) Put(key string, value []byte) {
	res := s.writeInternal(&pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(key), Value: value}})
	if res.err != nil {
		s.log.Warn("put not written", "key", key, "err", res.err)
	}
}

// Delete deletes key, if it exists, as a write of the whole cluster; it
// gives up after internalWriteTimeout.
func (s *Server) Delete(key string) {
	res := s.writeInternal(&pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte(key)}})
	if res.err != nil {
		s.log.Warn("delete not written", "key", key, "err", res.err)
	}
}

// Prefix returns the current values of every key starting with prefix.
func (s *Server) Prefix(prefix string) map[string][]byte {
	st := s.store
	end := []byte{0} // every key from prefix on, when prefix is all 0xff
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0xff {
			end = append([]byte(prefix[:i]), prefix[i]+1)
			break
		}
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make(map[string][]byte)
	st.ascend(keyRange{key: []byte(prefix), end: end}, func(ki *keyIndex) bool {
		if kv := ki.latest(); kv != nil && strings.HasPrefix(ki.key, prefix) {
			out[ki.key] = kv.Value
		}
		return true
	})
	return out
}
