//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// authParityEnv, set to anything, makes every etcdctl parity test
// (compareWithEtcd, startPair) run with auth enabled on both servers and
// etcdctl logged in as root: the transcripts must not change.
const authParityEnv = "E2E_ETCDCTL_AUTH"

// rootEtcdctl writes an etcdctl that logs in as root and returns its
// path. A transcript records the arguments a script gave, not the
// wrapper's, so it reads as without auth.
func rootEtcdctl(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "etcdctl")
	script := "#!/bin/sh\nexec " + shellWord(lookTool(t, "etcdctl")) + " --user " + shellWord(authRoot) + " \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatalf("write the root etcdctl: %v", err)
	}
	return path
}

// startOpenPair is startPair without auth, whatever E2E_ETCDCTL_AUTH
// says: for the scripts that enable auth themselves.
func startOpenPair(t *testing.T) *pair {
	t.Helper()
	pr := &pair{etcd: StartEtcd(t), chute: StartChute(t, "--name", "default")}
	pr.want, pr.got = newSession(t, pr.etcd), newSession(t, pr.chute)
	return pr
}

// startAuthPair is startPair with auth enabled on both servers, before the
// script runs and unrecorded, and sessions whose etcdctl logs in as root.
func startAuthPair(t *testing.T) *pair {
	t.Helper()
	// The lowest bcrypt cost on both: etcdctl logs in at every command,
	// and at the default cost a login takes a noticeable part of a
	// second on a busy machine, which the lease scripts' remaining TTLs
	// would show.
	pr := &pair{etcd: StartEtcd(t, "--bcrypt-cost", "4"), chute: StartChute(t, "--name", "default", "--bcrypt-cost", "4")}
	pr.want, pr.got = newSession(t, pr.etcd), newSession(t, pr.chute)
	root := rootEtcdctl(t)
	for _, s := range []*session{pr.want, pr.got} {
		ctlOK(t, s.p, "", "user", "add", "root", "--new-user-password="+authRootPass)
		ctlOK(t, s.p, "", "auth", "enable")
		s.etcdctl = root
	}
	return pr
}

// authParityScript is a bit of each kind of call the parity tests make:
// puts and gets with revisions, a txn, deletes, a lease with its keys, a
// watch replaying history, compaction.
func authParityScript(s *session) {
	s.putAll("k", "1", "k", "2", "p/a", "x", "p/b", "y")
	s.ctl("get", "-w", "json", "k")
	s.ctl("get", "--prefix", "p/", "--rev", "4")
	s.ctlIn("value(\"k\") = \"2\"\n\nput t ok\n\nput t no\n\n", "txn")
	s.ctl("del", "--prev-kv", "p/a")
	l := s.grant(100)
	s.ctl("put", "--lease="+l, "leased", "v")
	s.ctl("lease", "timetolive", "--keys", l)
	s.ctl("lease", "keep-alive", "--once", l)
	w := s.startSynced(1, "watch", "--prefix", "p/", "--rev", "2", "-w", "json")
	s.ctl("put", "p/c", "z")
	s.endWatch(w, 1+1)
	s.ctl("lease", "revoke", l)
	s.ctl("get", "leased")
	s.ctl("compaction", "3")
	s.ctl("get", "k", "--rev", "2")
	s.ctl("get", "-w", "json", "--prefix", "")
}

// TestAuth_etcdctl_parityAsRoot runs the same calls as the parity tests,
// with auth enabled and etcdctl logged in as root, against etcd and
// chute: the transcripts agree. E2E_ETCDCTL_AUTH=1 runs every parity test
// so.
func TestAuth_etcdctl_parityAsRoot(t *testing.T) {
	t.Parallel()
	startAuthPair(t).run(t, authParityScript)
}
