package chtest

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// EnvURL names a running ClickHouse the tests use instead of starting
// Debian's clickhouse-server: "http://[user:pass@]host:port". It is for
// checking chute against a newer server than the one the machine has
// (make test-clickhouse-modern); it must be a server the tests may write
// to, as they create and drop their tables, databases and users in it.
const EnvURL = "CHUTE_TEST_CLICKHOUSE_URL"

// external is a server the tests did not start, named by EnvURL.
type external struct {
	addr           string // host:port
	user, password string // the URL's credentials; Exec, Query and Count act as this user
}

// createRE finds what an Exec creates, so that it can be dropped first
// (a leftover of an earlier run) and when the test ends.
var createRE = regexp.MustCompile("(?is)^\\s*CREATE\\s+(TABLE|DATABASE)\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?((?:`[^`]*`|[^\\s(`])+)")

// startExternal returns the server EnvURL names, after a /ping, with
// Options.User created through SQL (the URL's user needs access
// management, as CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT=1 gives it in the
// official image). Options that need the server's own configuration (TLS)
// skip the test, saying why.
func startExternal(t testing.TB, raw string, o Options) *Server {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		t.Fatalf("chtest: %s must be http://[user:pass@]host:port (https is not supported here)", EnvURL)
	}
	if o.TLSCertFile != "" {
		t.Skipf("chtest: this test needs a local clickhouse-server with an https port; %s names another server", EnvURL)
	}
	ext := &external{addr: u.Host}
	if u.User != nil {
		ext.user = u.User.Username()
		ext.password, _ = u.User.Password()
	}
	s := newServer(ext)
	t.Cleanup(s.client.CloseIdleConnections)
	if got := strings.TrimSpace(s.do(t, "SELECT 1")); got != "1" {
		t.Fatalf("chtest: %s: SELECT 1 answered %q", EnvURL, got)
	}
	if o.User != "" {
		s.createUser(t, o)
	}
	return s
}

// createUser creates Options.User with its password and settings, able to
// use every database, and drops it when the test ends.
func (s *Server) createUser(t testing.TB, o Options) {
	t.Helper()
	s.do(t, "DROP USER IF EXISTS "+o.User)
	stmt := "CREATE USER " + o.User
	if o.Password != "" {
		stmt += " IDENTIFIED WITH plaintext_password BY " + quoteString(o.Password)
	} else {
		stmt += " IDENTIFIED WITH no_password"
	}
	if len(o.Settings) > 0 {
		names := make([]string, 0, len(o.Settings))
		for k := range o.Settings {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, k := range names {
			names[i] = k + " = " + quoteString(o.Settings[k])
		}
		stmt += " SETTINGS " + strings.Join(names, ", ")
	}
	s.do(t, stmt)
	s.do(t, "GRANT ALL ON *.* TO "+o.User)
	t.Cleanup(func() { s.dropQuietly("DROP USER IF EXISTS " + o.User) })
}

// created drops what sql creates, if it exists, and drops it again when
// the test ends. It does nothing for other statements.
func (s *Server) created(t testing.TB, sql string) {
	m := createRE.FindStringSubmatch(sql)
	if m == nil {
		return
	}
	drop := "DROP " + strings.ToUpper(m[1]) + " IF EXISTS " + m[2]
	s.do(t, drop)
	t.Cleanup(func() { s.dropQuietly(drop) })
}

// dropQuietly runs a DROP at cleanup, where a failure is only logged to
// stderr: the test's result is already decided.
func (s *Server) dropQuietly(sql string) {
	resp, err := s.client.Do(s.request(sql))
	if err != nil {
		fmt.Fprintf(os.Stderr, "chtest: %s: %v\n", sql, err)
		return
	}
	resp.Body.Close()
}

// needsProcess skips a test that controls the server's process when the
// server is EnvURL's.
func (s *Server) needsProcess(t testing.TB, what string) {
	t.Helper()
	if s.ext != nil {
		t.Skipf("chtest: %s needs a local clickhouse-server; %s names another server", what, EnvURL)
	}
}

// quoteString quotes s as a ClickHouse string literal.
func quoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// External reports whether the tests use the server EnvURL names rather
// than one they started.
func (s *Server) External() bool { return s.ext != nil }

// Version returns the server's version(), such as "18.16.1" or "25.3.2.39".
func (s *Server) Version(t testing.TB) string {
	t.Helper()
	return s.Query(t, "SELECT version()")
}

// AtLeast reports whether the server's version is major.minor or later.
func (s *Server) AtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	var ma, mi int
	if _, err := fmt.Sscanf(s.Version(t), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("chtest: version %q: %v", s.Version(t), err)
	}
	return slices.Compare([]int{ma, mi}, []int{major, minor}) >= 0
}
