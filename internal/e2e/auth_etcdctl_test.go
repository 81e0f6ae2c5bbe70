//go:build e2e

package e2e

import (
	"testing"
)

// The auth tests compare chute's Auth service with etcd 3.4's through
// etcdctl: users, roles, key-range permissions and what a user without
// the permission hears. A put to /q/ch:events/p/1 is a plain key in etcd
// and a queue put in chute; both answer OK, so the compared scripts use
// queue keys only where the answers agree (a put's OK, a denial), never
// read them back. What happens to the rows is chute's alone
// (auth_producer_test.go).

// Users of the auth scripts, as etcdctl's --user takes them.
const (
	authRootPass = "r00t-pw"
	authProdPass = "pr0d-pw"
	authRoot     = "root:" + authRootPass
	authProd     = "prod:" + authProdPass
)

// authSetup adds root and a producer user prod whose role producer may
// write /q/ch:events/p/ and nothing else, and enables auth. It records
// every command, errors included: etcd 3.4 refuses auth enable without a
// root user, and etcdctl's auth enable grants root the root role after
// the server's "root user does not have root role".
func authSetup(s *session) {
	s.ctl("auth", "enable")
	s.ctl("user", "add", "root", "--new-user-password="+authRootPass)
	s.ctl("user", "add", "root", "--new-user-password=other")
	s.ctl("role", "add", "producer")
	s.ctl("role", "add", "producer")
	s.ctlIn(authProdPass+"\n", "user", "add", "prod", "--interactive=false")
	s.ctl("user", "grant-role", "prod", "producer")
	s.ctl("user", "grant-role", "prod", "nosuch")
	s.ctl("role", "grant-permission", "producer", "write", "/q/ch:events/p/", "--prefix")
	s.ctl("auth", "enable")
}

// TestAuth_etcdctl_rootAndProducer runs users, roles and auth enable and
// disable with etcdctl: without a user a call answers "user name is
// empty", with a wrong password "authentication failed", root reads and
// writes, and prod puts to /q/ch:events/p/ but hears "permission denied"
// for another queue, /config/, the queue's record, plain keys and the
// auth calls. Changed passwords, revoked permissions and deleted roles
// take effect at once.
func TestAuth_etcdctl_rootAndProducer(t *testing.T) {
	t.Parallel()
	startOpenPair(t).run(t, authRootAndProducer)
}

// authRootAndProducer is the script of TestAuth_etcdctl_rootAndProducer.
func authRootAndProducer(s *session) {
	authSetup(s)
	s.note("auth is on")
	s.ctl("get", "a")
	s.ctl("--user", "root:wrong", "get", "a")
	s.ctl("--user", "nobody:"+authRootPass, "get", "a")
	s.ctl("--user", "root", "--password", authRootPass, "put", "a", "1")
	s.ctl("--user", authRoot, "get", "a")
	s.ctl("--user", authRoot, "user", "list")
	s.ctl("--user", authRoot, "role", "list")
	s.ctl("--user", authRoot, "user", "get", "prod")
	s.ctl("--user", authRoot, "role", "get", "producer")
	s.ctl("--user", authRoot, "role", "get", "root")
	s.ctl("--user", authRoot, "user", "get", "root")

	s.note("root's put creates the queue; prod may produce to it and do nothing else")
	s.ctl("--user", authRoot, "put", "/q/ch:events/p/0", `{"id":0}`)
	s.ctl("--user", authProd, "put", "/q/ch:events/p/1", `{"id":1}`)
	s.ctl("--user", authProd, "put", "/q/ch:other/p/1", `{"id":1}`)
	s.ctl("--user", authProd, "put", "/q/ch:new/p/1", `{"id":1}`)
	s.ctl("--user", authProd, "get", "/config/", "--prefix")
	s.ctl("--user", authProd, "put", "/config/queues/ch:events", `{"max_bytes":10}`)
	s.ctl("--user", authProd, "del", "/q/ch:events")
	s.ctl("--user", authProd, "get", "/q/ch:events")
	s.ctl("--user", authProd, "get", "a")
	s.ctl("--user", authProd, "put", "a", "2")
	s.ctlIn("\nput /q/ch:events/p/2 '{\"id\":2}'\nput /q/ch:other/p/2 '{\"id\":2}'\n\n\n", "--user", authProd, "txn")
	s.ctl("--user", authProd, "user", "list")
	s.ctl("--user", authProd, "role", "get", "producer")
	s.ctl("--user", authProd, "user", "add", "intruder", "--new-user-password=x")
	s.ctl("--user", authProd, "role", "grant-permission", "producer", "readwrite", "/", "--prefix")
	s.ctl("--user", authProd, "auth", "disable")
	s.ctl("--user", authRoot, "get", "a")

	s.note("a new password, a revoked permission, a deleted role and user")
	s.ctlIn("n3w-pw\n", "--user", authRoot, "user", "passwd", "prod", "--interactive=false")
	s.ctl("--user", authProd, "put", "/q/ch:events/p/3", `{"id":3}`)
	s.ctl("--user", "prod:n3w-pw", "put", "/q/ch:events/p/3", `{"id":3}`)
	s.ctl("--user", authRoot, "role", "revoke-permission", "producer", "/q/ch:events/p/", "--prefix")
	s.ctl("--user", authRoot, "role", "revoke-permission", "producer", "/q/ch:events/p/", "--prefix")
	s.ctl("--user", authRoot, "role", "get", "producer")
	s.ctl("--user", "prod:n3w-pw", "put", "/q/ch:events/p/4", `{"id":4}`)
	s.ctl("--user", authRoot, "role", "grant-permission", "producer", "write", "/q/ch:events/p/", "--prefix")
	s.ctl("--user", "prod:n3w-pw", "put", "/q/ch:events/p/5", `{"id":5}`)
	s.ctl("--user", authRoot, "user", "revoke-role", "prod", "producer")
	s.ctl("--user", authRoot, "user", "revoke-role", "prod", "producer")
	s.ctl("--user", "prod:n3w-pw", "put", "/q/ch:events/p/6", `{"id":6}`)
	s.ctl("--user", authRoot, "role", "delete", "producer")
	s.ctl("--user", authRoot, "role", "get", "producer")
	s.ctl("--user", authRoot, "user", "delete", "prod")
	s.ctl("--user", authRoot, "user", "get", "prod")
	s.ctl("--user", "prod:n3w-pw", "get", "a")
	s.ctl("--user", authRoot, "user", "delete", "root")
	s.ctl("--user", authRoot, "role", "revoke-permission", "root", "/", "--prefix")
	s.ctl("--user", authRoot, "user", "list")
	s.ctl("--user", authRoot, "role", "list")

	s.note("auth is off again")
	s.ctl("--user", authRoot, "auth", "disable")
	s.ctl("get", "a")
	s.ctl("put", "a", "3")
	s.ctl("--user", authRoot, "get", "a")
	s.ctl("user", "list")
	s.ctl("auth", "enable")
	s.ctl("get", "a")
	s.ctl("--user", authRoot, "get", "a")
}

// appAuthSetup is the etcdctl calls that add root and a user app with
// readwrite on app/, then enable auth.
func appAuthSetup() [][]string {
	return [][]string{
		{"user", "add", "root", "--new-user-password=" + authRootPass},
		{"user", "add", "app", "--new-user-password=" + authProdPass},
		{"role", "add", "app"},
		{"role", "grant-permission", "app", "readwrite", "app/", "--prefix"},
		{"user", "grant-role", "app", "app"},
		{"auth", "enable"},
	}
}
