package sink

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces a secret in anything the package logs or returns.
const redacted = "xxxxx"

// Redact returns s with every copy of ep's password, of its Authorization
// header value and of that value's base64 credentials replaced by "xxxxx".
// The password is also looked for percent-escaped, as it would appear in a
// URL. Every log line, Result.Message and error of this package goes
// through it. A very short password makes messages hard to read (every
// copy of it goes), never leaky.
func Redact(s string, ep Endpoint) string {
	if ep.User == "" && ep.Password == "" {
		return s
	}
	var secrets []string
	if auth := ep.AuthHeader(); auth != "" {
		// The header value first, then its base64 alone: each replacement
		// leaves no part of a longer secret behind.
		secrets = append(secrets, auth, base64.StdEncoding.EncodeToString([]byte(ep.User+":"+ep.Password)))
	}
	if p := ep.Password; p != "" {
		secrets = append(secrets, p, url.PathEscape(p), url.QueryEscape(p))
	}
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// elided stands for row data cut out of a ClickHouse error.
const elided = "…"

// echoes are the phrases after which ClickHouse copies input into an
// error without quotes, and where that copy ends: at the position
// markers ClickHouse appends after it (toContext), or at the end of the
// line (toLineEnd). 18.16 says "expected X before: <the input that
// follows>", "JSONEachRow format: <an unknown field's name>" and "Cannot
// parse uuid <the input>"; newer servers add "parsed text: <input>" in
// their per-column diagnostics, and a violated CHECK constraint (469)
// "Column values: <each column = its value, unquoted>".
var echoes = []struct {
	phrase string
	end    echoEnd
}{
	{" before: ", toContext},
	{" format: ", toContext},
	{"Cannot parse uuid ", toContext},
	{"Cannot parse IPv4 ", toContext},
	{"Cannot parse IPv6 ", toContext},
	{"parsed text: ", toLineEnd},
	{"Column values: ", toContext},
}

type echoEnd int

const (
	toContext echoEnd = iota
	toLineEnd
)

// contextToken matches one of the position markers and class names
// ClickHouse appends to an exception after the input it copies: the key
// and row being read ("(while read the value of key id)", "(at row 2)"),
// the class (18.16: ", e.what() = DB::Exception"), and on newer servers
// the processor, the code's name and the version.
var contextToken = regexp.MustCompile(`\(while read(?:ing)? the value of key [^()\n]*\)|\(at row [0-9]+\)|e\.what\(\) = [A-Za-z:_]+|While executing [A-Za-z]+|\([A-Z][A-Z0-9_]*\)|\(version [0-9.]+(?: \(official build\))?\)`)

// RedactRows returns a ClickHouse error text without the row data it
// quotes, keeping what says what went wrong: the code, the exception and
// its first words, the key and row being read ("(while read the value of
// key id): (at row 2)"), column names and types, and the exception's
// class. It replaces with "…" every single- or double-quoted span (a
// single quote after a letter or digit is an apostrophe), and
// what follows the phrases after which ClickHouse copies input unquoted
// (see echoes) up to the position markers it appends after the copy, or
// to the end when there is none: an error it does not know loses more,
// never keeps a row. Result.Message goes through it; Result.Detail does
// not.
func RedactRows(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if p, end, ok := echoAt(s, i); ok {
			b.WriteString(p)
			b.WriteString(elided)
			i = echoEndAt(s, i+len(p), end)
			continue
		}
		switch c := s[i]; {
		case c == '\'' && i > 0 && isWordByte(s[i-1]):
			// An apostrophe ("doesn't"): ClickHouse puts a space or a
			// bracket before a quote it opens.
			b.WriteByte(c)
			i++
		case c == '\'' || c == '"':
			j := closingQuote(s, i)
			if j < 0 { // no end: cut to the next marker, as an echo
				b.WriteByte(c)
				b.WriteString(elided)
				i = echoEndAt(s, i+1, toContext)
				continue
			}
			b.WriteByte(c)
			b.WriteString(elided)
			b.WriteByte(c)
			i = j + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// isWordByte reports whether c is an ASCII letter or digit.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// echoAt reports whether an echo starts at s[i]: "expected X before: "
// (X one character, maybe quoted, which is kept) or one of echoes.
func echoAt(s string, i int) (string, echoEnd, bool) {
	const expected = "expected "
	if strings.HasPrefix(s[i:], expected) {
		rest := s[i+len(expected):]
		if j := strings.Index(rest[:min(len(rest), 16)], " before: "); j >= 0 {
			return s[i : i+len(expected)+j+len(" before: ")], toContext, true
		}
	}
	for _, e := range echoes {
		if strings.HasPrefix(s[i:], e.phrase) {
			return e.phrase, e.end, true
		}
	}
	return "", 0, false
}

// echoEndAt returns where the input copied from s[from] ends: for
// toLineEnd the end of the line; for toContext the start of the run of
// context tokens (contextToken, apart only by spaces and punctuation)
// that ends s, found from the end, so that copied input holding a
// token's text does not end the copy early. Without such a run it is
// len(s): all the rest goes.
func echoEndAt(s string, from int, end echoEnd) int {
	if end == toLineEnd {
		if j := strings.IndexByte(s[from:], '\n'); j >= 0 {
			return from + j
		}
		return len(s)
	}
	tokens := contextToken.FindAllStringIndex(s[from:], -1)
	cut := len(s)
	for k := len(tokens) - 1; k >= 0; k-- {
		start, stop := from+tokens[k][0], from+tokens[k][1]
		if strings.TrimLeft(s[stop:cut], " \t\r\n:,.=") != "" {
			break
		}
		cut = start
	}
	// Keep the punctuation before the first token: ": (at row 2)".
	for cut > from && strings.IndexByte(" \t\r\n:,", s[cut-1]) >= 0 {
		cut--
	}
	return cut
}

// closingQuote returns the index of the quote closing the one at s[i],
// skipping backslash escapes and doubled quotes, or -1.
func closingQuote(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j
		}
	}
	return -1
}

// cutFollowingRows returns a ClickHouse error text with the rows after
// the refused one cut out of its "before: " echo, which copies the input
// from where reading stopped to the end of the request (18.16: 'expected
// " before: x2","s":"b"}\n{"id":3,...}\n'). A dead letter holds its own
// row and Result.Detail goes into it; the rows after are other puts',
// which bisection goes on to insert. ClickHouse writes a line feed in the echo as
// \n and a backslash as \\, so the first \n not escaped ends the row: the
// echo is cut there and "…" put in place of the rest.
func cutFollowingRows(s string) string {
	const phrase = " before: "
	var b strings.Builder
	for {
		i := strings.Index(s, phrase)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		from := i + len(phrase)
		end := echoEndAt(s, from, toContext)
		b.WriteString(s[:from])
		if lf := escapedLineFeed(s[from:end]); lf >= 0 {
			b.WriteString(s[from : from+lf+2])
			b.WriteString(elided)
		} else {
			b.WriteString(s[from:end])
		}
		s = s[end:]
	}
}

// escapedLineFeed returns where the first \n that is not an escaped
// backslash followed by n starts in s, or -1.
func escapedLineFeed(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] == 'n' {
			return i
		}
		i++ // an escape of two characters: \\, \t, \r...
	}
	return -1
}
