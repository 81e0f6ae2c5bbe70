package mvcc

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// revisionBytes encodes a revision as etcd's backend keys do: 8 bytes of
// main, '_', 8 bytes of sub, big-endian, and a trailing 't' for a tombstone.
func revisionBytes(r revision, tombstone bool) []byte {
	b := make([]byte, 17, 18)
	binary.BigEndian.PutUint64(b[0:8], uint64(r.main))
	b[8] = '_'
	binary.BigEndian.PutUint64(b[9:17], uint64(r.sub))
	if tombstone {
		b = append(b, 't')
	}
	return b
}

// WriteBolt writes every revision the store still holds into a new bbolt
// file at path, in etcd's backend layout (bucket "key": revision ->
// mvccpb.KeyValue, with tombstones marked; bucket "meta": consistent
// index, term, compaction revisions), so that etcd's tools read it. It
// holds the store's read lock only while it copies the revisions.
func (s *Store) WriteBolt(path string) error {
	type row struct{ k, v []byte }
	s.mu.RLock()
	var rows []row
	var marshalErr error
	s.tree.Ascend(func(ki *keyIndex) bool {
		for _, r := range ki.revisions {
			kv := r.kv
			if kv == nil {
				kv = &mvccpb.KeyValue{Key: []byte(ki.key)}
			}
			v, err := proto.Marshal(kv)
			if err != nil {
				marshalErr = err
				return false
			}
			rows = append(rows, row{k: revisionBytes(r.rev, r.kv == nil), v: v})
		}
		return true
	})
	// The leases, as etcd's lessor keeps them (bucket "lease": the id,
	// 8 bytes big-endian -> leasepb.Lease{ID, TTL, RemainingTTL}): an
	// etcd restored from the file finds the lease of each leased key,
	// which otherwise never expired there.
	var leases []row
	now := s.cfg.Now()
	for id, l := range s.leases {
		var v []byte
		v = protowire.AppendTag(v, 1, protowire.VarintType)
		v = protowire.AppendVarint(v, uint64(id))
		v = protowire.AppendTag(v, 2, protowire.VarintType)
		v = protowire.AppendVarint(v, uint64(l.ttl))
		if left := l.remaining(now); left > 0 {
			v = protowire.AppendTag(v, 3, protowire.VarintType)
			v = protowire.AppendVarint(v, uint64(left))
		}
		leases = append(leases, row{k: binary.BigEndian.AppendUint64(nil, uint64(id)), v: v})
	}
	rev, compactRev, term := s.rev, s.compactRev, s.cfg.RaftTerm
	s.mu.RUnlock()
	if marshalErr != nil {
		return fmt.Errorf("mvcc: snapshot: %w", marshalErr)
	}

	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return fmt.Errorf("mvcc: snapshot: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		// A bucket of rows, empty for none.
		bucket := func(name string, rows []row) error {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for _, r := range rows {
				if err := b.Put(r.k, r.v); err != nil {
					return err
				}
			}
			return nil
		}
		if err := bucket("key", rows); err != nil {
			return err
		}
		meta, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
		if err := meta.Put([]byte("consistent_index"), u64(uint64(rev))); err != nil {
			return err
		}
		if err := meta.Put([]byte("term"), u64(term)); err != nil {
			return err
		}
		if compactRev > 0 {
			cr := revisionBytes(revision{main: compactRev}, false)
			if err := meta.Put([]byte("scheduledCompactRev"), cr); err != nil {
				return err
			}
			if err := meta.Put([]byte("finishedCompactRev"), cr); err != nil {
				return err
			}
		}
		if err := bucket("lease", leases); err != nil {
			return err
		}
		for _, b := range []string{"members", "members_removed", "cluster", "alarm", "auth", "authUsers", "authRoles"} {
			if err := bucket(b, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("mvcc: snapshot: %w", err)
	}
	return nil
}
