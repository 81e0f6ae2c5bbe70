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
)

// oldDataDir writes dir/raft/raft.db as chute kept it before raft-wal:
// the log (entries 1 to n) and the stable store in one bbolt file, the
// server id among the stable keys.
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
	var logs []*raft.Log
	for i := uint64(1); i <= n; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := bolt.StoreLogs(logs); err != nil {
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

// checkLog checks s holds entries 1 to n, each with its data, and that
// raft.db holds none any more.
func checkLog(t *testing.T, s *stores, n uint64) {
	t.Helper()
	first, _ := s.logs.FirstIndex()
	last, _ := s.logs.LastIndex()
	if first != 1 || last != n {
		t.Fatalf("log holds %d to %d, want 1 to %d", first, last, n)
	}
	for i := uint64(1); i <= n; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err != nil || len(l.Data) != 1 || l.Data[0] != byte(i) {
			t.Fatalf("entry %d: %v %v", i, l.Data, err)
		}
	}
	if last, _ := s.bolt.LastIndex(); last != 0 {
		t.Fatalf("raft.db still holds entries up to %d", last)
	}
}

// TestStores_moveOldLog opens a data dir of an earlier chute, whose log
// was in raft.db: every entry moves to the write-ahead log, and the
// server id and term stay.
func TestStores_moveOldLog(t *testing.T) {
	dir := t.TempDir()
	id := oldDataDir(t, dir, 300)
	var logs strings.Builder
	s, err := openStores(dir, 0xaa, 1, newHCLog(slog.New(slog.NewTextHandler(&logs, nil)), "raft"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.close() }()
	if s.id != id {
		t.Fatalf("server id %s, want %s", s.id, id)
	}
	if !s.hadState {
		t.Fatal("the moved store has no raft state")
	}
	if term, _ := s.bolt.GetUint64([]byte("CurrentTerm")); term != 1 {
		t.Fatalf("term %d, want 1", term)
	}
	checkLog(t, s, 300)
	if !strings.Contains(logs.String(), "moved the raft log") {
		t.Fatalf("no log line of the move in %q", logs.String())
	}
}

// TestStores_moveOldLog_crashed opens a data dir where a move was cut
// short: a copy left in wal.tmp is made again, and a move cut after its
// rename only deletes raft.db's entries.
func TestStores_moveOldLog_crashed(t *testing.T) {
	hc := newHCLog(slog.New(slog.DiscardHandler), "raft")
	t.Run("before the rename", func(t *testing.T) {
		dir := t.TempDir()
		oldDataDir(t, dir, 50)
		tmp := filepath.Join(dir, raftDir, walTmpDir)
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openStores(dir, 0xaa, 1, hc)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.close() }()
		checkLog(t, s, 50)
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("wal.tmp left: %v", err)
		}
	})
	t.Run("after the rename", func(t *testing.T) {
		dir := t.TempDir()
		oldDataDir(t, dir, 50)
		s, err := openStores(dir, 0xaa, 1, hc)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
		oldDataDir(t, dir, 50) // raft.db's entries back, as if not yet deleted
		if s, err = openStores(dir, 0xaa, 1, hc); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.close() }()
		checkLog(t, s, 50)
	})
}

// TestStores_reopen closes and opens the stores again in one process:
// raft-wal's Close leaves its meta store's lock held, which stores.close
// releases.
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
	checkLog(t, s, 3)
}
