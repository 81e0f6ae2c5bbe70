package kv

import "bytes"

// Get returns the current value of key, or nil when it does not exist. It
// is how other packages of this node read the KV (dispatcher records,
// queue settings).
func (s *Server) Get(key string) []byte {
	st := s.store
	st.mu.RLock()
	defer st.mu.RUnlock()
	if kv := st.get([]byte(key)); kv != nil {
		return kv.Value
	}
	return nil
}

// CompareAndPut sets key to value, as a local write that is replicated,
// when its current value equals old (nil: the key does not exist). It
// reports whether it wrote.
func (s *Server) CompareAndPut(key string, old, value []byte) bool {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.get([]byte(key))
	switch {
	case old == nil && cur != nil,
		old != nil && (cur == nil || !bytes.Equal(cur.Value, old)):
		return false
	}
	w := st.beginWrite()
	w.put([]byte(key), value, 0)
	w.commit()
	return true
}
