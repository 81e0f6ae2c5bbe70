package sink

import (
	"encoding/base64"
	"net/url"
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
