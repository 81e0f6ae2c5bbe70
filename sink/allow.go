package sink

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
)

// systemDatabases are ClickHouse's own databases. A pattern that only
// matches them by a wildcard does not let puts reach them: only a pattern
// whose database is spelled out does ("system.query_log", "system.*").
var systemDatabases = [...]string{"system", "INFORMATION_SCHEMA", "information_schema"}

// DefaultAllowPattern is the pattern of an AllowList built from no
// pattern: every table, outside the system databases.
const DefaultAllowPattern = "*.*"

// ErrAllowPattern is wrapped by NewAllowList for a pattern it cannot use.
var ErrAllowPattern = errors.New("sink: allowed-table pattern")

// AllowList is the set of tables that puts to ClickHouse queues may
// reach (--clickhouse-allow-tables). It is immutable, so one list may be
// shared by any number of goroutines; a reload builds a new one.
//
// Each pattern is db.table, with exactly one dot; each side is matched
// against the database and the table with path.Match: * any run of
// characters, ? one character, [...] a class, \ quotes the next
// character. Names are matched as ClickHouse spells them, case and all.
// A table is allowed when a pattern matches it, except in ClickHouse's
// own databases (system, INFORMATION_SCHEMA, information_schema), which
// only a pattern spelling the database out allows: with the default
// *.*, ch:system.query_log is refused; with *.*,system.query_log, that
// one table is allowed and system.tables is not.
type AllowList struct {
	patterns []allowPattern
	text     string // for messages: the patterns and the system databases they leave out
}

// allowPattern is one db.table pattern, split at its dot.
type allowPattern struct {
	db, table string
	literalDB bool // db has no wildcard: it may name a system database
}

// NewAllowList parses patterns (see AllowList). No pattern, or only
// blank ones, means DefaultAllowPattern. A pattern without exactly one
// dot, with an empty side, with a space or control character, or that
// path.Match refuses is an error wrapping ErrAllowPattern.
func NewAllowList(patterns []string) (*AllowList, error) {
	a := &AllowList{}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		ap, err := parseAllowPattern(p)
		if err != nil {
			return nil, err
		}
		a.patterns = append(a.patterns, ap)
	}
	if len(a.patterns) == 0 {
		a.patterns = []allowPattern{{db: "*", table: "*"}}
	}
	a.text = a.describe()
	return a, nil
}

func parseAllowPattern(p string) (allowPattern, error) {
	bad := func(why string) (allowPattern, error) {
		return allowPattern{}, fmt.Errorf("%w %q: %s; want db.table, such as default.* or analytics.events", ErrAllowPattern, p, why)
	}
	if strings.IndexFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return bad("it holds a space or control character")
	}
	db, table, ok := strings.Cut(p, ".")
	switch {
	case !ok:
		return bad("no dot")
	case strings.Contains(table, "."):
		return bad("more than one dot")
	case db == "" || table == "":
		return bad("an empty side")
	}
	for _, side := range []string{db, table} {
		if _, err := path.Match(side, ""); err != nil {
			return bad(err.Error())
		}
	}
	return allowPattern{db: db, table: table, literalDB: !strings.ContainsAny(db, `*?[\`)}, nil
}

// Allows reports whether a put may reach table in database db (both
// unquoted, as SplitTable returns them). A nil list is the default one.
func (a *AllowList) Allows(db, table string) bool {
	if a == nil {
		return !isSystemDatabase(db)
	}
	system := isSystemDatabase(db)
	for _, p := range a.patterns {
		if system && (!p.literalDB || p.db != db) {
			continue
		}
		if ok, _ := path.Match(p.db, db); !ok {
			continue
		}
		if ok, _ := path.Match(p.table, table); ok {
			return true
		}
	}
	return false
}

// String returns the patterns, comma-separated, followed by the system
// databases a wildcard would match but that stay refused: "*.* except
// system.*, INFORMATION_SCHEMA.*, information_schema.*".
func (a *AllowList) String() string {
	if a == nil {
		return DefaultAllowPattern + " except system.*, INFORMATION_SCHEMA.*, information_schema.*"
	}
	return a.text
}

func (a *AllowList) describe() string {
	var b strings.Builder
	var except []string
	for i, p := range a.patterns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.db + "." + p.table)
		if p.literalDB {
			continue
		}
		for _, s := range systemDatabases {
			if ok, _ := path.Match(p.db, s); ok && !slices.Contains(except, s+".*") {
				except = append(except, s+".*")
			}
		}
	}
	if len(except) > 0 {
		b.WriteString(" except " + strings.Join(except, ", "))
	}
	return b.String()
}

func isSystemDatabase(db string) bool {
	return slices.Contains(systemDatabases[:], db)
}
