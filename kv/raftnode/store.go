package raftnode

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"chute/gossip"
)

// Layout of Config.Dir.
const (
	raftDir        = "raft"          // the raft stores' folder
	stableFile     = "raft.db"       // the log and the stable store, a bbolt file
	walDir         = "wal"           // the log of chute versions that kept it in raft-wal
	walTmpDir      = "wal.tmp"       // a log those versions were moving out of raft.db
	walMovedDir    = "wal.moved"     // raft-wal's log, moved back into raft.db, being deleted
	snapshotsDir   = "snapshots"     // raft.FileSnapshotStore's base
	logCacheSize   = 512             // recent entries raft reads from memory
	copyBatchBytes = 1 << 20         // a batch of the log moved into raft.db
	openTimeout    = 1 * time.Second // wait for another process's file lock
)

// serverIDKey holds the raft server id in the stable store: it lives as
// long as the log does, so a wiped data dir is a new server.
var serverIDKey = []byte("chute-server-id")

// stores are a node's raft stores under Config.Dir.
type stores struct {
	bolt  *raftboltdb.BoltStore // the log and the stable store; closed by close
	logs  raft.LogStore         // bolt behind a cache
	snaps raft.SnapshotStore
	id    raft.ServerID
	// hadState is raft.HasExistingState at open: a log, a snapshot or a
	// term from an earlier run.
	hadState bool
}

// openStores opens (creating when missing) the stores in dir/raft and
// the server id, minting it for a new store. The bbolt file is opened
// first: its file lock keeps a second process off the data dir.
func openStores(dir string, memberID uint64, retain int, hc hclog.Logger) (*stores, error) {
	base := filepath.Join(dir, raftDir)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(base, stableFile),
		BoltOptions: &bbolt.Options{Timeout: openTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("raftnode: open stable store: %w", err)
	}
	s := &stores{bolt: bolt}
	if err := s.open(base, memberID, retain, hc); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

func (s *stores) open(base string, memberID uint64, retain int, hc hclog.Logger) error {
	if err := moveWAL(base, s.bolt, hc); err != nil {
		return fmt.Errorf("raftnode: move the log out of %s: %w", filepath.Join(base, walDir), err)
	}
	logs, err := raft.NewLogCache(logCacheSize, s.bolt)
	if err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	s.logs = logs
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(base, snapshotsDir), retain, hc.StandardWriter(nil))
	if err != nil {
		return fmt.Errorf("raftnode: open snapshot store: %w", err)
	}
	s.snaps = snaps
	if s.hadState, err = raft.HasExistingState(s.logs, s.bolt, s.snaps); err != nil {
		return fmt.Errorf("raftnode: read raft state: %w", err)
	}
	s.id, err = serverID(s.bolt, memberID)
	return err
}

// serverID returns the server id kept in stable, minting and storing one
// when there is none: the member id, a dash and 8 random hex digits, so
// that one member's servers from different data dirs never share an id.
func serverID(stable *raftboltdb.BoltStore, memberID uint64) (raft.ServerID, error) {
	v, err := stable.Get(serverIDKey)
	if err == nil && len(v) > 0 {
		id := raft.ServerID(v)
		if m, ok := MemberOf(id); ok && m != memberID {
			// Another --name on this data dir: its raft server and the
			// member that gossip names would be two ids, and Status,
			// MoveLeader and the member list would not agree on who
			// leads.
			return "", fmt.Errorf("raftnode: the data dir is member %s's (raft server %s), not %s's: start it with that member's --name, or this one on an empty data dir",
				gossip.ID(m), id, gossip.ID(memberID))
		}
		return id, nil
	}
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return "", fmt.Errorf("raftnode: read server id: %w", err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("raftnode: mint server id: %w", err)
	}
	id := fmt.Sprintf("%s-%08x", gossip.ID(memberID), binary.BigEndian.Uint32(b[:]))
	if err := stable.Set(serverIDKey, []byte(id)); err != nil {
		return "", fmt.Errorf("raftnode: store server id: %w", err)
	}
	return raft.ServerID(id), nil
}

// MemberOf returns the member id a server id starts with (see
// serverID), false when it has none.
func MemberOf(id raft.ServerID) (uint64, bool) {
	if len(id) < 17 || id[16] != '-' {
		return 0, false
	}
	m, err := strconv.ParseUint(string(id[:16]), 16, 64)
	if err != nil {
		return 0, false
	}
	return m, true
}

// moveWAL moves the log of a data dir written by the chute versions that
// kept it in raft-wal (base/wal) back into raft.db, where raft-boltdb
// keeps it. raft-wal v0.4.0 seals a segment without its index when raft
// deletes a suffix of the log (a leader killed or frozen with entries
// not committed, which the next leader replaces: hashicorp/raft-wal#31,
// fixed in no release), and cannot read that segment again: the node
// panicked at its next start, for good. So the segments are read here
// by scanning their committed frames (segment.Filer.DumpSegment), each
// within the bounds raft-wal's meta store gives it, which needs no
// index. raft.db's own entries, if any (a move of earlier versions cut
// short), are replaced; the segments are renamed away once copied, then
// deleted, so that a crash at any point leaves one whole log.
func moveWAL(base string, bolt *raftboltdb.BoltStore, hc hclog.Logger) error {
	moved := filepath.Join(base, walMovedDir)
	if err := os.RemoveAll(filepath.Join(base, walTmpDir)); err != nil { // raft.db's log is whole
		return err
	}
	if _, err := os.Stat(moved); err == nil {
		if err := os.RemoveAll(moved); err != nil {
			return err
		}
		if err := syncDir(base); err != nil {
			return err
		}
	}
	dir := filepath.Join(base, walDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := clearLog(bolt); err != nil {
		return err
	}
	first, last, err := copyWAL(dir, bolt)
	if err != nil {
		return err
	}
	if err := os.Rename(dir, moved); err != nil {
		return err
	}
	if err := syncDir(base); err != nil {
		return err
	}
	hc.Info("moved the raft log out of raft-wal into raft.db", "first", first, "last", last)
	if err := os.RemoveAll(moved); err != nil {
		return err
	}
	return syncDir(base)
}

// clearLog deletes every entry of bolt's log.
func clearLog(bolt *raftboltdb.BoltStore) error {
	first, err := bolt.FirstIndex()
	if err != nil {
		return err
	}
	last, err := bolt.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	return bolt.DeleteRange(first, last)
}

// copyWAL copies the entries of raft-wal's log in dir into bolt, in
// batches, and returns the first and last index copied (0, 0 for none).
func copyWAL(dir string, bolt *raftboltdb.BoltStore) (first, last uint64, err error) {
	meta := &metadb.BoltMetaDB{}
	state, err := meta.Load(dir)
	if err != nil {
		return 0, 0, errors.Join(err, meta.Close())
	}
	if err := meta.Close(); err != nil {
		return 0, 0, err
	}
	filer := segment.NewFiler(dir, walfs.New())
	var batch []*raft.Log
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := bolt.StoreLogs(batch)
		batch, size = batch[:0], 0
		return err
	}
	for _, seg := range state.Segments {
		if seg.Codec != wal.CodecBinaryV1 {
			return 0, 0, fmt.Errorf("segment %d: codec %d, not raft-wal's binary codec", seg.ID, seg.Codec)
		}
		// Entries from MinIndex (a head truncation raises it past
		// BaseIndex) to MaxIndex (a tail truncation lowers it; 0 for the
		// segment being written: to its last committed frame). The
		// upper bound is applied here, not by DumpSegment, which drops
		// the entries of a commit it stops in the middle of.
		after := max(seg.MinIndex, seg.BaseIndex) - 1
		err := filer.DumpSegment(seg.BaseIndex, seg.ID, after, 0, func(_ types.SegmentInfo, e types.LogEntry) (bool, error) {
			if seg.MaxIndex > 0 && e.Index > seg.MaxIndex {
				return true, nil // deleted by a tail truncation
			}
			if last != 0 && e.Index != last+1 {
				return false, fmt.Errorf("segment %d: entry %d after %d", seg.ID, e.Index, last)
			}
			var l raft.Log
			if err := (&wal.BinaryCodec{}).Decode(e.Data, &l); err != nil {
				return false, fmt.Errorf("segment %d: entry %d: %w", seg.ID, e.Index, err)
			}
			if l.Index != e.Index {
				return false, fmt.Errorf("segment %d: entry %d holds index %d", seg.ID, e.Index, l.Index)
			}
			if first == 0 {
				first = l.Index
			}
			last = l.Index
			batch = append(batch, &l)
			if size += len(l.Data) + len(l.Extensions); size >= copyBatchBytes {
				return true, flush()
			}
			return true, nil
		})
		if err != nil {
			return 0, 0, err
		}
	}
	return first, last, flush()
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// close closes the stores; raft must be shut down first.
func (s *stores) close() error {
	if err := s.bolt.Close(); err != nil {
		return fmt.Errorf("raftnode: close stable store: %w", err)
	}
	return nil
}
