package sink

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strconv"
	"strings"
)

// Class says what a caller does with a batch after an answer.
type Class int

const (
	// ClassOK: a 2xx without an exception in the body; the rows are in.
	ClassOK Class = iota
	// ClassTransient: no answer, a timeout, an overloaded or failing
	// server. Nothing is in; send the same batch again after a backoff.
	ClassTransient
	// ClassData: ClickHouse refused the rows themselves (a value it cannot
	// parse, a wrong type, an unknown field). Nothing is in; Bisect finds
	// the refused rows, the others go in.
	ClassData
	// ClassConfig: the target or the credentials are wrong (unknown table
	// or database, authentication, permissions, a setting the server does
	// not know, a TLS certificate that does not verify either way).
	// Nothing is in; retry after a backoff and tell an operator.
	ClassConfig
)

// String returns "ok", "transient", "data" or "config".
func (c Class) String() string {
	switch c {
	case ClassOK:
		return "ok"
	case ClassTransient:
		return "transient"
	case ClassData:
		return "data"
	case ClassConfig:
		return "config"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// ExceptionCodeHeader is the header in which newer ClickHouse servers put
// the exception code. 18.16 does not send it; the body starts with
// "Code: NN" there.
const ExceptionCodeHeader = "X-ClickHouse-Exception-Code"

// transientCodes are ClickHouse exception codes of a server that may well
// take the same batch later.
var transientCodes = map[int]bool{
	159: true, // TIMEOUT_EXCEEDED
	160: true, // TOO_SLOW
	173: true, // CANNOT_ALLOCATE_MEMORY
	201: true, // QUOTA_EXPIRED
	202: true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: true, // NO_FREE_CONNECTION
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	225: true, // NO_ZOOKEEPER
	236: true, // ABORTED
	241: true, // MEMORY_LIMIT_EXCEEDED
	242: true, // TABLE_IS_READ_ONLY (a replica that lost ZooKeeper)
	243: true, // NOT_ENOUGH_SPACE
	252: true, // TOO_MANY_PARTS
	279: true, // ALL_CONNECTION_TRIES_FAILED
	285: true, // TOO_FEW_LIVE_REPLICAS
	286: true, // UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE
	319: true, // UNKNOWN_STATUS_OF_INSERT
	364: true, // RECEIVED_ERROR_TOO_MANY_REQUESTS
	394: true, // QUERY_WAS_CANCELLED
	425: true, // SYSTEM_ERROR
	473: true, // DEADLOCK_AVOIDED
	999: true, // KEEPER_EXCEPTION
}

// configCodes are codes about the target, the user or the request, which
// no row can cause and no retry alone cures.
var configCodes = map[int]bool{
	1:   true, // UNSUPPORTED_METHOD (an engine that takes no INSERT)
	46:  true, // UNKNOWN_FUNCTION (in a DEFAULT or MATERIALIZED column)
	47:  true, // UNKNOWN_IDENTIFIER (likewise)
	48:  true, // NOT_IMPLEMENTED
	60:  true, // UNKNOWN_TABLE
	62:  true, // SYNTAX_ERROR
	73:  true, // UNKNOWN_FORMAT
	81:  true, // UNKNOWN_DATABASE
	85:  true, // FORMAT_IS_NOT_SUITABLE_FOR_INPUT
	89:  true, // UNKNOWN_COMPRESSION_METHOD (a Content-Encoding the server cannot decode)
	115: true, // UNKNOWN_SETTING (insert_deduplication_token on an old server, a setting of --clickhouse-settings)
	164: true, // READONLY
	180: true, // THERE_IS_NO_PROFILE
	192: true, // UNKNOWN_USER
	193: true, // WRONG_PASSWORD
	194: true, // REQUIRED_PASSWORD
	195: true, // IP_ADDRESS_NOT_ALLOWED
	199: true, // UNKNOWN_QUOTA
	218: true, // TABLE_IS_DROPPED
	291: true, // DATABASE_ACCESS_DENIED
	392: true, // QUERY_IS_PROHIBITED
	452: true, // SETTING_CONSTRAINT_VIOLATION
	472: true, // READONLY_SETTING
	497: true, // ACCESS_DENIED
	516: true, // AUTHENTICATION_FAILED
}

// dataCodes are codes of rows ClickHouse cannot take: parse and type
// errors of the input format.
var dataCodes = map[int]bool{
	6:   true, // CANNOT_PARSE_TEXT
	17:  true, // DELIMITER_IN_STRING_LITERAL_DOESNT_MATCH
	19:  true, // SIZE_OF_FIXED_STRING_DOESNT_MATCH
	25:  true, // CANNOT_PARSE_ESCAPE_SEQUENCE
	26:  true, // CANNOT_PARSE_QUOTED_STRING
	27:  true, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
	32:  true, // ATTEMPT_TO_READ_AFTER_EOF
	33:  true, // CANNOT_READ_ALL_DATA (a row cut short)
	38:  true, // CANNOT_PARSE_DATE
	41:  true, // CANNOT_PARSE_DATETIME
	53:  true, // TYPE_MISMATCH
	69:  true, // ARGUMENT_OUT_OF_BOUND (e.g. too many digits for a Decimal)
	70:  true, // CANNOT_CONVERT_TYPE
	72:  true, // CANNOT_PARSE_NUMBER
	117: true, // INCORRECT_DATA (e.g. an unknown field)
	128: true, // TOO_LARGE_ARRAY_SIZE
	130: true, // CANNOT_READ_ARRAY_FROM_TEXT
	131: true, // TOO_LARGE_STRING_SIZE (e.g. too long for a FixedString)
	153: true, // ILLEGAL_DIVISION (a MATERIALIZED or DEFAULT intDiv by a row's zero)
	190: true, // SIZES_OF_ARRAYS_DOESNT_MATCH
	248: true, // INVALID_PARTITION_VALUE
	321: true, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
	349: true, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
	376: true, // CANNOT_PARSE_UUID
	395: true, // FUNCTION_THROW_IF_VALUE_IS_NON_ZERO (throwIf in a MATERIALIZED or DEFAULT column)
	407: true, // DECIMAL_OVERFLOW
	441: true, // CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING
	467: true, // CANNOT_PARSE_BOOL
	469: true, // VIOLATED_CONSTRAINT
	546: true, // NO_ROW_DELIMITER
	563: true, // CANNOT_READ_MAP_FROM_TEXT
	626: true, // CANNOT_SKIP_UNKNOWN_FIELD
	632: true, // UNEXPECTED_DATA_AFTER_PARSED_VALUE
	675: true, // CANNOT_PARSE_IPV4
	676: true, // CANNOT_PARSE_IPV6
	691: true, // UNKNOWN_ELEMENT_OF_ENUM
}

// tooManyParts is TOO_MANY_PARTS, which ClickHouse also answers a batch
// whose rows fall in more than max_partitions_per_insert_block (100 by
// default, since 19.x) partitions with, saying tooManyPartitions.
const tooManyParts = 252

var tooManyPartitions = []byte("Too many partitions for single INSERT block")

// logicalError is LOGICAL_ERROR, which 18.16 also answers an Enum value it
// does not know with, saying unknownElement: with a row position when it
// parses the row, without one when a MATERIALIZED or DEFAULT column casts
// a row's value (later releases: UNKNOWN_ELEMENT_OF_ENUM, 691).
const logicalError = 49

var unknownElement = []byte("Unknown element '")

// rowMarkers are what ClickHouse adds to an exception raised while parsing
// one row of the input: 18.16 says "(while read the value of key id): (at
// row 1)", newer servers "(while reading the value of key id): (at row 1)".
var rowMarkers = [][]byte{[]byte("(at row "), []byte("the value of key ")}

// OverQueryLimit reports whether r is a limit of the query that
// ClickHouse answered: its max_execution_time (TIMEOUT_EXCEEDED, 159) or
// its own max_memory_usage ("Memory limit (for query) exceeded", 241),
// not the server's total memory ("(total)"), which concerns every batch.
// The same request fails again; a smaller one may not.
func (r Result) OverQueryLimit() bool {
	switch r.Code {
	case 159:
		return true
	case 241:
		return strings.Contains(r.Message, "(for query)")
	}
	return false
}

// NamesRow reports whether the answer points at a row of the request, as
// ClickHouse's errors of one row do ("(at row N)", "the value of key
// K"). A data error that names none may be the request's: a setting
// value the server cannot parse is answered with a parse error whatever
// the rows (18.16: 400, code 72).
func (r Result) NamesRow() bool {
	for _, m := range rowMarkers {
		if strings.Contains(r.Message, string(m)) {
			return true
		}
	}
	return false
}

// Classify sorts one answer of ClickHouse and returns its class and its
// exception code (0 when there is none). status 0 means no answer at all
// (a network error or a timeout): ClassTransient. The code is headerCode
// (X-ClickHouse-Exception-Code) when that is a number, else the NN of a
// "Code: NN" at the start of the body or of one of its lines (ClickHouse
// appends an exception that happens after it sent a 200 to the body).
//
// A 2xx is ClassOK unless its body holds such a code or "DB::Exception".
// Otherwise, in this order:
//
//   - a code in the transient, config or data list (see the tables in this
//     file) gives that class, whatever the status: 18.16 answers most data
//     errors with a 500 and some with a 400;
//   - an unknown code whose message points at a row ("(at row N)", "the
//     value of key K") is ClassData: 18.16 answers an unknown Enum value
//     with code 49, LOGICAL_ERROR, and a row position;
//   - then the status decides: an exception inside a 2xx, 408, 429 and 5xx
//     are ClassTransient; a 400 with an unknown code, and 413 (a batch too
//     large for a proxy: halves may pass), are ClassData; any other
//     status (401, 403, 404, redirects, and a 400 with no code at all)
//     is ClassConfig. ClickHouse names every error of a row with a code:
//     a 400 without one is the request's (18.16 answers a request line
//     past 16 KiB, which long insert settings make, with an empty 400; a
//     proxy sends one for plain HTTP to an HTTPS port), and as data it
//     sent every row of the batch to the dead letters, one by one.
func Classify(status int, headerCode string, body []byte) (Class, int) {
	if status == 0 {
		return ClassTransient, 0
	}
	code := exceptionCode(headerCode, body)
	ok2xx := status >= 200 && status < 300
	if ok2xx && code == 0 && !bytes.Contains(body, []byte("DB::Exception")) {
		return ClassOK, 0
	}
	if code == tooManyParts && bytes.Contains(body, tooManyPartitions) {
		// Not the table's parts waiting to merge (transient), but this
		// batch's rows in too many partitions: sent again unchanged it
		// is refused again, for ever; as data it is bisected, and
		// halves with fewer partitions go in (one row never has more
		// than one).
		return ClassData, code
	}
	if code == logicalError && bytes.Contains(body, unknownElement) {
		// A row's value, refused again at every attempt: as transient
		// the batch went again for ever, never bisected.
		return ClassData, code
	}
	if code != 0 {
		switch {
		case transientCodes[code]:
			return ClassTransient, code
		case configCodes[code]:
			return ClassConfig, code
		case dataCodes[code]:
			return ClassData, code
		}
		for _, m := range rowMarkers {
			if bytes.Contains(body, m) {
				return ClassData, code
			}
		}
	}
	switch {
	case ok2xx, status == 408, status == 429, status >= 500:
		return ClassTransient, code
	case status == 400 && code != 0, status == 413:
		return ClassData, code
	}
	return ClassConfig, code
}

// exceptionCode returns the code of headerCode, else of the first "Code: NN"
// that starts body or one of its lines, else 0.
func exceptionCode(headerCode string, body []byte) int {
	if n, err := strconv.Atoi(strings.TrimSpace(headerCode)); err == nil && n > 0 {
		return n
	}
	const prefix = "Code: "
	for line := range bytes.Lines(body) {
		line = bytes.TrimLeft(line, " \t\r")
		rest, ok := bytes.CutPrefix(line, []byte(prefix))
		if !ok {
			continue
		}
		n := 0
		i := 0
		for ; i < len(rest) && i < 9 && '0' <= rest[i] && rest[i] <= '9'; i++ {
			n = n*10 + int(rest[i]-'0')
		}
		if i > 0 && n > 0 {
			return n
		}
	}
	return 0
}

// Hints appended to the message of a TLS failure. They name chute's
// flags: the operator reads them in chute's log and /status.
const (
	hintCA         = "check --clickhouse-ca-file: it must hold the CA that signed the server's certificate"
	hintName       = "check --clickhouse-server-name or the URL's host: the server's certificate must name it"
	hintInvalid    = "check the server's certificate (validity dates, key usage) and --clickhouse-ca-file"
	hintRoots      = "set --clickhouse-ca-file: there are no system roots to verify the server with"
	hintClientCert = "the server refused the client certificate: check --clickhouse-cert-file and --clickhouse-key-file"
	hintHandshake  = "the server refused the TLS handshake (no client certificate, or no TLS version or cipher in common): check --clickhouse-cert-file"
	hintNotTLS     = "the server did not answer in TLS: is the URL's port an https_port?"
)

// alertHints are the TLS alerts a server sends when it refuses the
// client's certificate or the handshake, by their text: crypto/tls reports
// a received alert as a *net.OpError with Op "remote error" and an
// unexported error type, so the text is all there is to match. Other
// alerts (internal error, close notify, ...) are transient.
var alertHints = map[string]string{
	"tls: bad certificate":                 hintClientCert,
	"tls: unsupported certificate":         hintClientCert,
	"tls: revoked certificate":             hintClientCert,
	"tls: expired certificate":             hintClientCert,
	"tls: unknown certificate":             hintClientCert,
	"tls: unknown certificate authority":   hintClientCert,
	"tls: bad certificate status response": hintClientCert,
	"tls: access denied":                   hintClientCert,
	"tls: certificate required":            hintClientCert,
	// TLS 1.2 servers answer a missing client certificate with a
	// handshake failure, as they answer no cipher in common.
	"tls: handshake failure":              hintHandshake,
	"tls: protocol version not supported": hintHandshake,
	"tls: insufficient security level":    hintHandshake,
}

// classifyTransport sorts an error that left no answer: a certificate
// that does not verify, on either side, is ClassConfig with a hint saying
// what to check, for no retry alone cures it; everything else (refused,
// reset, timed out) is ClassTransient with no hint.
func classifyTransport(err error) (Class, string) {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		roots     x509.SystemRootsError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
		op        *net.OpError
	)
	switch {
	case errors.As(err, &unknownCA):
		return ClassConfig, hintCA
	case errors.As(err, &hostname):
		return ClassConfig, hintName
	case errors.As(err, &invalid):
		return ClassConfig, hintInvalid
	case errors.As(err, &roots):
		return ClassConfig, hintRoots
	case errors.As(err, &verify):
		return ClassConfig, hintCA
	case errors.As(err, &header):
		return ClassConfig, hintNotTLS
	case errors.As(err, &op) && op.Op == "remote error" && op.Err != nil:
		if hint, ok := alertHints[op.Err.Error()]; ok {
			return ClassConfig, hint
		}
	}
	return ClassTransient, ""
}
