//go:build e2e

package e2e

import (
	"strconv"
	"testing"
)

// putAll puts key-value pairs, in order, one revision each.
func (s *session) putAll(kvs ...string) {
	for i := 0; i+1 < len(kvs); i += 2 {
		s.ctl("put", kvs[i], kvs[i+1])
	}
}

func TestEtcdctl_revision_emptyStore(t *testing.T) {
	t.Parallel()
	// etcd's store starts at revision 1; its first write is revision 2.
	compareWithEtcd(t, func(s *session) {
		s.ctl("get", "-w", "json", "a")
		s.ctl("put", "-w", "json", "a", "1")
		s.ctl("get", "-w", "json", "a")
	})
}

func TestEtcdctl_put_getExact(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "a", "1")
		s.ctl("put", "-w", "json", "b", "2")
		s.ctl("get", "a")
		s.ctl("get", "-w", "json", "a")
		s.ctl("get", "missing")
		s.ctl("get", "-w", "json", "missing")
		s.ctl("put", "a", "one")
		s.ctl("get", "-w", "json", "a")
		s.ctl("get", "--print-value-only", "a")
		s.ctl("get", "-w", "fields", "a")
		s.ctl("put", "a", "")
		s.ctl("get", "-w", "json", "a")
		s.ctl("put", "--", "-dash", "-value")
		s.ctl("get", "--", "-dash")
		s.ctl("get", "--hex", "a")
		s.ctl("get", "--consistency=s", "-w", "json", "a")
		s.ctl("put", "ключ", "значение")
		s.ctl("get", "--hex", "ключ")
		s.ctl("get", "-w", "json", "ключ")
		s.ctl("get", "--print-value-only", "--prefix", "")
		s.ctl("get", "-w", "fields", "--prefix", "-")
	})
}

func TestEtcdctl_put_prevKV(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "--prev-kv", "a", "1")
		s.ctl("put", "--prev-kv", "a", "2")
		s.ctl("put", "--prev-kv", "-w", "json", "a", "3")
		s.ctl("put", "--prev-kv", "-w", "json", "new", "x")
	})
}

func TestEtcdctl_put_ignoreValue(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctl("put", "--ignore-value", "missing")
		s.ctl("put", "a", "1")
		s.ctl("put", "--ignore-value", "a")
		s.ctl("get", "-w", "json", "a")
		s.ctl("put", "--ignore-lease", "missing", "v")
		s.ctl("put", "--ignore-lease", "a", "2")
		s.ctl("get", "-w", "json", "a")
	})
}

func TestEtcdctl_put_fromStdin(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctlIn("line one\nline two\n", "put", "multi")
		s.ctl("get", "-w", "json", "multi")
		s.ctl("get", "multi")
	})
}

func TestEtcdctl_get_prefix(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("foo", "0", "foo/a", "1", "foo/b", "2", "fop", "3", "fo", "4", "foo/a/x", "5")
		s.ctl("get", "--prefix", "foo")
		s.ctl("get", "--prefix", "foo/")
		s.ctl("get", "--prefix", "-w", "json", "foo/")
		s.ctl("get", "--prefix", "nothing")
		s.ctl("get", "--prefix", "")
		s.ctl("get", "--prefix", "--order", "DESCEND", "fo")
	})
}

func TestEtcdctl_get_fromKey(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2", "c", "3", "d", "4")
		s.ctl("get", "--from-key", "b")
		s.ctl("get", "--from-key", "bb")
		s.ctl("get", "--from-key", "")
		s.ctl("get", "--from-key", "-w", "json", "c")
		s.ctl("get", "--from-key", "z")
		s.ctl("get", "--from-key", "--keys-only", "a")
	})
}

func TestEtcdctl_get_range(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2", "c", "3", "d", "4")
		s.ctl("get", "b", "d")
		s.ctl("get", "a", "b")
		s.ctl("get", "c", "a")
		s.ctl("get", "-w", "json", "a", "c")
	})
}

func TestEtcdctl_get_limit(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("k1", "1", "k2", "2", "k3", "3", "k4", "4")
		s.ctl("get", "--prefix", "--limit", "2", "k")
		s.ctl("get", "--prefix", "--limit", "2", "-w", "json", "k")
		s.ctl("get", "--prefix", "--limit", "4", "-w", "json", "k")
		s.ctl("get", "--prefix", "--limit", "5", "-w", "json", "k")
		s.ctl("get", "--from-key", "--limit", "1", "k2")
		s.ctl("get", "--prefix", "--limit=-1", "-w", "json", "k")
		s.ctl("get", "--prefix", "--limit", "2", "--order", "DESCEND", "k")
		s.ctl("get", "--prefix", "--limit", "2", "--sort-by", "VALUE", "--order", "DESCEND", "-w", "json", "k")
	})
}

func TestEtcdctl_get_rev(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "1", "a", "2", "c", "1")
		s.ctl("del", "b")
		s.ctl("put", "a", "3")
		for rev := 1; rev <= 7; rev++ {
			s.ctl("get", "--prefix", "-w", "json", "--rev", strconv.Itoa(rev), "")
		}
		s.ctl("get", "--rev", "3", "a")
		s.ctl("get", "--rev", "4", "b")
		s.ctl("get", "--rev", "6", "b")
		s.ctl("get", "--rev", "0", "a")
		s.ctl("get", "--prefix", "--rev", "5", "--limit", "1", "-w", "json", "")
		s.ctl("get", "--prefix", "--rev", "5", "--keys-only", "--sort-by", "MODIFY", "--order", "DESCEND", "")
	})
}

func TestEtcdctl_get_keysOnly(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "22", "c", "")
		s.ctl("get", "--prefix", "--keys-only", "")
		s.ctl("get", "--prefix", "--keys-only", "-w", "json", "")
		s.ctl("get", "--keys-only", "b")
	})
}

// etcdctl 3.4 has no --count-only (kv_clientv3_test.go covers count_only
// with the Go client); both must give etcdctl's own refusal.
func TestEtcdctl_get_countOnly(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2")
		s.ctl("get", "--prefix", "--count-only", "")
		s.ctl("get", "--prefix", "-w", "json", "--limit", "1", "")
	})
}

func TestEtcdctl_get_sort(t *testing.T) {
	t.Parallel()
	pr := startPair(t)
	// Each key's value, version, create and mod revisions sort differently.
	pr.run(t, func(s *session) {
		s.putAll("c", "2", "a", "3", "b", "1", "d", "0", "a", "9", "c", "4", "c", "5")
	})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"byKeyAscending", []string{"--sort-by", "KEY", "--order", "ASCEND"}},
		{"byKeyDescending", []string{"--sort-by", "KEY", "--order", "DESCEND"}},
		{"byKeyDefaultOrder", []string{"--sort-by", "KEY"}},
		{"byCreateAscending", []string{"--sort-by", "CREATE", "--order", "ASCEND"}},
		{"byCreateDescending", []string{"--sort-by", "CREATE", "--order", "DESCEND"}},
		{"byModAscending", []string{"--sort-by", "MODIFY", "--order", "ASCEND"}},
		{"byModDescending", []string{"--sort-by", "MODIFY", "--order", "DESCEND"}},
		{"byModDefaultOrder", []string{"--sort-by", "MODIFY"}},
		{"byValueAscending", []string{"--sort-by", "VALUE", "--order", "ASCEND"}},
		{"byValueDescending", []string{"--sort-by", "VALUE", "--order", "DESCEND"}},
		{"byVersionAscending", []string{"--sort-by", "VERSION", "--order", "ASCEND"}},
		{"byVersionDescending", []string{"--sort-by", "VERSION", "--order", "DESCEND"}},
		{"orderDescendOnly", []string{"--order", "DESCEND"}},
		{"orderAscendOnly", []string{"--order", "ASCEND"}},
		{"byModDescendingLimit2", []string{"--sort-by", "MODIFY", "--order", "DESCEND", "--limit", "2"}},
		{"byValueAscendingLimit3", []string{"--sort-by", "VALUE", "--limit", "3"}},
		{"badTarget", []string{"--sort-by", "SIZE"}},
		{"badOrder", []string{"--order", "UP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pr.run(t, func(s *session) {
				s.ctl(append([]string{"get", "--prefix", "-w", "json"}, append(tc.args, "")...)...)
				s.ctl(append([]string{"get", "--prefix", "--keys-only"}, append(tc.args, "")...)...)
			})
		})
	}
}

func TestEtcdctl_del_exact(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2")
		s.ctl("del", "a")
		s.ctl("del", "a")
		s.ctl("del", "-w", "json", "b")
		s.ctl("del", "-w", "json", "b")
		s.ctl("get", "--prefix", "-w", "json", "")
	})
}

func TestEtcdctl_del_prefix(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("foo", "0", "foo/a", "1", "foo/b", "2", "fop", "3")
		s.ctl("del", "--prefix", "foo/")
		s.ctl("get", "--prefix", "-w", "json", "")
		s.ctl("del", "--prefix", "foo/")
		s.ctl("del", "--prefix", "-w", "json", "fo")
		s.ctl("get", "--prefix", "-w", "json", "")
	})
}

func TestEtcdctl_del_prevKV(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2", "b", "3", "c", "4")
		s.ctl("del", "--prev-kv", "a")
		s.ctl("del", "--prev-kv", "-w", "json", "b")
		s.ctl("del", "--prev-kv", "missing")
		s.ctl("put", "d", "5")
		s.ctl("del", "--prev-kv", "--prefix", "")
	})
}

func TestEtcdctl_del_rangeAndFromKey(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("a", "1", "b", "2", "c", "3", "d", "4", "e", "5")
		s.ctl("del", "b", "d")
		s.ctl("get", "--prefix", "--keys-only", "")
		s.ctl("del", "--from-key", "d")
		s.ctl("get", "--prefix", "-w", "json", "")
	})
}

func TestEtcdctl_txn_compares(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("t1", "a", "t2", "b", "t2", "bb")
		for _, cmp := range []string{
			`value("t1") = "a"`,
			`value("t1") != "a"`,
			`value("t1") > "A"`,
			`value("t1") < "A"`,
			`value("missing") = ""`,
			`version("t2") = "2"`,
			`version("t2") > "2"`,
			`version("missing") = "0"`,
			`create("t1") = "2"`,
			`create("t2") < "3"`,
			`create("missing") = "0"`,
			`mod("t2") = "4"`,
			`mod("t2") > "3"`,
			`mod("missing") = "0"`,
		} {
			s.ctlIn(cmp+"\n\nget t1\n\nget t2\n\n", "txn", "-i")
		}
		s.ctl("get", "-w", "json", "--prefix", "t")
	})
}

func TestEtcdctl_txn_successBranch(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("t1", "a", "t/x", "1", "t/y", "2")
		s.ctlIn(`value("t1") = "a"
version("t1") = "1"
create("t1") > "0"
mod("t1") < "100"

put t2 b
get t1
get --prefix t/
del t/x

put t3 c

`, "txn", "-i")
		s.ctl("get", "-w", "json", "--prefix", "t")
		s.ctlIn(`mod("t2") = "5"

get t2
put --prev-kv t2 bb
del --prev-kv t/y
get --prefix --keys-only t

get t3

`, "txn", "-i", "-w", "json")
	})
}

func TestEtcdctl_txn_failureBranch(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("t1", "a")
		s.ctlIn(`value("t1") = "a"
value("t1") = "zz"

put t2 b

get t1
put t3 c
get --prefix t

`, "txn", "-i")
		s.ctl("get", "-w", "json", "--prefix", "t")
		s.ctlIn(`version("t3") = "5"

del t1

get --rev 2 t1
del --prefix t

`, "txn", "-i", "-w", "json")
		s.ctl("get", "-w", "json", "--prefix", "t")
	})
}

func TestEtcdctl_txn_noCompares(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctlIn("\nput a 1\nput b 2\n\n\n", "txn", "-i")
		s.ctlIn("\n\nput c 3\n\n", "txn", "-i", "-w", "json")
		s.ctlIn("\n\n\n", "txn", "-i", "-w", "json")
		s.ctl("get", "-w", "json", "--prefix", "")
	})
}

func TestEtcdctl_txn_duplicateKey(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.ctlIn("\nput a 1\nput a 2\n\n\n", "txn", "-i")
		s.ctlIn("\nput a 1\ndel a\n\n\n", "txn", "-i")
		s.ctlIn("\nput a 1\nget a\n\n\n", "txn", "-i")
		s.ctlIn("\nput a/b 1\ndel --prefix a\n\n\n", "txn", "-i")
		s.ctlIn("\ndel a\ndel a\n\n\n", "txn", "-i")
		s.ctlIn("\nput a 1\n\nput a 2\n\n", "txn", "-i")
		s.ctl("get", "-w", "json", "--prefix", "")
	})
}

// TestEtcdctl_txn_nestedReads reads inside txns with get's flags, before
// and after the txn's own writes.
func TestEtcdctl_txn_nestedReads(t *testing.T) {
	t.Parallel()
	compareWithEtcd(t, func(s *session) {
		s.putAll("n/a", "1", "n/b", "2", "n/c", "3", "n/a", "4") // revisions 2-5
		s.ctlIn(`version("n/a") = "2"

get --prefix --limit 2 n/
get --prefix --sort-by MODIFY --order DESCEND --keys-only n/
get --rev 2 --prefix n/
get --from-key n/b
put n/d 5
get --prefix --print-value-only n/
get n/b n/d

`, "txn", "-i")
		s.ctlIn(`value("n/d") = "5"

del --prefix n/b
get --prefix --keys-only n/
get --rev 6 n/b

get n/a

`, "txn", "-i")
		s.ctlIn("\nget --rev 100 n/a\n\n\n", "txn", "-i")
		s.ctl("get", "-w", "json", "--prefix", "n/")
	})
}
