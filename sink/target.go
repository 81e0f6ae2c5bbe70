package sink

import "strings"

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

// Target returns the quoted `db`.`table` an INSERT names. A table that
// carries a database before its first dot ("other.events") uses it, whatever
// db says; otherwise db is used, DefaultDatabase when db is blank. An empty
// database part (".events") counts as none. The rest after the first dot is
// the table, dots and all ("a.b.c" is table "b.c" in database "a").
func Target(db, table string) string {
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
