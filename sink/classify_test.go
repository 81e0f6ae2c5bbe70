package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"chute/internal/testcerts"
)

// Bodies as ClickHouse 18.16 sends them (captured from the server the real
// tests start), and as newer servers word them.
const (
	body27 = "Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \" before: x\",\"big\":1}: (while read the value of key id): (at row 1)\n, e.what() = DB::Exception\n"
	body72 = "Code: 72, e.displayText() = DB::Exception: Unsigned type must not contain '-' symbol: (while read the value of key big): (at row 1)\n, e.what() = DB::Exception\n"
	body60 = "Code: 60, e.displayText() = DB::Exception: Table default.nope doesn't exist., e.what() = DB::Exception\n"
	body49 = "Code: 49, e.displayText() = DB::Exception: Unknown element 'zz' for type Enum8('a' = 1): (while read the value of key e), e.what() = DB::Exception\n"
	body62 = "Code: 62, e.displayText() = DB::Exception: Syntax error: failed at position 1, e.what() = DB::Exception\n"
	newer  = "Code: 27. DB::Exception: Cannot parse input: expected '\"' before: 'x}': (while reading the value of key id): (at row 1)\n: While executing ParallelParsingBlockInputFormat. (CANNOT_PARSE_INPUT_ASSERTION_FAILED) (version 24.3.1.1)\n"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header string
		body   string
		class  Class
		code   int
	}{
		{"ok empty", 200, "", "", ClassOK, 0},
		{"ok count", 200, "", "1\n", ClassOK, 0},
		{"ok 204", 204, "", "", ClassOK, 0},
		{"no answer", 0, "", "", ClassTransient, 0},
		// Data errors, as 18.16 sends them: 500 and 400 alike.
		{"27 in a 500", 500, "", body27, ClassData, 27},
		{"72 in a 400", 400, "", body72, ClassData, 72},
		{"26", 400, "", "Code: 26, e.displayText() = DB::Exception: Cannot parse JSON string", ClassData, 26},
		{"117", 500, "", "Code: 117, e.displayText() = DB::Exception: Unknown field found while parsing JSONEachRow format: zz: (at row 1)", ClassData, 117},
		{"53", 500, "", "Code: 53, e.displayText() = DB::Exception: Type mismatch", ClassData, 53},
		{"6", 500, "", "Code: 6, e.displayText() = DB::Exception: Cannot parse text", ClassData, 6},
		{"38", 400, "", "Code: 38. DB::Exception: Cannot parse date", ClassData, 38},
		{"41", 400, "", "Code: 41. DB::Exception: Cannot parse datetime", ClassData, 41},
		{"69", 500, "", "Code: 69. DB::Exception: Too many digits in decimal value", ClassData, 69},
		{"70", 500, "", "Code: 70. DB::Exception: Cannot convert", ClassData, 70},
		{"131", 500, "", "Code: 131. DB::Exception: Too large value for FixedString(2)", ClassData, 131},
		{"33 cut row", 500, "", "Code: 33, e.displayText() = DB::Exception: Unexpected end of stream while parsing JSONEachRow format: (at row 1)", ClassData, 33},
		{"newer wording", 400, "", newer, ClassData, 27},
		{"header code wins", 400, "27", "Code: 60. something else", ClassData, 27},
		{"header with spaces", 500, " 72 ", "", ClassData, 72},
		{"unknown code at a row (18.16 Enum)", 500, "", body49, ClassData, 49},
		{"unknown code 400", 400, "", "Code: 9999. DB::Exception: something new", ClassData, 9999},
		// Transient.
		{"252 too many parts", 500, "", "Code: 252, e.displayText() = DB::Exception: Too many parts (300)", ClassTransient, 252},
		{"241 memory", 500, "", "Code: 241. DB::Exception: Memory limit (total) exceeded (at row 5)", ClassTransient, 241},
		{"202", 500, "", "Code: 202. DB::Exception: Too many simultaneous queries", ClassTransient, 202},
		{"209", 500, "", "Code: 209. DB::Exception: Timeout exceeded while reading from socket", ClassTransient, 209},
		{"210", 500, "", "Code: 210. DB::Exception: Connection refused", ClassTransient, 210},
		{"159", 500, "", "Code: 159. DB::Exception: Timeout exceeded", ClassTransient, 159},
		{"159 in header of a 400", 400, "159", "", ClassTransient, 159},
		{"unknown code 500", 500, "", "Code: 9999. DB::Exception: something new", ClassTransient, 9999},
		{"502 from a proxy", 502, "", "<html>Bad Gateway</html>", ClassTransient, 0},
		{"503 no body", 503, "", "", ClassTransient, 0},
		{"429", 429, "", "slow down", ClassTransient, 0},
		{"408", 408, "", "", ClassTransient, 0},
		{"exception inside a 200", 200, "", "1\n2\nCode: 394, e.displayText() = DB::Exception: Query was cancelled, e.what() = DB::Exception\n", ClassTransient, 394},
		{"unknown exception inside a 200", 200, "", "1\n2\nCode: 9999, e.displayText() = DB::Exception: something new, e.what() = DB::Exception\n", ClassTransient, 9999},
		{"153 division by a row's zero", 500, "", "Code: 153, e.displayText() = DB::Exception: Division by zero, e.what() = DB::Exception", ClassData, 153},
		{"395 throwIf on a row", 500, "", "Code: 395, e.displayText() = DB::Exception: Value passed to 'throwIf' function is non zero, e.what() = DB::Exception", ClassData, 395},
		{"49 unknown Enum element of a cast", 500, "", "Code: 49, e.displayText() = DB::Exception: Unknown element 'zz' for type Enum8('a' = 1), e.what() = DB::Exception", ClassData, 49},
		{"49 other logical error", 500, "", "Code: 49, e.displayText() = DB::Exception: Logical error: something broke, e.what() = DB::Exception", ClassTransient, 49},
		{"data exception inside a 200", 200, "", "Code: 27. DB::Exception: Cannot parse input (at row 3)", ClassData, 27},
		{"DB::Exception without code inside a 200", 200, "", "DB::Exception: boom", ClassTransient, 0},
		{"header code on a 200", 200, "241", "", ClassTransient, 241},
		// Config.
		{"60 unknown table", 404, "", body60, ClassConfig, 60},
		{"81 unknown database", 404, "", "Code: 81, e.displayText() = DB::Exception: Database nodb doesn't exist", ClassConfig, 81},
		{"192 unknown user", 401, "", "Code: 192, e.displayText() = DB::Exception: Unknown user bob", ClassConfig, 192},
		{"193 wrong password", 401, "", "Code: 193, e.displayText() = DB::Exception: Wrong password for user alice", ClassConfig, 193},
		{"194", 401, "", "Code: 194. DB::Exception: Password required", ClassConfig, 194},
		{"516", 401, "516", "Code: 516. DB::Exception: alice: Authentication failed", ClassConfig, 516},
		{"497", 403, "", "Code: 497. DB::Exception: alice: Not enough privileges", ClassConfig, 497},
		{"115 unknown setting", 404, "", "Code: 115, e.displayText() = DB::Exception: Unknown setting insert_deduplication_token", ClassConfig, 115},
		{"62 syntax in a 500", 500, "", body62, ClassConfig, 62},
		{"404 no code", 404, "", "not found", ClassConfig, 0},
		{"401 no code", 401, "", "", ClassConfig, 0},
		{"redirect", 302, "", "", ClassConfig, 0},
		// 252 is both: parts waiting to merge (transient), and one
		// batch's rows in too many partitions (halves pass: data).
		{"252 too many parts", 500, "", "Code: 252. DB::Exception: Too many parts (300). Merges are processing significantly slower than inserts. (TOO_MANY_PARTS)", ClassTransient, 252},
		{"252 too many partitions", 500, "", "Code: 252. DB::Exception: Too many partitions for single INSERT block (more than 100). The limit is controlled by 'max_partitions_per_insert_block' setting. (TOO_MANY_PARTS)", ClassData, 252},
		// A 400 without a code is the request's, not a row's; 413: the
		// rows' number.
		{"400 no code", 400, "", "bad request", ClassConfig, 0},
		{"400 empty", 400, "", "", ClassConfig, 0},
		{"413", 413, "", "request entity too large", ClassData, 0},
		// Parsing of the code.
		{"code not at a line start", 500, "", "error: see Code: 27 somewhere", ClassTransient, 0},
		{"code with leading spaces", 500, "", "  Code: 27, e.displayText()", ClassData, 27},
		{"code zero", 500, "", "Code: 0, nothing", ClassTransient, 0},
		{"code without digits", 500, "", "Code: x", ClassTransient, 0},
		{"bad header falls back to the body", 500, "x", body27, ClassData, 27},
	}
	for _, tt := range tests {
		class, code := Classify(tt.status, tt.header, []byte(tt.body))
		if class != tt.class || code != tt.code {
			t.Errorf("%s: Classify(%d, %q, %.40q): got (%s, %d), want (%s, %d)", tt.name, tt.status, tt.header, tt.body, class, code, tt.class, tt.code)
		}
	}
}

func TestClass_String(t *testing.T) {
	for c, want := range map[Class]string{ClassOK: "ok", ClassTransient: "transient", ClassData: "data", ClassConfig: "config", Class(9): "class(9)"} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String(): got %q, want %q", int(c), got, want)
		}
	}
}

// TLS failures as crypto/tls reports them, wrapped as the client wraps
// them: a certificate that does not verify, on either side, is a config
// error whose hint names what to check; other transport errors are
// transient.
func TestClassifyTransport(t *testing.T) {
	leaf := testcerts.NewCA(t, "ca").Cert
	remote := func(alert string) error {
		return fmt.Errorf("%w", &net.OpError{Op: "remote error", Err: errors.New(alert)})
	}
	tests := []struct {
		name  string
		err   error
		class Class
		hint  string
	}{
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{Cert: leaf}}, ClassConfig, hintCA},
		{"unknown authority, deadline wrapped", fmt.Errorf("%w: %w", os.ErrDeadlineExceeded, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), ClassConfig, hintCA},
		{"hostname", &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: leaf, Host: "db.example"}}, ClassConfig, hintName},
		{"expired", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Cert: leaf, Reason: x509.Expired}}, ClassConfig, hintInvalid},
		{"not for a server", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Cert: leaf, Reason: x509.IncompatibleUsage}}, ClassConfig, hintInvalid},
		{"no system roots", &tls.CertificateVerificationError{Err: x509.SystemRootsError{}}, ClassConfig, hintRoots},
		{"other verification error", &tls.CertificateVerificationError{Err: errors.New("x509: something new")}, ClassConfig, hintCA},
		{"plain http on the port", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, ClassConfig, hintNotTLS},
		{"client certificate required (1.3)", remote("tls: certificate required"), ClassConfig, hintClientCert},
		{"client certificate of another CA", remote("tls: unknown certificate authority"), ClassConfig, hintClientCert},
		{"bad client certificate", remote("tls: bad certificate"), ClassConfig, hintClientCert},
		{"handshake failure (1.2, no client certificate)", remote("tls: handshake failure"), ClassConfig, hintHandshake},
		{"protocol version", remote("tls: protocol version not supported"), ClassConfig, hintHandshake},
		{"remote internal error", remote("tls: internal error"), ClassTransient, ""},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, ClassTransient, ""},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, ClassTransient, ""},
		{"closed without answer", io.ErrUnexpectedEOF, ClassTransient, ""},
		{"deadline", os.ErrDeadlineExceeded, ClassTransient, ""},
	}
	for _, tt := range tests {
		class, hint := classifyTransport(tt.err)
		if class != tt.class || hint != tt.hint {
			t.Errorf("%s: got (%s, %q), want (%s, %q)", tt.name, class, hint, tt.class, tt.hint)
		}
	}
}
