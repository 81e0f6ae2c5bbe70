package mvcc

import (
	"bytes"
	"chute/kv/internal/snapcodec"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"time"

	"github.com/google/btree"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A state machine snapshot (what raft keeps and sends to a member that
// fell behind) is every key with its revisions since the last compaction,
// every lease with its remaining TTL, every raised alarm and the auth
// state, in this layout, all integers varints, all byte strings
// length-prefixed:
//
//	magic "chutekv3" ("chutekv2": no auth section; "chutekv1": no alarm
//	    section either)
//	applied index, term, revision, compaction revision
//	key count, then per key: key, revision count, then per revision:
//	    main, sub, 0 (tombstone) or 1 and value, create revision,
//	    version, lease
//	lease count, then per lease: id, TTL (s), remaining (ms)
//	v2 and v3: alarm count, then per alarm: member id, alarm type
//	v3 only: the auth state (kv/auth's encoding) as one byte string
//	CRC-32C of all the above, 4 bytes little-endian
//
// A snapshot is written in the oldest version that holds it (without auth
// state as version 2, without alarms either as version 1), byte for byte
// what older members wrote, so that such a member still restores it
// while a cluster is upgraded; Restore reads every version.
//
// The change log that feeds watches is not written: Restore rebuilds it
// from the revisions, which hold every change since the compaction.

const (
	snapshotMagicV1 = "chutekv1"
	snapshotMagicV2 = "chutekv2"
	snapshotMagicV3 = "chutekv3"
)

// Snapshot captures the state machine now and returns the function that
// writes it. Under the store's read lock it copies only the small parts
// (the header, leases, alarms) and each key's revisions as a slice: a
// revision is never changed once stored, appends land past the captured
// length and compaction gives a key a new slice (keyIndex.compact), so
// the write function encodes the keys while applies go on, streaming
// them in snapshotChunk pieces rather than holding an encoded copy of
// the whole key space.
func (m *StateMachine) Snapshot() (func(io.Writer) error, error) {
	s := m.s
	var head, tail bytes.Buffer
	he, te := snapcodec.NewEncoder(&head), snapcodec.NewEncoder(&tail)
	now := s.cfg.Now()
	var authState []byte
	if !m.auth.Empty() {
		authState = m.auth.Encode()
	}
	s.mu.RLock()
	switch {
	case authState != nil:
		he.Raw([]byte(snapshotMagicV3))
	case len(s.alarms) > 0:
		he.Raw([]byte(snapshotMagicV2))
	default:
		he.Raw([]byte(snapshotMagicV1))
	}
	he.Uint(m.applied.Load())
	he.Uint(s.term.Load())
	he.Int(s.rev)
	he.Int(s.compactRev)
	he.Uint(uint64(s.tree.Len()))
	keys := make([]keyIndex, 0, s.tree.Len())
	s.tree.Ascend(func(ki *keyIndex) bool {
		keys = append(keys, keyIndex{key: ki.key, revisions: ki.revisions})
		return true
	})
	ids := make([]int64, 0, len(s.leases))
	for id := range s.leases {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	te.Uint(uint64(len(ids)))
	for _, id := range ids {
		l := s.leases[id]
		te.Int(id)
		te.Int(l.ttl)
		te.Int(max(l.expires.Sub(now), 0).Milliseconds())
	}
	if len(s.alarms) > 0 || authState != nil {
		as := make([]*pb.AlarmMember, 0, len(s.alarms))
		for k := range s.alarms {
			as = append(as, &pb.AlarmMember{MemberID: k.member, Alarm: k.alarm})
		}
		sortAlarms(as)
		te.Uint(uint64(len(as)))
		for _, a := range as {
			te.Uint(a.MemberID)
			te.Uint(uint64(a.Alarm))
		}
	}
	s.mu.RUnlock()
	if authState != nil {
		te.Bytes(authState)
	}
	return func(w io.Writer) error {
		sw := &summedWriter{w: w}
		sw.write(head.Bytes())
		var buf bytes.Buffer
		e := snapcodec.NewEncoder(&buf)
		for i := range keys {
			writeKeyHistory(e, &keys[i])
			if buf.Len() >= snapshotChunk {
				sw.write(buf.Bytes())
				buf.Reset()
				if sw.err != nil {
					return sw.err // the rest would go nowhere
				}
			}
		}
		sw.write(buf.Bytes())
		sw.write(tail.Bytes())
		var sum [4]byte
		binary.LittleEndian.PutUint32(sum[:], sw.crc)
		sw.write(sum[:])
		return sw.err
	}, nil
}

// snapshotChunk is how many encoded bytes of keys a snapshot's write
// gathers before it passes them on.
const snapshotChunk = 64 << 10

// writeKeyHistory encodes one key and its revisions, as the snapshot
// layout above says.
func writeKeyHistory(e *snapcodec.Encoder, ki *keyIndex) {
	e.Bytes([]byte(ki.key))
	e.Uint(uint64(len(ki.revisions)))
	for _, r := range ki.revisions {
		e.Int(r.rev.main)
		e.Int(r.rev.sub)
		if r.kv == nil {
			e.Uint(0)
			continue
		}
		e.Uint(1)
		e.Bytes(r.kv.Value)
		e.Int(r.kv.CreateRevision)
		e.Int(r.kv.Version)
		e.Int(r.kv.Lease)
	}
}

// summedWriter writes to w and keeps the CRC-32C of what it wrote; the
// first error sticks and ends the writing.
type summedWriter struct {
	w   io.Writer
	crc uint32
	err error
}

func (sw *summedWriter) write(b []byte) {
	if sw.err != nil || len(b) == 0 {
		return
	}
	sw.crc = crc32.Update(sw.crc, crcTable, b)
	_, sw.err = sw.w.Write(b)
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Restore replaces the whole state with a snapshot's. Watchers stay: they
// continue from their place in the rebuilt change log, or are cancelled
// as compacted when the snapshot's compaction passed it. Requests waiting
// for a command to be applied here fail with ErrResultUnknown: the
// snapshot may hold their command's effect, but not its result.
func (m *StateMachine) Restore(r io.Reader) error {
	st, err := decodeSnapshot(r)
	if err != nil {
		return err
	}
	if err := m.auth.Restore(st.auth); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshotCorrupt, err)
	}
	s := m.s
	now := s.cfg.Now()
	s.mu.Lock()
	s.tree = st.tree
	s.rev, s.compactRev = st.rev, st.compactRev
	s.log = st.log
	s.bytes = st.bytes
	s.leases = make(map[int64]*lease, len(st.leases))
	for _, l := range st.leases {
		s.leases[l.id] = &lease{id: l.id, ttl: l.ttl, expires: now.Add(time.Duration(l.remainingMs) * time.Millisecond), keys: make(map[string]struct{})}
	}
	s.tree.Ascend(func(ki *keyIndex) bool {
		if kv := ki.latest(); kv != nil && kv.Lease != 0 {
			s.attachLease(kv.Lease, ki.key)
		}
		return true
	})
	for w := range s.synced.all() {
		s.synced.remove(w)
		s.unsynced[w] = struct{}{}
	}
	s.alarms = make(map[alarmKey]struct{}, len(st.alarms))
	for _, k := range st.alarms {
		s.alarms[k] = struct{}{}
	}
	s.setNoSpaceLocked()
	s.term.Store(st.term)
	s.changes.Add(1)
	s.kickSync()
	s.mu.Unlock()
	m.failWaiting(ErrResultUnknown)
	m.advance(st.applied)
	return nil
}

// snapshotState is a decoded snapshot.
type snapshotState struct {
	applied, term   uint64
	rev, compactRev int64
	tree            *btree.BTreeG[*keyIndex]
	log             []changeRecord
	bytes           int64
	leases          []snapshotLease
	alarms          []alarmKey
	auth            []byte // kv/auth's encoding; empty: the initial state
}

type snapshotLease struct {
	id, ttl, remainingMs int64
}

// decodeSnapshot decodes a snapshot as it is read from r, holding none
// of its bytes but the state they decode to (a follower that restores a
// key space of 56 MB so needs 56 MB less than reading it whole first).
// The checksum at its end is checked once all is decoded.
func decodeSnapshot(r io.Reader) (*snapshotState, error) {
	d := snapcodec.NewReader(r, ErrSnapshotCorrupt, crcTable)
	magic := make([]byte, len(snapshotMagicV1))
	d.Full(magic)
	if d.Err() != nil {
		return nil, fmt.Errorf("%w: not a chute key-space snapshot", ErrSnapshotCorrupt)
	}
	var withAlarms, withAuth bool
	switch string(magic) {
	case snapshotMagicV1:
	case snapshotMagicV2:
		withAlarms = true
	case snapshotMagicV3:
		withAlarms, withAuth = true, true
	default:
		return nil, fmt.Errorf("%w: not a chute key-space snapshot", ErrSnapshotCorrupt)
	}
	st := &snapshotState{
		tree: btree.NewG(32, func(a, b *keyIndex) bool { return a.key < b.key }),
	}
	st.applied, st.term = d.Uint(), d.Uint()
	st.rev, st.compactRev = d.Int(), d.Int()
	nkeys := d.Count()
	var recs []changeRecord
	var subs []int64
	// Every loop over a count stops at the first error: a corrupt count
	// is bounded by nothing else (snapcodec.Reader).
	for i := 0; i < nkeys && d.Err() == nil; i++ {
		key := d.Bytes()
		ki := &keyIndex{key: string(key)}
		nrevs := d.Count()
		ki.revisions = make([]keyRevision, 0, min(nrevs, 1024))
		var prev *mvccpb.KeyValue
		for j := 0; j < nrevs && d.Err() == nil; j++ {
			rv := revision{main: d.Int(), sub: d.Int()}
			var kv *mvccpb.KeyValue
			rec := changeRecord{rev: rv.main, typ: mvccpb.PUT, prev: prev}
			if d.Uint() == 1 {
				kv = &mvccpb.KeyValue{Key: key, Value: d.Bytes(), ModRevision: rv.main}
				kv.CreateRevision, kv.Version, kv.Lease = d.Int(), d.Int(), d.Int()
				st.bytes += int64(len(key) + len(kv.Value) + revisionOverhead)
				rec.kv = kv
			} else {
				st.bytes += int64(len(key) + revisionOverhead)
				rec.typ, rec.kv = mvccpb.DELETE, &mvccpb.KeyValue{Key: key, ModRevision: rv.main}
			}
			if rv.main >= st.compactRev {
				recs = append(recs, rec)
				subs = append(subs, rv.sub)
			}
			ki.revisions = append(ki.revisions, keyRevision{rev: rv, kv: kv})
			prev = kv
		}
		st.tree.ReplaceOrInsert(ki)
	}
	nleases := d.Count()
	for i := 0; i < nleases && d.Err() == nil; i++ {
		st.leases = append(st.leases, snapshotLease{id: d.Int(), ttl: d.Int(), remainingMs: d.Int()})
	}
	if withAlarms {
		nalarms := d.Count()
		for i := 0; i < nalarms && d.Err() == nil; i++ {
			st.alarms = append(st.alarms, alarmKey{member: d.Uint(), alarm: pb.AlarmType(d.Uint())})
		}
	}
	if withAuth {
		st.auth = d.Bytes()
	}
	sum := d.Sum()
	var want [4]byte
	d.Full(want[:])
	if d.Err() != nil {
		return nil, d.Err()
	}
	if sum != binary.LittleEndian.Uint32(want[:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrSnapshotCorrupt)
	}
	if !d.AtEnd() {
		if d.Err() != nil {
			return nil, d.Err()
		}
		return nil, fmt.Errorf("%w: bytes after the end", ErrSnapshotCorrupt)
	}
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		ra, rb := recs[idx[a]], recs[idx[b]]
		if ra.rev != rb.rev {
			return ra.rev < rb.rev
		}
		return subs[idx[a]] < subs[idx[b]]
	})
	st.log = make([]changeRecord, len(recs))
	for i, j := range idx {
		st.log[i] = recs[j]
	}
	return st, nil
}
