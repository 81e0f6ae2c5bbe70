package kv

import (
	"errors"
	"hash/fnv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip/peer/peerpb"
)

// Replication across members is last-writer-wins per key. Every change of a
// key carries a stamp (Lamport time, member id); a member applies a change
// received from a peer only if its stamp is newer than the key's. Deletes
// leave a tombstone stamp, kept for Config.TombstoneTTL, so a late put with
// an older stamp cannot bring the key back. This is eventual consistency,
// not etcd's linearizability: two members may answer differently until the
// changes between them have arrived.
//
// The store keeps, per key, its replication metadata (keyMeta) and, per
// bucket of keys, the XOR of the entries' hashes (the digest), updated with
// every change, so members compare their key spaces in 256 numbers.

// Replicator receives this member's own changes for the other members. The
// store calls Replicate with its lock held, in commit order; it must not
// block. The writes are the caller's to keep.
type Replicator interface {
	Replicate(writes []*peerpb.Write)
}

// DigestBuckets is the number of buckets keys are hashed into for digests.
const DigestBuckets = 256

// stamp orders changes of one key across members: by Lamport time, then by
// member id. The zero stamp is older than every real one.
type stamp struct {
	time   uint64
	member uint64
}

// newer reports whether a is ordered after b.
func (a stamp) newer(b stamp) bool {
	if a.time != b.time {
		return a.time > b.time
	}
	return a.member > b.member
}

// keyMeta is a key's replication state.
type keyMeta struct {
	stamp      stamp
	deleted    bool
	unixMillis int64  // origin's wall clock at the change
	leaseOwner uint64 // member whose lease the key is attached to; 0 for none
	leaseTTL   int64  // that lease's granted TTL, seconds
}

// orphanLease is a lease of another member whose keys this member deletes
// at deadline, because that member is gone.
type orphanLease struct {
	owner    uint64
	deadline time.Time
}

// bucketOf returns the digest bucket of key.
func bucketOf(key string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32() % DigestBuckets
}

// entryHash hashes a key's stamp for the digest.
func entryHash(key string, m keyMeta) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	var b [17]byte
	for i := range 8 {
		b[i] = byte(m.stamp.time >> (8 * i))
		b[8+i] = byte(m.stamp.member >> (8 * i))
	}
	if m.deleted {
		b[16] = 1
	}
	_, _ = h.Write(b[:])
	return h.Sum64()
}

// setMeta records key's replication state and updates the digest. The
// caller holds mu.
func (s *store) setMeta(key string, m keyMeta) {
	b := bucketOf(key)
	if old, ok := s.metas[key]; ok {
		s.digest[b] ^= entryHash(key, *old)
		*old = m
	} else {
		mm := m
		s.metas[key] = &mm
	}
	s.digest[b] ^= entryHash(key, m)
}

// dropMeta forgets key's replication state. The caller holds mu.
func (s *store) dropMeta(key string) {
	if old, ok := s.metas[key]; ok {
		s.digest[bucketOf(key)] ^= entryHash(key, *old)
		delete(s.metas, key)
	}
}

// Digest returns the hash of every bucket of the key space.
func (s *Server) Digest() []uint64 {
	st := s.store
	st.mu.RLock()
	defer st.mu.RUnlock()
	return append([]uint64(nil), st.digest[:]...)
}

// Entries returns the state of every key, deleted ones included, in the
// given buckets, or in all buckets when buckets is nil.
func (s *Server) Entries(buckets []uint32) []*peerpb.Write {
	st := s.store
	var want [DigestBuckets]bool
	for _, b := range buckets {
		if b < DigestBuckets {
			want[b] = true
		}
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []*peerpb.Write
	for key, m := range st.metas {
		if buckets != nil && !want[bucketOf(key)] {
			continue
		}
		w := &peerpb.Write{Key: []byte(key), Deleted: m.deleted, Lamport: m.stamp.time, Member: m.stamp.member, UnixMillis: m.unixMillis}
		if !m.deleted {
			kv := st.get([]byte(key))
			if kv == nil {
				continue // cannot happen: a live meta has a live key
			}
			w.Value = kv.Value
			if kv.Lease != 0 {
				w.Lease, w.LeaseOwner, w.LeaseTtl = kv.Lease, m.leaseOwner, m.leaseTTL
			}
		}
		out = append(out, w)
	}
	return out
}

// ApplyRemote applies changes received from a peer: each one whose stamp is
// newer than the key's. Applied changes take one local revision together and
// fire local watches. It returns how many were applied.
//
// A peer is trusted to be a member, not to be correct: a change no member
// could have made (checkRemote, and a dispatcher record or queue settings
// that Queues.Check refuses, as it refuses a client's put) is skipped, the
// others are applied, and the first refusal is returned as an error that
// carries its gRPC status.
func (s *Server) ApplyRemote(writes []*peerpb.Write) (int, error) {
	st := s.store
	var refused error
	skip := make([]bool, len(writes))
	if q := s.cfg.Queues; q != nil { // Check reads the store: before mu
		for i, in := range writes {
			if in.Deleted || q.Route(in.Key) != RouteChecked {
				continue
			}
			if err := q.Check(in.Key, in.Value); err != nil {
				skip[i] = true
				if refused == nil {
					refused = &RemoteError{Code: codes.InvalidArgument, Err: errors.New(status.Convert(err).Message())}
				}
			}
		}
	}
	now := st.cfg.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, in := range writes {
		if err := st.checkRemote(in, now); err != nil {
			skip[i] = true
			if refused == nil {
				refused = err
			}
		}
	}
	w := st.beginRemote()
	applied := 0
	for i, in := range writes {
		key := string(in.Key)
		if len(key) == 0 || skip[i] {
			continue
		}
		st.clock = max(st.clock, in.Lamport) // checkRemote bounded it
		sp := stamp{time: in.Lamport, member: in.Member}
		old, known := st.metas[key]
		if known && !sp.newer(old.stamp) {
			continue
		}
		m := keyMeta{stamp: sp, deleted: in.Deleted, unixMillis: in.UnixMillis}
		if in.Deleted {
			if !known && now.Sub(time.UnixMilli(in.UnixMillis)) > st.cfg.tombstoneTTL {
				continue // a tombstone this member already forgot
			}
			w.deleteRange(keyRange{key: in.Key})
		} else {
			w.put(in.Key, in.Value, in.Lease)
			if in.Lease != 0 {
				m.leaseOwner, m.leaseTTL = in.LeaseOwner, in.LeaseTtl
				st.adoptRemoteLease(in, now)
			}
		}
		st.setMeta(key, m)
		applied++
	}
	w.commit()
	return applied, refused
}

// adoptRemoteLease handles a received key attached to a lease this member
// cannot renew: one of its own from before a restart. Its keys are deleted
// after the lease's TTL. The caller holds mu.
func (s *store) adoptRemoteLease(in *peerpb.Write, now time.Time) {
	if in.LeaseOwner != s.cfg.memberID {
		return
	}
	if _, ok := s.leases[in.Lease]; ok {
		return
	}
	if _, ok := s.orphans[in.Lease]; !ok {
		s.orphans[in.Lease] = orphanLease{owner: in.LeaseOwner, deadline: now.Add(time.Duration(in.LeaseTtl) * time.Second)}
	}
}

// ExpireLeasesOf starts the TTL of every lease of member, which has failed
// or left: once a lease's TTL has passed, this member deletes its keys. A
// member that comes back in time keeps them (KeepLeasesOf).
func (s *Server) ExpireLeasesOf(member uint64) {
	st := s.store
	now := st.cfg.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	for key, m := range st.metas {
		if m.deleted || m.leaseOwner != member {
			continue
		}
		kv := st.get([]byte(key))
		if kv == nil || kv.Lease == 0 {
			continue
		}
		if _, ok := st.orphans[kv.Lease]; !ok {
			st.orphans[kv.Lease] = orphanLease{owner: member, deadline: now.Add(time.Duration(m.leaseTTL) * time.Second)}
		}
	}
}

// KeepLeasesOf cancels the expiry of member's leases: it is alive again.
func (s *Server) KeepLeasesOf(member uint64) {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if member == st.cfg.memberID {
		return
	}
	for id, o := range st.orphans {
		if o.owner == member {
			delete(st.orphans, id)
		}
	}
}

// expireOrphans deletes the keys of orphan leases whose deadline passed, as
// local writes, and returns how many leases ended. The caller holds mu.
func (s *store) expireOrphans(now time.Time) int {
	var due []int64
	for id, o := range s.orphans {
		if !now.Before(o.deadline) {
			due = append(due, id)
		}
	}
	if len(due) == 0 {
		return 0
	}
	owners := make(map[int64]uint64, len(due))
	for _, id := range due {
		owners[id] = s.orphans[id].owner
		delete(s.orphans, id)
	}
	var keys []string
	s.tree.Ascend(func(ki *keyIndex) bool {
		kv := ki.latest()
		if kv == nil {
			return true
		}
		if owner, ok := owners[kv.Lease]; ok {
			if m := s.metas[ki.key]; m != nil && m.leaseOwner == owner {
				keys = append(keys, ki.key)
			}
		}
		return true
	})
	w, err := s.beginWrite()
	if err != nil {
		return len(due) // the clock is spent: the keys stay
	}
	for _, k := range keys {
		w.deleteRange(keyRange{key: []byte(k)})
	}
	w.commit()
	return len(due)
}

// forgetTombstones drops the replication state of keys deleted longer than
// TombstoneTTL ago. The caller holds mu.
func (s *store) forgetTombstones(now time.Time) {
	for key, m := range s.metas {
		if m.deleted && now.Sub(time.UnixMilli(m.unixMillis)) > s.cfg.tombstoneTTL {
			s.dropMeta(key)
		}
	}
}
