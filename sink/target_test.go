package sink

import (
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
