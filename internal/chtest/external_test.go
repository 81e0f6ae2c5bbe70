//go:build e2e

package chtest

import "testing"

// A server named by EnvURL is used as it is: Exec creates tables in it,
// a leftover of an earlier run is dropped first, and what the test
// created is gone when it ends. A local server stands in for the remote
// one.
func TestStart_external(t *testing.T) {
	local := Start(t)
	local.Exec(t, "CREATE TABLE default.leftover (id UInt64) ENGINE = MergeTree ORDER BY id")
	local.Exec(t, "INSERT INTO default.leftover VALUES (1)")

	t.Run("remote", func(t *testing.T) {
		t.Setenv(EnvURL, "http://default@"+local.HTTPAddr())
		ext := Start(t)
		if !ext.External() || ext.HTTPAddr() != local.HTTPAddr() {
			t.Fatalf("Start with %s: got external %v at %s, want the server at %s", EnvURL, ext.External(), ext.HTTPAddr(), local.HTTPAddr())
		}
		// The leftover is dropped, not reused with its row.
		ext.Exec(t, "CREATE TABLE default.leftover (id UInt64) ENGINE = MergeTree ORDER BY id")
		if n := ext.Count(t, "default.leftover"); n != 0 {
			t.Errorf("rows in a re-created table: got %d, want 0", n)
		}
		if !ext.AtLeast(t, 18, 16) || ext.AtLeast(t, 99, 0) {
			t.Errorf("AtLeast on version %s: wrong", ext.Version(t))
		}
	})
	if got := local.Query(t, "SELECT count() FROM system.tables WHERE database = 'default' AND name = 'leftover'"); got != "0" {
		t.Errorf("tables named leftover after the test that created one: got %s, want 0", got)
	}
}

func TestCreateRE(t *testing.T) {
	for _, tc := range []struct{ sql, kind, name string }{
		{"CREATE TABLE default.t (id UInt64) ENGINE = Memory", "TABLE", "default.t"},
		{"  create table if not exists a.`b c`(id UInt64)", "table", "a.`b c`"},
		{"CREATE DATABASE analytics", "DATABASE", "analytics"},
		{"INSERT INTO t VALUES (1)", "", ""},
	} {
		m := createRE.FindStringSubmatch(tc.sql)
		var kind, name string
		if m != nil {
			kind, name = m[1], m[2]
		}
		if kind != tc.kind || name != tc.name {
			t.Errorf("createRE(%q): got %q %q, want %q %q", tc.sql, kind, name, tc.kind, tc.name)
		}
	}
	if got := quoteString(`it's a \ path`); got != `'it\'s a \\ path'` {
		t.Errorf("quoteString: got %s", got)
	}
}
