//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

func TestEtcdctl_put_emptyKey(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "", "v")
		s.ctl("put", "", "")
		s.ctl("get", "")
		s.ctl("del", "")
		s.ctl("get", "", "b")
		s.ctl("del", "", "b")
		s.ctlIn("\nput '' v\n\n\n", "txn", "-i")
		s.ctl("get", "-w", "json", "--prefix", "")
	})
}

func TestEtcdctl_put_valueTooLarge(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		// Values this large cannot be arguments (Linux caps one at
		// 128 KiB), so etcdctl reads them from its standard input.
		s.ctlIn(strings.Repeat("v", 1<<20), "put", "mib")           // 1 MiB: under the 1.5 MiB limit
		s.ctlIn(strings.Repeat("v", 1677722), "put", "toolarge")    // 1.6 MiB
		s.ctlIn(strings.Repeat("v", 1572864+1), "put", "justabove") // limit + 1
		s.ctl("get", "--prefix", "--keys-only", "")
		s.ctl("get", "-w", "json", "--keys-only", "toolarge")
	})
}

// txnOps returns n lines "put <prefix><i> v".
func txnOps(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "put %s%d v\n", prefix, i)
	}
	return b.String()
}

func TestEtcdctl_txn_tooManyOps(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctlIn("\n"+txnOps("k", 129)+"\n\n", "txn", "-i")
		s.ctl("get", "-w", "json", "--prefix", "--keys-only", "--limit", "1", "k")
		s.ctlIn("\n\n"+txnOps("f", 129)+"\n", "txn", "-i")
		var cmps strings.Builder
		for i := range 129 {
			fmt.Fprintf(&cmps, "version(\"c%d\") = \"0\"\n", i)
		}
		s.ctlIn(cmps.String()+"\nput c v\n\n\n", "txn", "-i")
		// The limit is per list: 128 compares, 128 successes and 128
		// failures make a valid txn.
		cmps.Reset()
		for i := range 128 {
			fmt.Fprintf(&cmps, "version(\"c%d\") = \"0\"\n", i)
		}
		s.ctlIn(cmps.String()+"\n"+txnOps("s", 128)+"\n"+txnOps("f", 128)+"\n", "txn", "-i")
		s.ctl("get", "-w", "json", "--prefix", "--keys-only", "--limit", "2", "s")
	})
}

func TestEtcdctl_put_unknownLease(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "--lease=1234abcd", "k", "v")
		s.ctlIn("\nput --lease=1234abcd k v\n\n\n", "txn", "-i")
		s.ctl("put", "k", "v")
		s.ctl("put", "--lease=1234abcd", "--ignore-value", "k")
		s.ctl("get", "-w", "json", "k")
	})
}

func TestEtcdctl_get_futureRevision(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "a", "1") // revision 2
		s.ctl("get", "--rev", "3", "a")
		s.ctl("get", "--rev", "1000", "-w", "json", "--prefix", "")
		s.ctl("get", "--rev", "2", "a")
		s.ctl("get", "--rev", "-1", "a")
		s.ctlIn("\n\nget --rev 3 a\n\n", "txn", "-i")
	})
}

// TestChute_put_keyTooLarge covers a limit etcd does not have: chute
// refuses keys over 1 KiB with InvalidArgument "etcdserver: key is too
// large". etcdctl 3.4 does not know that message, so it prints the gRPC
// error whole.
func TestChute_put_keyTooLarge(t *testing.T) {
	t.Parallel()
	chute := StartChute(t)
	s := newSession(t, chute)
	const wantErr = "Error: rpc error: code = InvalidArgument desc = etcdserver: key is too large"
	key1024 := strings.Repeat("k", 1024)
	key1025 := strings.Repeat("k", 1025)

	if res := s.ctl("put", key1024, "v"); res.Code != 0 || res.Stdout != "OK\n" {
		t.Errorf("put of a 1024-byte key: got exit %d, stdout %q, stderr %q; want exit 0, OK", res.Code, res.Stdout, res.Stderr)
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"put", "", []string{"put", key1025, "v"}},
		{"txn put", "\nput " + key1025 + " v\n\n\n", []string{"txn", "-i"}},
	} {
		res := s.ctlIn(tc.stdin, tc.args...)
		lines := strings.Split(strings.TrimSuffix(res.Stderr, "\n"), "\n")
		if res.Code != 1 || strings.Contains(res.Stdout, "OK") || lines[len(lines)-1] != wantErr {
			t.Errorf("%s of a 1025-byte key: got exit %d, stdout %q, stderr %q; want exit 1, no OK, stderr ending in %q",
				tc.name, res.Code, res.Stdout, res.Stderr, wantErr)
		}
	}
	if res := s.ctl("get", "--prefix", "--keys-only", ""); res.Stdout != key1024+"\n\n" {
		t.Errorf("get --prefix --keys-only: got %q, want only the 1024-byte key", res.Stdout)
	}
}
