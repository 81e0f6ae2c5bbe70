package mvcc

import (
	"hash/crc32"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Status returns the current revision and the approximate bytes held by
// every revision the store keeps.
func (s *Store) Status() (rev, bytes int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev, s.bytes
}

// HashKV hashes every key and value live at rev (0 = current) in key
// order: a CRC-32C that leaves out revisions, which are local to a
// member, so two members holding the same data report the same hash. It
// returns the hash, the revision hashed and the compaction revision;
// ErrCompacted or ErrFutureRev for a revision the store cannot read.
func (s *Store) HashKV(rev int64) (hash uint32, hashRev, compactRev int64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	at, err := s.checkRev(rev)
	if err != nil {
		return 0, 0, 0, err
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	_, _ = h.Write([]byte("chute")) // so that an empty store does not hash to 0
	s.tree.Ascend(func(ki *keyIndex) bool {
		if kv := ki.at(at); kv != nil {
			writeHashed(h, kv)
		}
		return true
	})
	return h.Sum32(), at, s.compactRev, nil
}

// writeHashed feeds the key and value, each length-prefixed so that the
// boundary between them is unambiguous.
func writeHashed(h interface{ Write([]byte) (int, error) }, kv *mvccpb.KeyValue) {
	var n [8]byte
	for _, b := range [][]byte{kv.Key, kv.Value} {
		l := uint64(len(b))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		_, _ = h.Write(n[:])
		_, _ = h.Write(b)
	}
}
