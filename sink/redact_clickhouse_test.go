//go:build e2e

package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"chute/internal/chtest"
)

// TestClickHouse_redactRows inserts rows holding marker that a real
// ClickHouse (18.16) refuses, one per data error it can give a row, and
// checks that Result.Message keeps the code and the row position but
// not marker, while Result.Detail, for the dead letter, keeps what
// ClickHouse quoted. 18.16 gives no row error with code 53
// (TYPE_MISMATCH) or 70 (CANNOT_CONVERT_TYPE): it raises them when a
// table is created, not when a row is read (tried: CAST of tuples, arrays
// and enums in MATERIALIZED columns); TestRedactRows_clickhouse1816
// covers the shapes of a newer server's texts.
func TestClickHouse_redactRows(t *testing.T) {
	srv := chtest.Start(t)
	c := NewClient(ClientConfig{Timeout: 20 * time.Second})
	ep := chEndpoint(t, srv, "", "")
	srv.Exec(t, "CREATE TABLE default.typed (id UInt64, s String, dt DateTime, fs FixedString(2), dec Decimal(9,2), e Enum8('a' = 1), uu UUID) ENGINE = Memory")
	srv.Exec(t, "CREATE TABLE default.num (s String, m UInt64 MATERIALIZED toUInt64(s)) ENGINE = Memory")
	srv.Exec(t, "CREATE TABLE default.day (s String, m Date MATERIALIZED toDate(s)) ENGINE = Memory")
	tests := []struct {
		table  string
		row    string
		code   int
		quoted bool // ClickHouse's text holds marker: Detail must keep it
		keep   string
	}{
		{"typed", `{"id":"MARKER_5f3a","s":"MARKER_5f3a"}`, 27, true, "(while read the value of key id): (at row 2)"},
		{"typed", `{"id":1,"s":1,"x":"MARKER_5f3a"}`, 26, false, "(while read the value of key s): (at row 2)"},
		{"typed", `{"id":1,"MARKER_5f3a":1}`, 117, true, "(at row 2)"},
		{"num", `{"s":"MARKER_5f3a"}`, 6, true, "Cannot parse string"},
		{"day", `{"s":"MARKER_5f3a"}`, 38, false, "Cannot parse date"},
		{"typed", `{"id":1,"dt":"MARKER_5f3a"}`, 41, false, "(while read the value of key dt): (at row 2)"},
		{"typed", `{"id":1,"dec":1234567890123.5,"s":"MARKER_5f3a"}`, 69, false, "(while read the value of key dec)"},
		{"typed", `{"id":-1,"s":"MARKER_5f3a"}`, 72, false, "(while read the value of key id): (at row 2)"},
		{"typed", `{"id":1,"fs":"MARKER_5f3a"}`, 131, false, "(while read the value of key fs): (at row 2)"},
		{"typed", `{"id":1,"e":"MARKER_5f3a"}`, 49, true, "(while read the value of key e)"},
		{"typed", `{"id":1,"uu":"MARKER_5f3a"}`, 376, true, "(while read the value of key uu): (at row 2)"},
		{"typed", `{"id":1,"s":"x"}` + "\n" + `{"id":"MARKER_5f3a"}`, 27, true, "(at row 3)"},
	}
	for _, tt := range tests {
		first := `{}` // a row every table takes, so the refused one is row 2
		if tt.table == "num" {
			first = `{"s":"1"}`
		}
		res := c.Insert(context.Background(), ep, Target("", tt.table), [][]byte{[]byte(first), []byte(tt.row)}, "")
		if res.Code != tt.code || res.Class != ClassData {
			t.Errorf("%s: got code %d, class %v (%s), want %d, data", tt.row, res.Code, res.Class, res.Message, tt.code)
			continue
		}
		if strings.Contains(res.Message, marker) {
			t.Errorf("%s: Message %q holds the row's data", tt.row, res.Message)
		}
		if !strings.HasPrefix(res.Message, "Code: ") || !strings.Contains(res.Message, tt.keep) {
			t.Errorf("%s: Message %q, want it to start with the code and keep %q", tt.row, res.Message, tt.keep)
		}
		if tt.quoted && !strings.Contains(res.Detail, marker) {
			t.Errorf("%s: Detail %q, want ClickHouse's text with the row's data", tt.row, res.Detail)
		}
		var e error = &ResultError{Op: "insert", Result: res}
		if strings.Contains(e.Error(), marker) {
			t.Errorf("%s: ResultError %q holds the row's data", tt.row, e)
		}
	}

	// 18.16 copies the input from where it stopped to the end of the
	// request: the rows after the refused one are not its dead letter's.
	const next = "NEXT_ROW_c41d"
	rows := [][]byte{[]byte(`{}`), []byte(`{"id":"MARKER_5f3a","s":"x\\n"}`), []byte(`{"id":3,"s":"` + next + `"}`)}
	res := c.Insert(context.Background(), ep, Target("", "typed"), rows, "")
	if res.Code != 27 || !strings.Contains(res.Detail, marker) || !strings.Contains(res.Detail, "(at row 2)") {
		t.Fatalf("a refused row before another: code %d, Detail %q; want 27 with the refused row's data", res.Code, res.Detail)
	}
	if strings.Contains(res.Detail, next) {
		t.Errorf("Detail %q holds the next row's data", res.Detail)
	}
}
