package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"strings"
)

// Bounds of insert settings: a name, a value and how many one Settings
// holds. A setting is a URL parameter of every INSERT, and URLs of a few
// KiB are what servers and proxies take without question.
const (
	MaxSettingName   = 128
	MaxSettingValue  = 1 << 10
	MaxSettingsCount = 64
)

// ErrBadSetting is wrapped by every error of ParseSettings,
// ParseSettingsText and CheckSetting.
var ErrBadSetting = errors.New("sink: bad clickhouse setting")

// reservedSettings are the URL parameters chute sets itself, or that
// would change what the request does or as whom: settings must not
// redirect the query or carry credentials. Nor split a batch: ClickHouse
// writes a batch as one block, all or nothing, only while it reads it in
// one (max_insert_block_size, 1,048,576 rows, above batch_rows' bound)
// and squashes nothing apart (min_insert_block_size_*); set lower, a
// refused batch could be in part already, and bisection inserted that
// part again (the review measured 49 rows for 29 on 18.16). Nor skip
// rows: with input_format_allow_errors_num or _ratio, ClickHouse drops
// a row it cannot parse and answers OK, and the row was in no table and
// no dead letter, lost without a word; a refused row is a dead letter.
var reservedSettings = []string{
	"query", "database", "user", "password", "quota_key", "role",
	"query_id", "session_id", "session_timeout", "session_check",
	"compress", "decompress", "default_format",
	"max_insert_block_size", "min_insert_block_size_rows", "min_insert_block_size_bytes",
	"input_format_allow_errors_num", "input_format_allow_errors_ratio",
	TokenSetting,
}

// Settings are ClickHouse settings sent as URL parameters of every
// INSERT (&name=value), sorted by name, values percent-encoded. The zero
// value holds none. Settings is a value type: == tells whether two hold
// the same settings.
type Settings struct {
	// enc is "name=escaped&name=escaped", sorted by name, names unique:
	// names never hold '&' or '=', and escaped values neither.
	enc string
}

// CheckSetting reports whether name=value may be sent with an INSERT:
// name matches ^[a-z_][a-z0-9_]*$, is at most MaxSettingName bytes and
// is not one chute sets itself (query, database, user, password,
// query_id, session_id, insert_deduplication_token, ...) or a query
// parameter (param_*); value is at most MaxSettingValue bytes and holds
// no control bytes. Its errors wrap ErrBadSetting and quote the name.
func CheckSetting(name, value string) error {
	if err := checkSettingName(name); err != nil {
		return err
	}
	if len(value) > MaxSettingValue {
		return fmt.Errorf("%w: %q: value of %d bytes, at most %d", ErrBadSetting, name, len(value), MaxSettingValue)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: %q: value holds control byte %#02x", ErrBadSetting, name, c)
		}
	}
	return nil
}

func checkSettingName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrBadSetting)
	}
	if len(name) > MaxSettingName {
		return fmt.Errorf("%w: name %.32q...: %d bytes, at most %d", ErrBadSetting, name, len(name), MaxSettingName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return fmt.Errorf("%w: name %q: want lower-case letters, digits and '_', not starting with a digit", ErrBadSetting, name)
	}
	if slices.Contains(reservedSettings, name) || strings.HasPrefix(name, "param_") {
		return fmt.Errorf("%w: name %q: chute sets it itself, or it would change the query, the user, the batch's being one block or its refused rows' going to the dead letters", ErrBadSetting, name)
	}
	return nil
}

// ParseSettings checks every name=value of m (CheckSetting) and returns
// them as Settings. At most MaxSettingsCount.
func ParseSettings(m map[string]string) (Settings, error) {
	if len(m) > MaxSettingsCount {
		return Settings{}, fmt.Errorf("%w: %d settings, at most %d", ErrBadSetting, len(m), MaxSettingsCount)
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		if err := CheckSetting(name, m[name]); err != nil {
			return Settings{}, err
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(name)
		b.WriteByte('=')
		escapeQuery(&b, m[name])
	}
	return Settings{enc: b.String()}, nil
}

// ParseSettingsText reads settings written as flag text,
// "name=value,name=value": blank text is none. A value may hold commas
// where the text after one holds no '=': "a=1,b=x,y" is a=1 and b="x,y".
// Spaces around names and values are trimmed. A name given twice is an
// error. Text that starts with '{' is a JSON object of names to string
// values instead, whose values are kept as they are, commas, '=' and
// spaces included (what the config file's YAML mapping becomes).
func ParseSettingsText(s string) (Settings, error) {
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") {
		var m map[string]string
		if err := json.Unmarshal([]byte(t), &m); err != nil {
			return Settings{}, fmt.Errorf("%w: a JSON object of names to string values: %v", ErrBadSetting, err)
		}
		return ParseSettings(m)
	}
	m := make(map[string]string)
	var last string
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			if last == "" {
				return Settings{}, fmt.Errorf("%w: %q: want name=value", ErrBadSetting, strings.TrimSpace(item))
			}
			m[last] += "," + item // a comma inside the last value
			continue
		}
		name = strings.TrimSpace(name)
		if err := checkSettingName(name); err != nil {
			return Settings{}, err
		}
		if _, dup := m[name]; dup {
			return Settings{}, fmt.Errorf("%w: %q given twice", ErrBadSetting, name)
		}
		m[name], last = value, name
	}
	for name, v := range m {
		m[name] = strings.TrimSpace(v)
	}
	return ParseSettings(m)
}

// Len is how many settings s holds.
func (s Settings) Len() int {
	if s.enc == "" {
		return 0
	}
	return strings.Count(s.enc, "&") + 1
}

// All yields each setting's name and value, by name.
func (s Settings) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if s.enc == "" {
			return
		}
		for kv := range strings.SplitSeq(s.enc, "&") {
			name, esc, _ := strings.Cut(kv, "=")
			value, _ := url.QueryUnescape(esc) // escapeQuery's output always decodes
			if !yield(name, value) {
				return
			}
		}
	}
}

// Get returns the value of the setting called name, and whether s has it.
func (s Settings) Get(name string) (string, bool) {
	for n, v := range s.All() {
		if n == name {
			return v, true
		}
	}
	return "", false
}

// Override returns s with every setting of o added, o's value winning
// where both name one: a queue's settings override the cluster's.
func (s Settings) Override(o Settings) Settings {
	switch {
	case o.enc == "":
		return s
	case s.enc == "":
		return o
	}
	a, b := strings.Split(s.enc, "&"), strings.Split(o.enc, "&")
	out := make([]string, 0, len(a)+len(b))
	name := func(kv string) string { n, _, _ := strings.Cut(kv, "="); return n }
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && name(a[i]) < name(b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || name(b[j]) < name(a[i]):
			out = append(out, b[j])
			j++
		default: // the same name: o's
			out = append(out, b[j])
			i++
			j++
		}
	}
	return Settings{enc: strings.Join(out, "&")}
}

// String returns s as flag text, "name=value,name=value", by name.
func (s Settings) String() string {
	var b strings.Builder
	for name, value := range s.All() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name + "=" + value)
	}
	return b.String()
}

// query returns s as URL parameters, "&name=value..." ("" for none).
func (s Settings) query() string {
	if s.enc == "" {
		return ""
	}
	return "&" + s.enc
}
