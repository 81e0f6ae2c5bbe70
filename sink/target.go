package sink

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Queue name prefixes that make a queue a ClickHouse queue. Both are
// case-sensitive.
const (
	prefixCH         = "ch:"
	prefixClickHouse = "clickhouse:"
)

// DefaultDatabase is the database of a table named without one when no
// database is configured.
const DefaultDatabase = "default"

// TableOf reports whether queue is a ClickHouse queue and, if so, the table
// it names: "ch:events" and "clickhouse:events" name "events",
// "ch:analytics.events" names "analytics.events". The rest after the prefix
// is trimmed of spaces; an empty rest ("ch:") makes an ordinary queue.
func TableOf(queue string) (table string, ok bool) {
	rest, found := strings.CutPrefix(queue, prefixCH)
	if !found {
		rest, found = strings.CutPrefix(queue, prefixClickHouse)
	}
	if !found {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return "", false
	}
	return rest, true
}

// ErrTableName is wrapped, with the rule broken, by CheckQueue.
var ErrTableName = errors.New("sink: not a ClickHouse table name")

// CheckQueue reports why a ClickHouse queue's name does not name a table:
// after its prefix it must be table or db.table, each part non-empty,
// valid UTF-8, without white space or control characters, and at most
// one dot. It returns nil for an ordinary queue (see TableOf) and for a
// name that passes. The rest of a name is checked as written, spaces
// around it included, although TableOf trims them: "ch: events" is a
// ClickHouse queue that no put may use.
//
// Every name is backquoted in the INSERT, so ClickHouse takes any other
// character. A dot is not taken inside a part: ClickHouse reads a.b.c
// as three parts, and "a"."b.c" would be a table few would mean, whose
// name no glob of --clickhouse-allow-tables could tell from a database.
func CheckQueue(queue string) error {
	rest, found := strings.CutPrefix(queue, prefixCH)
	if !found {
		rest, found = strings.CutPrefix(queue, prefixClickHouse)
	}
	if !found || strings.TrimSpace(rest) == "" {
		return nil
	}
	const want = "name a ClickHouse queue ch:{table} or ch:{db}.{table}"
	if !utf8.ValidString(rest) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrTableName, rest)
	}
	for i, r := range rest {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: %q has a space or control character at byte %d; %s", ErrTableName, rest, i, want)
		}
	}
	db, table, dotted := strings.Cut(rest, ".")
	switch {
	case !dotted:
		return nil
	case strings.Contains(table, "."):
		return fmt.Errorf("%w: %q has more than one dot; %s", ErrTableName, rest, want)
	case db == "":
		return fmt.Errorf("%w: %q has an empty database before the dot; %s", ErrTableName, rest, want)
	case table == "":
		return fmt.Errorf("%w: %q has an empty table after the dot; %s", ErrTableName, rest, want)
	}
	return nil
}

// SplitTable returns the database and the table, unquoted, that a table
// from TableOf names: a table that carries a database before its first
// dot ("other.events") uses it, whatever db says; otherwise db is used,
// DefaultDatabase when db is blank. An empty database part (".events")
// counts as none. The rest after the first dot is the table, dots and all
// ("a.b.c" is table "b.c" in database "a"; CheckQueue refuses such names
// at put time).
func SplitTable(db, table string) (string, string) {
	db = strings.TrimSpace(db)
	if db == "" {
		db = DefaultDatabase
	}
	if d, t, ok := strings.Cut(table, "."); ok {
		if d != "" {
			db = d
		}
		table = t
	}
	return db, table
}

// Target returns the quoted `db`.`table` an INSERT names, for the
// database and table SplitTable gives.
func Target(db, table string) string {
	db, table = SplitTable(db, table)
	return QuoteIdent(db) + "." + QuoteIdent(table)
}

// QuoteIdent quotes s as a ClickHouse identifier: inside backquotes a
// backquote is doubled and a backslash, which starts an escape sequence in
// ClickHouse's backquoted identifiers (18.16 reads `a\tb` as "a", tab, "b"),
// is doubled too, so every name reaches the server as it was written.
func QuoteIdent(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('`')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '`':
			b.WriteString("``")
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('`')
	return b.String()
}
