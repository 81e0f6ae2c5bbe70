//go:build e2e

package e2e

import (
	"path/filepath"
	"regexp"
	"testing"
)

func TestEtcdctl_compaction(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "a", "2", "b", "1", "a", "3", "b", "2") // revisions 2-6
		s.ctl("del", "b")                                          // 7
		s.ctl("compaction", "4")
		s.ctl("get", "--rev", "2", "a")
		s.ctl("get", "--rev", "3", "-w", "json", "a")
		s.ctl("get", "--rev", "4", "-w", "json", "--prefix", "")
		s.ctl("get", "--rev", "5", "-w", "json", "--prefix", "")
		s.ctl("get", "-w", "json", "--prefix", "")
		s.ctl("compaction", "4")
		s.ctl("compaction", "3")
		s.ctl("compaction", "8")
		s.ctl("compaction", "--physical", "6")
		s.ctl("get", "--rev", "5", "a")
		s.ctl("get", "--rev", "6", "-w", "json", "--prefix", "")
		s.ctl("compaction", "7") // the current revision
		s.ctl("get", "--rev", "7", "-w", "json", "--prefix", "")
		s.ctl("put", "a", "4")
		s.ctl("get", "-w", "json", "a")
		s.ctl("compaction", "0")
		s.ctl("compaction", "x")
	})
}

func TestEtcdctl_endpointStatus(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2")
		s.ctl("endpoint", "status")
		s.ctl("endpoint", "status", "-w", "json")
		s.ctl("endpoint", "status", "-w", "table")
		s.ctl("endpoint", "status", "-w", "fields")
		s.ctl("endpoint", "status", "--cluster")
	})
}

func TestEtcdctl_endpointHealth(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("endpoint", "health")
		s.ctl("endpoint", "health", "-w", "json")
		s.ctl("endpoint", "health", "-w", "table")
		s.ctl("endpoint", "health", "--cluster")
	})
}

func TestEtcdctl_endpointHashKV(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2")
		s.ctl("endpoint", "hashkv")
		s.ctl("endpoint", "hashkv", "-w", "json")
	})
}

func TestEtcdctl_memberList(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("member", "list")
		s.ctl("member", "list", "-w", "table")
		s.ctl("member", "list", "-w", "json")
	})
}

func TestEtcdctl_alarmAndDefrag(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("alarm", "list")
		s.ctl("defrag")
	})
}

func TestEtcdctl_snapshotSaveStatus(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2", "a", "3")
		file := filepath.Join(s.t.TempDir(), "snap.db")
		s.aliasRE(regexp.QuoteMeta(file), "<file>")
		s.ctl("snapshot", "save", file)
		s.ctl("snapshot", "status", "-w", "json", file)
	}, func(tr string) string {
		for _, n := range snapshotNormalisations {
			tr = n.re.ReplaceAllString(tr, n.repl)
		}
		return tr
	})
}

// What differs legitimately in snapshot save and status: the size and
// timing of the transfer, and the hash, key count and size of the bbolt
// file, whose buckets hold etcd's raft and membership data besides keys.
var snapshotNormalisations = []substitution{
	{regexp.MustCompile(`"size":"[^"]*","took":[0-9.e-]+`), `"size":"<size>","took":<took>`},
	{regexp.MustCompile(`"hash":[^,]+,"revision":(\d+),"totalKey":\d+,"totalSize":\d+`), `"hash":<hash>,"revision":$1,"totalKey":<n>,"totalSize":<size>`},
}
