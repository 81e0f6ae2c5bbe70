package raftnode

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"chute/gossip"
)

// Layout of Config.Dir.
const (
	raftDir      = "raft"          // the raft stores' folder
	logFile      = "raft.db"       // log and stable store, one bbolt file
	snapshotsDir = "snapshots"     // raft.FileSnapshotStore's base
	logCacheSize = 512             // recent entries raft reads from memory
	openTimeout  = 1 * time.Second // wait for another process's file lock
)

// serverIDKey holds the raft server id in the stable store: it lives as
// long as the log does, so a wiped data dir is a new server.
var serverIDKey = []byte("chute-server-id")

// stores are a node's raft stores under Config.Dir.
type stores struct {
	bolt  *raftboltdb.BoltStore // log and stable store; closed by close
	logs  raft.LogStore         // bolt behind a cache
	snaps raft.SnapshotStore
	id    raft.ServerID
	// hadState is raft.HasExistingState at open: a log, a snapshot or a
	// term from an earlier run.
	hadState bool
}

// openStores opens (creating when missing) the stores in dir/raft and
// the server id, minting it for a new store.
func openStores(dir string, memberID uint64, retain int, logOutput io.Writer) (*stores, error) {
	base := filepath.Join(dir, raftDir)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(base, logFile),
		BoltOptions: &bbolt.Options{Timeout: openTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("raftnode: open log store: %w", err)
	}
	s := &stores{bolt: bolt}
	if err := s.open(base, memberID, retain, logOutput); err != nil {
		_ = bolt.Close()
		return nil, err
	}
	return s, nil
}

func (s *stores) open(base string, memberID uint64, retain int, logOutput io.Writer) error {
	logs, err := raft.NewLogCache(logCacheSize, s.bolt)
	if err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	s.logs = logs
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(base, snapshotsDir), retain, logOutput)
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

// close closes the bolt file; raft must be shut down first.
func (s *stores) close() error {
	if err := s.bolt.Close(); err != nil {
		return fmt.Errorf("raftnode: close log store: %w", err)
	}
	return nil
}
