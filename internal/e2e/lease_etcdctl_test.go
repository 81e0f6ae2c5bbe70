//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// expiryTimeout bounds the wait for a 2-second lease to expire: etcd checks
// for expired leases every 500 ms and revokes them through raft.
const expiryTimeout = 10 * time.Second

func TestEtcdctl_lease_grantTimeToLiveRevoke(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		l := s.grant(100)
		s.ctl("put", "--lease="+l, "lk", "v")
		s.ctl("put", "--lease="+l, "lk2", "v")
		s.ctl("put", "plain", "v")
		s.ctl("get", "-w", "json", "lk")
		s.ctl("lease", "timetolive", l)
		s.ctl("lease", "timetolive", "--keys", l)
		s.ctl("lease", "timetolive", "--keys", "-w", "json", l)
		s.ctl("lease", "revoke", l)
		s.ctl("get", "--prefix", "-w", "json", "")
		s.ctl("lease", "timetolive", l)
		s.ctl("lease", "timetolive", "--keys", "-w", "json", l)
		s.ctl("lease", "revoke", l)
		s.ctl("lease", "timetolive", "0")
		s.ctl("lease", "revoke", "123")
	})
}

func TestEtcdctl_lease_grantTTL(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		// etcd raises a TTL under its minimum (2 s by default) to it.
		for _, ttl := range []int{0, 1, 2, 3, 1000, 9000000000, 9000000001} {
			s.grant(ttl)
		}
		// A lease raised to the minimum TTL lives that long.
		l := s.grant(1)
		s.ctl("lease", "timetolive", l)
		s.ctl("lease", "grant", "x")
		s.ctl("lease", "grant")
		s.grant(50, "-w", "json")
	})
}

func TestEtcdctl_lease_list(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("lease", "list")
		s.ctl("lease", "list", "-w", "json")
		// Granted in order of expiry, which etcd lists them by.
		s.grant(100)
		s.grant(200)
		s.grant(300)
		s.ctl("lease", "list")
		s.ctl("lease", "list", "-w", "json")
	})
}

func TestEtcdctl_lease_keepAliveOnce(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		l := s.grant(100)
		s.ctl("put", "--lease="+l, "k", "v")
		s.ctl("lease", "keep-alive", "--once", l)
		s.ctl("lease", "keep-alive", "--once", "-w", "json", l)
		s.ctl("lease", "timetolive", "--keys", l)
		s.ctl("lease", "revoke", l)
		s.ctl("lease", "keep-alive", "--once", l)
		s.ctl("lease", "keep-alive", "--once", "abc")
	})
}

// TestEtcdctl_lease_keepAlive keeps a 2-second lease alive past its TTL
// with a background keep-alive, then revokes it: the keep-alive ends.
func TestEtcdctl_lease_keepAlive(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		l := s.grant(2)
		s.ctl("put", "--lease="+l, "k", "v")
		granted := time.Now()
		ka := s.start("lease", "keep-alive", l)
		// etcdctl renews every TTL/3; a keep-alive that was answered after
		// the TTL proves the lease outlived it.
		renewedPastTTL := false
		lines := 0
		ka.waitFor(func(out string) bool {
			if n := strings.Count(out, "\n"); n > lines {
				lines = n
				renewedPastTTL = time.Since(granted) > 2500*time.Millisecond
			}
			return renewedPastTTL
		})
		if !renewedPastTTL {
			s.note("no keep-alive answered 2.5 s after the grant")
		}
		s.ctl("get", "--print-value-only", "k")
		s.ctl("lease", "revoke", l)
		s.endExited(ka)
		s.ctl("get", "k")
	}, normaliseKeepAlives)
}

// normaliseKeepAlives keeps one of a background keep-alive's lines, whose
// number depends on timing.
func normaliseKeepAlives(transcript string) string {
	var out []string
	for _, l := range strings.Split(transcript, "\n") {
		if strings.Contains(l, " keepalived with TTL(") && len(out) > 0 && out[len(out)-1] == l {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestEtcdctl_lease_expiry attaches keys to a 2-second lease and waits
// until the lease expires: the keys are deleted, a watch sees the DELETE
// events, and the lease is gone.
func TestEtcdctl_lease_expiry(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		l := s.grant(2)
		s.ctl("put", "--lease="+l, "e/a", "1")
		s.ctl("put", "--lease="+l, "e/b", "2")
		s.ctl("put", "e/plain", "3")
		s.ctl("get", "--prefix", "e/")
		w := s.start("watch", "--prefix", "e/", "--rev", "5", "-w", "json")
		if !s.waitGone("e/a", expiryTimeout) {
			s.note("e/a still there %v after its lease's TTL", expiryTimeout)
		}
		s.ctl("get", "--prefix", "-w", "json", "e/")
		s.ctl("lease", "timetolive", "--keys", l)
		s.ctl("lease", "list")
		s.ctl("lease", "revoke", l)
		s.ctl("put", "--lease="+l, "e/c", "4")
		s.endWatch(w, 1)
	})
}

// waitGone polls, unrecorded, until key has no value, and reports whether
// it went within timeout.
func (s *session) waitGone(key string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		res, err := runEtcdctl(s.etcdctl, s.p.ClientAddr, "", "get", "--keys-only", key)
		if err != nil {
			s.fail("%v", err)
			return false
		}
		if res.Code == 0 && strings.TrimSpace(res.Stdout) == "" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
}

// TestEtcdctl_lease_detach overwrites leased keys with and without
// --ignore-lease and --ignore-value: a plain put detaches the key.
func TestEtcdctl_lease_detach(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		l := s.grant(100)
		s.ctl("put", "--lease="+l, "la", "1")
		s.ctl("put", "--lease="+l, "lb", "1")
		s.ctl("put", "la", "2")
		s.ctl("del", "lb")
		s.ctl("lease", "timetolive", "--keys", l)
		s.ctl("put", "--lease="+l, "lc", "1")
		s.ctl("put", "--ignore-lease", "lc", "2")
		s.ctl("put", "--lease="+l, "--ignore-value", "la")
		s.ctl("get", "-w", "json", "--prefix", "l")
		s.ctl("lease", "timetolive", "--keys", l)
		s.ctl("lease", "revoke", l)
		s.ctl("get", "-w", "json", "--prefix", "l")
	})
}
