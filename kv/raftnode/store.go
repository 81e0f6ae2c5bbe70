package raftnode

import (
	"context"
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
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
	"go.etcd.io/bbolt"

	"chute/gossip"
)

// Layout of Config.Dir.
const (
	raftDir        = "raft"          // the raft stores' folder
	stableFile     = "raft.db"       // the stable store, a bbolt file; earlier, the log too
	walDir         = "wal"           // the log store, raft-wal's segments
	walTmpDir      = "wal.tmp"       // a log being moved out of raft.db
	snapshotsDir   = "snapshots"     // raft.FileSnapshotStore's base
	logCacheSize   = 512             // recent entries raft reads from memory
	copyBatchBytes = 1 << 20         // a batch of the log moved out of raft.db
	openTimeout    = 1 * time.Second // wait for another process's file lock
)

// serverIDKey holds the raft server id in the stable store: it lives as
// long as the log does, so a wiped data dir is a new server.
var serverIDKey = []byte("chute-server-id")

// stores are a node's raft stores under Config.Dir.
type stores struct {
	bolt  *raftboltdb.BoltStore // the stable store; closed by close
	wal   *wal.WAL              // the log store; closed by close
	meta  *metadb.BoltMetaDB    // the log store's index; closed by close after wal
	logs  raft.LogStore         // wal behind a cache
	snaps raft.SnapshotStore
	id    raft.ServerID
	// hadState is raft.HasExistingState at open: a log, a snapshot or a
	// term from an earlier run.
	hadState bool
}

// openStores opens (creating when missing) the stores in dir/raft and
// the server id, minting it for a new store. The stable store is opened
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
	var err error
	s.meta = &metadb.BoltMetaDB{}
	if s.wal, err = openWAL(base, s.bolt, s.meta, hc); err != nil {
		return err
	}
	logs, err := raft.NewLogCache(logCacheSize, s.wal)
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
		return raft.ServerID(v), nil
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

// openWAL opens the log store in base/wal on meta, first moving into it
// the log an earlier chute kept in raft.db (see moveLog). raft-wal's
// Close leaves its meta store open, holding the file's lock: the caller
// closes meta after the WAL.
func openWAL(base string, bolt *raftboltdb.BoltStore, meta *metadb.BoltMetaDB, hc hclog.Logger) (*wal.WAL, error) {
	dir := filepath.Join(base, walDir)
	if err := moveLog(base, bolt, hc); err != nil {
		return nil, fmt.Errorf("raftnode: move the log out of %s: %w", stableFile, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	w, err := wal.Open(dir, wal.WithLogger(hc.Named("wal")), wal.WithMetaStore(meta))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("raftnode: open log store: %w", err), meta.Close())
	}
	return w, nil
}

// moveLog moves the log entries of raft.db, where chute kept them
// before raft-wal, into base/wal. The copy is made in wal.tmp and
// renamed: a crash before the rename leaves raft.db's log whole, one
// after it leaves the entries in both, and the next open ends the move
// by deleting raft.db's.
func moveLog(base string, bolt *raftboltdb.BoltStore, hc hclog.Logger) error {
	first, err := bolt.FirstIndex()
	if err != nil {
		return err
	}
	last, err := bolt.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	dir, tmp := filepath.Join(base, walDir), filepath.Join(base, walTmpDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := copyLog(tmp, bolt, hc); err != nil {
			return err
		}
		if err := os.Rename(tmp, dir); err != nil {
			return err
		}
		if err := syncDir(base); err != nil {
			return err
		}
		hc.Info("moved the raft log into the write-ahead log", "from", stableFile, "first", first, "last", last)
	} else if err != nil {
		return err
	}
	return bolt.DeleteRange(first, last)
}

// copyLog copies bolt's log into a new raft-wal in dir.
func copyLog(dir string, bolt *raftboltdb.BoltStore, hc hclog.Logger) error {
	if err := os.RemoveAll(dir); err != nil { // a copy a crash cut short
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithLogger(hc.Named("wal")), wal.WithMetaStore(meta))
	if err != nil {
		return errors.Join(err, meta.Close())
	}
	err = migrate.CopyLogs(context.Background(), w, bolt, copyBatchBytes, nil)
	return errors.Join(err, w.Close(), meta.Close())
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// close closes the stores that are open; raft must be shut down first.
func (s *stores) close() error {
	var errs []error
	if s.wal != nil {
		if err := errors.Join(s.wal.Close(), s.meta.Close()); err != nil {
			errs = append(errs, fmt.Errorf("raftnode: close log store: %w", err))
		}
	}
	if err := s.bolt.Close(); err != nil {
		errs = append(errs, fmt.Errorf("raftnode: close stable store: %w", err))
	}
	return errors.Join(errs...)
}
