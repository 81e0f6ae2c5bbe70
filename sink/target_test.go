package sink

import (
	"errors"
	"strings"
	"testing"
)

func TestTableOf(t *testing.T) {
	tests := []struct {
		queue string
		table string
		ok    bool
	}{
		{"ch:events", "events", true},
		{"clickhouse:events", "events", true},
		{"ch:analytics.events", "analytics.events", true},
		{"ch: events ", "events", true},
		{"analytics", "", false},
		{"ch:", "", false},
		{"ch:  ", "", false},
		{"clickhouse:", "", false},
		{"", "", false},
		{"CH:events", "", false},
		{"jobs:ch:events", "", false},
	}
	for _, tt := range tests {
		table, ok := TableOf(tt.queue)
		if table != tt.table || ok != tt.ok {
			t.Errorf("TableOf(%q): got (%q, %v), want (%q, %v)", tt.queue, table, ok, tt.table, tt.ok)
		}
	}
}

func TestTarget(t *testing.T) {
	tests := []struct {
		db, table, want string
	}{
		{"", "events", "`default`.`events`"},
		{"  ", "events", "`default`.`events`"},
		{"analytics", "events", "`analytics`.`events`"},
		{"x", "other.events", "`other`.`events`"},
		{"", "other.events", "`other`.`events`"},
		{"x", ".events", "`x`.`events`"},
		{"", "a.b.c", "`a`.`b.c`"},
		{"", "a`b", "`default`.`a``b`"},
		{"d`b", "t", "`d``b`.`t`"},
		{"", `a\b`, "`default`.`a\\\\b`"},
	}
	for _, tt := range tests {
		if got := Target(tt.db, tt.table); got != tt.want {
			t.Errorf("Target(%q, %q): got %s, want %s", tt.db, tt.table, got, tt.want)
		}
	}
}

func TestQuoteIdent(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a`b", "`a``b`"},
		{"events", "`events`"},
		{"", "``"},
		{`a\b`, "`a\\\\b`"},
		{`\` + "`", "`\\\\```"},
		{"日本", "`日本`"},
	}
	for _, tt := range tests {
		if got := QuoteIdent(tt.in); got != tt.want {
			t.Errorf("QuoteIdent(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// unquoteIdent reads a backquoted identifier as ClickHouse's lexer does for
// the two escapes QuoteIdent writes: a doubled backquote and a backslash
// followed by any byte.
func unquoteIdent(q string) (string, bool) {
	if len(q) < 2 || q[0] != '`' || q[len(q)-1] != '`' {
		return "", false
	}
	in := q[1 : len(q)-1]
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case '`':
			if i+1 >= len(in) || in[i+1] != '`' {
				return "", false // a lone backquote would end the identifier
			}
			b.WriteByte('`')
			i++
		case '\\':
			if i+1 >= len(in) {
				return "", false // would escape the closing backquote
			}
			b.WriteByte(in[i+1])
			i++
		default:
			b.WriteByte(in[i])
		}
	}
	return b.String(), true
}

func FuzzQuoteIdent(f *testing.F) {
	for _, s := range []string{"", "a`b", `a\b`, "``", `\\`, "x`\\`y", "events"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := QuoteIdent(s)
		got, ok := unquoteIdent(q)
		if !ok || got != s {
			t.Fatalf("QuoteIdent(%q) = %q, which reads back as (%q, %v)", s, q, got, ok)
		}
	})
}

func TestCheckQueue_cases(t *testing.T) {
	tests := []struct {
		queue string
		want  string // "" for nil; else part of the message
	}{
		{"ch:events", ""},
		{"clickhouse:events", ""},
		{"ch:analytics.events", ""},
		{"ch:my-table_2", ""},
		{"ch:日本.表", ""},
		{"ch:a`b", ""},
		{"ch:", ""},   // an ordinary queue
		{"ch:  ", ""}, // likewise
		{"jobs", ""},
		{"", ""},
		{"ch:default.", "empty table after the dot"},
		{"ch:.events", "empty database before the dot"},
		{"ch:.", "empty database"},
		{"ch:a.b.c", "more than one dot"},
		{"ch:a..b", "more than one dot"},
		{"ch: events", "space or control character at byte 0"},
		{"ch:ev ents", "space or control character at byte 2"},
		{"ch:events\t", "space or control character"},
		{"ch:ev\x00ents", "space or control character"},
		{"ch:ev\u00a0ents", "space or control character"},
		{"ch:ev\x7fents", "space or control character"},
		{"ch:ev\xffents", "not valid UTF-8"},
		{"clickhouse:.events", "empty database"},
	}
	for _, tt := range tests {
		err := CheckQueue(tt.queue)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckQueue(%q): got %v, want nil", tt.queue, err)
		case tt.want != "" && (!errors.Is(err, ErrTableName) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckQueue(%q): got %v, want ErrTableName saying %q", tt.queue, err, tt.want)
		}
	}
}

// FuzzCheckQueue checks that a name CheckQueue takes is an ordinary
// queue or names one database and one table, both non-empty and without
// a dot, that SplitTable and Target agree on.
func FuzzCheckQueue(f *testing.F) {
	for _, s := range []string{"ch:events", "ch:a.b", "ch:a.b.c", "ch:.e", "ch:d.", "clickhouse:x", "ch: ", "ch:a\x00", "ch:`.`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, queue string) {
		if CheckQueue(queue) != nil {
			return
		}
		table, ok := TableOf(queue)
		if !ok {
			return
		}
		db, tbl := SplitTable("default", table)
		if db == "" || tbl == "" || strings.Contains(db, ".") || strings.Contains(tbl, ".") {
			t.Fatalf("CheckQueue(%q) passed; SplitTable gives %q, %q", queue, db, tbl)
		}
		if got, want := Target("default", table), QuoteIdent(db)+"."+QuoteIdent(tbl); got != want {
			t.Fatalf("Target of %q: got %s, want %s", queue, got, want)
		}
	})
}
