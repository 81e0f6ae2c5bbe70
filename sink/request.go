package sink

import "strings"

// TokenSetting is the ClickHouse setting that names a batch so a retried
// INSERT of the same rows is dropped instead of doubled. Servers that do not
// know it (18.16) refuse every request that carries it with code 115, so a
// caller asks HasSetting first.
const TokenSetting = "insert_deduplication_token"

// InsertURI returns the origin-form request URI of one batch into target
// (a quoted name from Target):
//
//	/?query=INSERT%20INTO%20%60analytics%60.%60events%60%20FORMAT%20JSONEachRow
//
// followed by &insert_deduplication_token=<token> when token is not empty.
// Only A-Z a-z 0-9 - _ . ~ are kept; every other byte is %XX (upper-case
// hex), spaces included.
func InsertURI(target, dedupToken string) string {
	return insertURI(target, dedupToken, Settings{})
}

// insertURI is InsertURI with settings after the query and before the
// token: &name=value, by name.
func insertURI(target, dedupToken string, settings Settings) string {
	var b strings.Builder
	b.WriteString("/?query=")
	escapeQuery(&b, "INSERT INTO "+target+" FORMAT JSONEachRow")
	b.WriteString(pinnedSettings)
	b.WriteString(settings.query())
	if dedupToken != "" {
		b.WriteString("&" + TokenSetting + "=")
		escapeQuery(&b, dedupToken)
	}
	return b.String()
}

// pinnedSettings are sent with every INSERT, whatever the user's profile
// on the server says: a profile that lets ClickHouse skip rows it cannot
// parse (input_format_allow_errors_num or _ratio) made it answer OK for
// a batch with a bad row, which then was in no table and no dead letter;
// one that lowers max_insert_block_size could write part of a batch it
// then refused, and bisection inserted that part again. These are the
// reserved settings (reservedSettings) a queue may not set, at
// ClickHouse's defaults.
const pinnedSettings = "&input_format_allow_errors_num=0&input_format_allow_errors_ratio=0&max_insert_block_size=1048576"

// escapeQuery writes s to b with every byte but the unreserved ones of RFC
// 3986 percent-encoded.
func escapeQuery(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

// settingQuery returns the SELECT that counts the settings called name.
func settingQuery(name string) string {
	var b strings.Builder
	b.WriteString("SELECT count() FROM system.settings WHERE name = '")
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '\'', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("'")
	return b.String()
}
