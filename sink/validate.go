package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

var (
	// ErrEmptyRow is returned by ValidateRow for an empty or blank value.
	ErrEmptyRow = errors.New("sink: empty value: a clickhouse queue takes one JSON object per message")
	// ErrNotObject is wrapped, with the reason, by ValidateRow for a value
	// that is not exactly one JSON object.
	ErrNotObject = errors.New("sink: a clickhouse queue takes one JSON object per message")
	// ErrInvalidUTF8 is wrapped, with the offset of the first bad byte,
	// by ValidateRow for a value that is not UTF-8 (JSON text is).
	ErrInvalidUTF8 = errors.New("sink: invalid UTF-8")
)

// ValidateRow checks that v is exactly one JSON object, with nothing but
// white space around it: one JSONEachRow row. It only reads v: rows reach
// ClickHouse byte for byte, so numbers past 2^53 keep every digit and
// string escapes stay as written. The value must be UTF-8 throughout, as
// JSON text is: ClickHouse would store other bytes as they are, and every
// reader of the table would get them. The error wraps ErrEmptyRow,
// ErrInvalidUTF8 or ErrNotObject and says what is wrong, with a byte
// offset where that helps.
func ValidateRow(v []byte) error {
	if validObject(v) {
		return nil
	}
	trimmed := bytes.TrimLeft(v, " \t\r\n")
	if len(trimmed) == 0 {
		return ErrEmptyRow
	}
	if off := invalidUTF8(v); off >= 0 {
		return fmt.Errorf("%w at byte %d: JSON text is UTF-8", ErrInvalidUTF8, off)
	}
	if trimmed[0] != '{' {
		if !json.Valid(v) {
			return fmt.Errorf("%w: got text that is not JSON", ErrNotObject)
		}
		return fmt.Errorf("%w: got %s", ErrNotObject, kindOf(trimmed[0]))
	}
	if json.Valid(v) {
		return nil
	}
	// Say why. Decoding into a RawMessage checks the syntax of the first
	// value without converting anything.
	dec := json.NewDecoder(bytes.NewReader(v))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Errorf("%w: invalid JSON at byte %d: %s", ErrNotObject, syn.Offset, syn.Error())
		}
		return fmt.Errorf("%w: invalid JSON: %s", ErrNotObject, err.Error())
	}
	end := dec.InputOffset()
	rest := bytes.TrimLeft(v[end:], " \t\r\n")
	return fmt.Errorf("%w: %s after the object, at byte %d", ErrNotObject, describeRest(rest), int(end)+len(v[end:])-len(rest))
}

// kindOf names the JSON value that starts with c.
func kindOf(c byte) string {
	switch {
	case c == '[':
		return "a JSON array"
	case c == '"':
		return "a JSON string"
	case c == '-' || '0' <= c && c <= '9':
		return "a JSON number"
	case c == 't' || c == 'f':
		return "a JSON boolean"
	case c == 'n':
		return "JSON null"
	}
	return fmt.Sprintf("%q, which is not JSON", c)
}

// describeRest names what follows the first value.
func describeRest(rest []byte) string {
	if len(rest) > 0 && rest[0] == '{' {
		return "a second JSON object"
	}
	return "trailing data"
}
