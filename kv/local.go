package kv

import (
	"bytes"
	"strings"
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
	w, err := st.beginWrite()
	if err != nil {
		return false
	}
	w.put([]byte(key), value, 0)
	w.commit()
	return true
}

// Put sets key to value as a local write that is replicated.
func (s *Server) Put(key string, value []byte) {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	w, err := st.beginWrite()
	if err != nil {
		return // the clock is spent: nothing local can be written
	}
	w.put([]byte(key), value, 0)
	w.commit()
}

// Delete deletes key as a local write that is replicated, if it exists.
func (s *Server) Delete(key string) {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	w, err := st.beginWrite()
	if err != nil {
		return // the clock is spent: nothing local can be written
	}
	w.deleteRange(keyRange{key: []byte(key)})
	w.commit()
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
