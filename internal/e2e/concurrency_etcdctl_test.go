//go:build e2e

package e2e

import (
	"regexp"
	"testing"
)

// etcdctl lock and elect run clientv3/concurrency recipes, made of KV,
// Lease and Watch calls (not etcd's Lock and Election services). Their keys
// end in the session's lease id, which the test did not grant.
var recipeKeyRE = regexp.MustCompile(`(?m)^(mylock|myelection)/[0-9a-f]+$`)

func normaliseRecipeKeys(transcript string) string {
	return recipeKeyRE.ReplaceAllString(transcript, "$1/<lease>")
}

func TestEtcdctl_lock(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "a", "1")
		s.ctl("lock", "mylock", "echo", "locked")
		s.ctl("lock", "--ttl", "5", "mylock", "--", "sh", "-c", "echo $ETCD_LOCK_KEY; echo $ETCD_LOCK_REV")
		s.ctl("get", "--prefix", "mylock")
		held := s.start("lock", "mylock")
		s.endWatch(held, 2) // the key, then its empty value
	}, normaliseRecipeKeys)
}

func TestEtcdctl_elect(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		leader := s.start("elect", "myelection", "p1")
		if !leader.waitLines(2) {
			s.note("p1 was not elected within %v", watchTimeout)
		}
		listener := s.start("elect", "-l", "myelection")
		s.endWatch(listener, 2)
		s.endWatch(leader, 2)
		s.ctl("get", "--prefix", "--print-value-only", "myelection")
	}, normaliseRecipeKeys)
}
