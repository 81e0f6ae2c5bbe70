package raftnode

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// oldDataDir writes dir/raft/raft.db as chute keeps it: the log (entries
// 1 to n) and the stable store in one bbolt file, the server id among the
// stable keys.
func oldDataDir(t *testing.T, dir string, n uint64) raft.ServerID {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, raftDir), 0o700); err != nil {
		t.Fatal(err)
	}
	bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, raftDir, stableFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := bolt.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if err := bolt.StoreLogs(entries(1, n, 1)); err != nil {
		t.Fatal(err)
	}
	if err := bolt.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	id := raft.ServerID("00000000000000aa-0000beef")
	if err := bolt.Set(serverIDKey, []byte(id)); err != nil {
		t.Fatal(err)
	}
	return id
}

// entries returns log entries from to to of term, each with its index's
// low byte as data.
func entries(from, to, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	return logs
}

// walDataDir writes dir/raft as the chute versions that kept the log in
// raft-wal left it: the stable store in raft.db, and raft-wal's log in
// raft/wal, to which write writes.
func walDataDir(t *testing.T, dir string, write func(w *wal.WAL)) {
	t.Helper()
	oldDataDir(t, dir, 0)
	walPath := filepath.Join(dir, raftDir, walDir)
	if err := os.MkdirAll(walPath, 0o700); err != nil {
		t.Fatal(err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walPath, wal.WithMetaStore(meta), wal.WithSegmentSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	write(w)
	if err := errors.Join(w.Close(), meta.Close()); err != nil {
		t.Fatal(err)
	}
}

// checkLog checks s holds entries 1 to n, each with its data, the entries
// from tailFrom on of term 2, the others of term 1.
func checkLog(t *testing.T, s *stores, n, tailFrom uint64) {
	t.Helper()
	first, _ := s.logs.FirstIndex()
	last, _ := s.logs.LastIndex()
	if first != 1 || last != n {
		t.Fatalf("log holds %d to %d, want 1 to %d", first, last, n)
	}
	for i := uint64(1); i <= n; i++ {
		var l raft.Log
		term := uint64(1)
		if tailFrom > 0 && i >= tailFrom {
			term = 2
		}
		if err := s.logs.GetLog(i, &l); err != nil || len(l.Data) != 1 || l.Data[0] != byte(i) || l.Term != term {
			t.Fatalf("entry %d: %v term %d, %v; want term %d", i, l.Data, l.Term, err, term)
		}
	}
}

// TestStores_oldLogInRaftDB: a data dir whose log is in raft.db opens as
// it is, its server id and term kept.
func TestStores_oldLogInRaftDB(t *testing.T) {
	dir := t.TempDir()
	id := oldDataDir(t, dir, 300)
	s, err := openStores(dir, 0xaa, 1, newHCLog(slog.New(slog.DiscardHandler), "raft"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.close() }()
	if s.id != id || !s.hadState {
		t.Fatalf("server id %s, state %v; want %s, true", s.id, s.hadState, id)
	}
	if term, _ := s.bolt.GetUint64([]byte("CurrentTerm")); term != 1 {
		t.Fatalf("term %d, want 1", term)
	}
	checkLog(t, s, 300, 0)
}

// TestStores_moveWAL: the log of a data dir written by the versions that
// kept it in raft-wal moves back into raft.db, a head truncation's
// entries left behind, and raft/wal goes.
func TestStores_moveWAL(t *testing.T) {
	dir := t.TempDir()
	walDataDir(t, dir, func(w *wal.WAL) {
		if err := w.StoreLogs(entries(1, 300, 1)); err != nil {
			t.Fatal(err)
		}
	})
	var logs strings.Builder
	s, err := openStores(dir, 0xaa, 1, newHCLog(slog.New(slog.NewTextHandler(&logs, nil)), "raft"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.close() }()
	checkLog(t, s, 300, 0)
	for _, d := range []string{walDir, walMovedDir} {
		if _, err := os.Stat(filepath.Join(dir, raftDir, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("raft/%s left: %v", d, err)
		}
	}
	if !strings.Contains(logs.String(), "moved the raft log out of raft-wal") {
		t.Errorf("no log line of the move in %q", logs.String())
	}
}

// TestStores_moveWAL_truncatedTail: raft deletes a suffix of the log when
// a new leader replaces entries it never committed (a leader killed or
// frozen with entries in flight, rejoining). raft-wal v0.4.0 then seals
// the segment without its index, and cannot read it again: the node
// panicked at its next start, for good (hashicorp/raft-wal#31). Its
// entries move into raft.db all the same, the replaced ones as the
// leader's; and raft.db's log survives a truncation of its own.
func TestStores_moveWAL_truncatedTail(t *testing.T) {
	dir := t.TempDir()
	walDataDir(t, dir, func(w *wal.WAL) {
		if err := w.StoreLogs(entries(1, 40, 1)); err != nil {
			t.Fatal(err)
		}
		if err := w.DeleteRange(36, 40); err != nil { // what raft does with a conflicting suffix
			t.Fatal(err)
		}
		if err := w.StoreLogs(entries(36, 60, 2)); err != nil {
			t.Fatal(err)
		}
	})
	hc := newHCLog(slog.New(slog.DiscardHandler), "raft")
	s, err := openStores(dir, 0xaa, 1, hc)
	if err != nil {
		t.Fatalf("open after a truncated tail: %v", err)
	}
	checkLog(t, s, 60, 36)
	if err := s.logs.DeleteRange(56, 60); err != nil {
		t.Fatal(err)
	}
	if err := s.logs.StoreLogs(entries(56, 70, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if s, err = openStores(dir, 0xaa, 1, hc); err != nil {
		t.Fatalf("open after raft.db's log lost a suffix: %v", err)
	}
	defer func() { _ = s.close() }()
	checkLog(t, s, 70, 36)
}

// TestStores_moveWAL_crashed: a move cut short is made again: before the
// rename, raft.db's partial copy is replaced; after it, wal.moved goes. A
// wal.tmp of an earlier version's move the other way is deleted (raft.db
// holds that log whole).
func TestStores_moveWAL_crashed(t *testing.T) {
	hc := newHCLog(slog.New(slog.DiscardHandler), "raft")
	t.Run("before the rename", func(t *testing.T) {
		dir := t.TempDir()
		walDataDir(t, dir, func(w *wal.WAL) {
			if err := w.StoreLogs(entries(1, 50, 1)); err != nil {
				t.Fatal(err)
			}
		})
		bolt, err := raftboltdb.NewBoltStore(filepath.Join(dir, raftDir, stableFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(bolt.StoreLogs(entries(1, 20, 1)), bolt.Close()); err != nil { // a partial copy
			t.Fatal(err)
		}
		s, err := openStores(dir, 0xaa, 1, hc)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.close() }()
		checkLog(t, s, 50, 0)
	})
	t.Run("after the rename", func(t *testing.T) {
		dir := t.TempDir()
		oldDataDir(t, dir, 50)
		for _, d := range []string{walMovedDir, walTmpDir} {
			if err := os.MkdirAll(filepath.Join(dir, raftDir, d), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, raftDir, d, "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s, err := openStores(dir, 0xaa, 1, hc)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.close() }()
		checkLog(t, s, 50, 0)
		for _, d := range []string{walMovedDir, walTmpDir} {
			if _, err := os.Stat(filepath.Join(dir, raftDir, d)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("raft/%s left: %v", d, err)
			}
		}
	})
}

// TestStores_reopen closes and opens the stores again in one process.
func TestStores_reopen(t *testing.T) {
	dir := t.TempDir()
	hc := newHCLog(slog.New(slog.DiscardHandler), "raft")
	for i := range 3 {
		s, err := openStores(dir, 0xaa, 1, hc)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := s.logs.StoreLog(&raft.Log{Index: uint64(i + 1), Term: 1, Data: []byte{byte(i + 1)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.close(); err != nil {
			t.Fatalf("close %d: %v", i, err)
		}
	}
	s, err := openStores(dir, 0xaa, 1, hc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.close() }()
	checkLog(t, s, 3, 0)
}

// TestStores_otherMember: a data dir opened under another member (the
// node started with another --name) is refused, naming both: its raft
// server would be the old member's, and Status, MoveLeader and the
// member list would not agree on who leads.
func TestStores_otherMember(t *testing.T) {
	dir := t.TempDir()
	oldDataDir(t, dir, 3)
	hc := newHCLog(slog.New(slog.DiscardHandler), "raft")
	s, err := openStores(dir, 0xbb, 1, hc)
	if err == nil {
		_ = s.close()
		t.Fatal("a data dir of member aa opened as member bb")
	}
	if !strings.Contains(err.Error(), "00000000000000aa") || !strings.Contains(err.Error(), "00000000000000bb") {
		t.Errorf("error %q, want both members named", err)
	}
	if s, err = openStores(dir, 0xaa, 1, hc); err != nil {
		t.Fatalf("the data dir's own member: %v", err)
	}
	_ = s.close()
}
