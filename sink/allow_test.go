package sink

import (
	"errors"
	"strings"
	"testing"
)

func TestAllowList_Allows_cases(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		db, tbl  string
		want     bool
	}{
		{"default, ordinary table", nil, "default", "events", true},
		{"default, other database", nil, "analytics", "events", true},
		{"default, system", nil, "system", "query_log", false},
		{"default, INFORMATION_SCHEMA", nil, "INFORMATION_SCHEMA", "tables", false},
		{"default, information_schema", nil, "information_schema", "tables", false},
		{"default, System is another database", nil, "System", "t", true},
		{"blank patterns are the default", []string{" ", ""}, "system", "query_log", false},
		{"wildcard does not reach system", []string{"*.*"}, "system", "query_log", false},
		{"s* does not reach system", []string{"s*.*"}, "system", "query_log", false},
		{"system named outright", []string{"*.*", "system.query_log"}, "system", "query_log", true},
		{"only the named table", []string{"*.*", "system.query_log"}, "system", "tables", false},
		{"system.*", []string{"system.*"}, "system", "tables", true},
		{"database pattern", []string{"analytics.*"}, "analytics", "events", true},
		{"database pattern, other database", []string{"analytics.*"}, "default", "events", false},
		{"question mark", []string{"default.ev?nts"}, "default", "events", true},
		{"class", []string{"default.[a-e]*"}, "default", "events", true},
		{"class, no match", []string{"default.[f-z]*"}, "default", "events", false},
		{"case sensitive", []string{"Default.*"}, "default", "events", false},
		{"escaped star", []string{`default.a\*`}, "default", "a*", true},
		{"escaped star, literal only", []string{`default.a\*`}, "default", "ab", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAllowList(tc.patterns)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Allows(tc.db, tc.tbl); got != tc.want {
				t.Errorf("NewAllowList(%q).Allows(%q, %q): got %v, want %v", tc.patterns, tc.db, tc.tbl, got, tc.want)
			}
		})
	}
}

func TestAllowList_Allows_nilIsDefault(t *testing.T) {
	var a *AllowList
	if !a.Allows("default", "events") || a.Allows("system", "query_log") {
		t.Errorf("nil list: got events %v, system.query_log %v; want true, false", a.Allows("default", "events"), a.Allows("system", "query_log"))
	}
	def, _ := NewAllowList(nil)
	if a.String() != def.String() {
		t.Errorf("nil list String: got %q, want %q", a.String(), def.String())
	}
}

func TestAllowList_String_cases(t *testing.T) {
	tests := []struct {
		patterns []string
		want     string
	}{
		{nil, "*.* except system.*, INFORMATION_SCHEMA.*, information_schema.*"},
		{[]string{"default.*", "analytics.events"}, "default.*, analytics.events"},
		{[]string{"*.*", "system.query_log"}, "*.*, system.query_log except system.*, INFORMATION_SCHEMA.*, information_schema.*"},
		{[]string{"s*.*"}, "s*.* except system.*"},
	}
	for _, tc := range tests {
		a, err := NewAllowList(tc.patterns)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.String(); got != tc.want {
			t.Errorf("NewAllowList(%q).String(): got %q, want %q", tc.patterns, got, tc.want)
		}
	}
}

func TestNewAllowList_invalid(t *testing.T) {
	for _, p := range []string{"events", "a.b.c", ".events", "default.", "default.[a-", "de fault.*", "a.b\x00"} {
		_, err := NewAllowList([]string{"*.*", p})
		if !errors.Is(err, ErrAllowPattern) {
			t.Errorf("NewAllowList(%q): got %v, want an error wrapping ErrAllowPattern", p, err)
		}
	}
}

// FuzzNewAllowList checks that parsing never panics, that a list it
// returns never lets a wildcard reach a system database, and that a
// pattern allows the names it spells out.
func FuzzNewAllowList(f *testing.F) {
	for _, s := range []string{"*.*", "system.*", "a.b", "[.x", `\..*`, "s?stem.*"} {
		f.Add(s, "system", "query_log")
	}
	f.Fuzz(func(t *testing.T, pattern, db, table string) {
		a, err := NewAllowList([]string{pattern})
		if err != nil {
			return
		}
		if isSystemDatabase(db) && a.Allows(db, table) && !a.patterns[0].literalDB {
			t.Fatalf("pattern %q lets a wildcard reach %s.%s", pattern, db, table)
		}
		if d, tb, ok := splitLiteral(strings.TrimSpace(pattern)); ok && !a.Allows(d, tb) {
			t.Fatalf("pattern %q refuses %s.%s", pattern, d, tb)
		}
	})
}

// splitLiteral splits a pattern with no wildcard or escape into its names.
func splitLiteral(p string) (string, string, bool) {
	for _, c := range p {
		if c == '*' || c == '?' || c == '[' || c == '\\' {
			return "", "", false
		}
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '.' {
			return p[:i], p[i+1:], true
		}
	}
	return "", "", false
}
