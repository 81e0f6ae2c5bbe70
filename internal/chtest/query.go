package chtest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// maxShownSQL bounds how much of a statement a failure message repeats.
const maxShownSQL = 200

// Exec runs one statement as the default user (POST /, the statement as the
// body) and fails the test with ClickHouse's message if it does not answer
// 200. An INSERT may carry its rows after the statement, on the next line.
func (s *Server) Exec(t testing.TB, sql string) {
	t.Helper()
	if s.ext != nil {
		s.created(t, sql)
	}
	s.do(t, sql)
}

// Query runs one statement as the default user and returns the response
// body (TabSeparated unless the statement says FORMAT) without its final
// newline. It fails the test if ClickHouse does not answer 200.
func (s *Server) Query(t testing.TB, sql string) string {
	t.Helper()
	return strings.TrimSuffix(s.do(t, sql), "\n")
}

// Count returns SELECT count() FROM table. table is used as written, so it
// may be "db.t" or a quoted name.
func (s *Server) Count(t testing.TB, table string) int {
	t.Helper()
	out := s.Query(t, "SELECT count() FROM "+table)
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("chtest: count of %s: got %q, want a number", table, out)
	}
	return n
}

// do posts sql and returns the body of a 200 answer.
func (s *Server) do(t testing.TB, sql string) string {
	t.Helper()
	resp, err := s.client.Do(s.request(sql))
	if err != nil {
		t.Fatalf("chtest: %s: %v", shorten(sql), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("chtest: %s: read response: %v", shorten(sql), err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chtest: %s: HTTP %d: %s", shorten(sql), resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return string(body)
}

// request is the POST that runs sql, as the default user or, on the
// server EnvURL names, as the URL's user.
func (s *Server) request(sql string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/", strings.NewReader(sql)) // the URL is ours: no error
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	if s.ext != nil && s.ext.user != "" {
		req.SetBasicAuth(s.ext.user, s.ext.password)
	}
	return req
}

func shorten(sql string) string {
	sql = strings.TrimSpace(sql)
	if len(sql) > maxShownSQL {
		return fmt.Sprintf("%s... (%d bytes)", sql[:maxShownSQL], len(sql))
	}
	return sql
}
