// Package sink owns talking to ClickHouse over its HTTP interface: which
// table a queue names (target.go), the clickhouse_url (url.go), the request
// line of one batch (request.go), sending it with fasthttp (client.go),
// sorting the answer or the failure to get one (classify.go), finding the
// rows ClickHouse refuses in a batch (bisect.go), checking a value at put
// time (validate.go) and keeping passwords out of everything it returns or
// logs (redact.go). dispatch owns the queues, the batching, the retry
// timers and the dead letters; it calls this package and nothing here
// holds state between calls.
//
// # Targets
//
//	ch:events              `<clickhouse_db or default>`.`events`
//	clickhouse:events      the same
//	ch:analytics.events    `analytics`.`events`, whatever clickhouse_db says
//	ch:                    an ordinary queue
//
// CheckQueue says which names a put may use: after the prefix, table or
// db.table, each part non-empty, UTF-8 without spaces or control
// characters, one dot at most (ch:a.b.c, ch:.events and ch:default. are
// refused; ClickHouse would read a.b.c as three parts). An AllowList
// (--clickhouse-allow-tables) says which tables: globs over db.table,
// *.* by default, never ClickHouse's system databases (system,
// INFORMATION_SCHEMA, information_schema) unless a pattern spells the
// database out. Both are checked at put time, by dispatch.
//
// Identifiers are backquoted with backquotes and backslashes doubled: a
// backslash starts an escape inside ClickHouse's backquotes (checked on
// 18.16), so the name reaches the server as written.
//
// # One batch
//
//	POST /?query=INSERT%20INTO%20%60db%60.%60t%60%20FORMAT%20JSONEachRow[&insert_deduplication_token=T]
//	Host: host:port
//	Authorization: Basic base64(user:password)      only with user info
//	Connection: close
//
//	row 1 \n row 2 \n ... row n                       oldest first, byte for byte
//
// Each request opens its own connection (TLS for https://) and closes it;
// the client's timeout (30 s by default) bounds it from connect to the last
// byte, and the caller's context ends it early. The request is written with
// fasthttp's Request and read with its Response on a connection the client
// dials itself, so that cancelling the context closes the connection at once
// (fasthttp's Client cannot be cancelled), and the body is written while the
// answer is read: ClickHouse answers some errors (a memory limit, a row it
// cannot parse) before it has read a large body and resets the connection,
// and its answer, not the failed write, is what the caller gets. The token
// is sent only when the caller asks, and it should ask only after
// HasSetting(TokenSetting) said the server knows it: 18.16 does not and
// refuses the request (code 115).
//
// # Answers
//
// A 2xx without "Code: NN" or "DB::Exception" in its body is OK: every row
// is in. Anything else puts no row in and is sorted by Classify into
// transient (retry the batch later), data (Bisect it) and config (retry
// later and tell an operator); the exception code comes from
// X-ClickHouse-Exception-Code or the body. ClickHouse 18.16 sends no such
// header and answers most row errors with a 500 (code 27 for a string in a
// number column, 117 for an unknown field), some with a 400 (26, 38, 41,
// 72), an unknown table with a 404 (60) and a wrong password with a 401
// (193); the code, not the status, decides. Unknown codes: a message that
// points at a row ("(at row N)") is data, then 400 and 413 are data, 5xx,
// 408 and 429 transient, and every other status config. No answer at all
// (refused, reset, timed out) is transient, except a TLS failure (see
// TLS).
//
// # TLS
//
// An https:// endpoint speaks TLS with Endpoint.TLSConfig, else the
// Client's ClientConfig.TLSConfig, else the system's roots; the server
// name is the URL's host unless the configuration names another. The
// caller attaches the configuration to the Endpoint at every batch, so a
// reloaded CA or client certificate takes effect at the next one. A
// certificate that does not verify, either way, is ClassConfig, not
// transient: an unknown authority (x509.UnknownAuthorityError), a name the
// certificate lacks (x509.HostnameError), an expired or unfit certificate
// (x509.CertificateInvalidError), any other *tls.CertificateVerificationError,
// a server that refuses the client's certificate (its TLS alert: 18.16
// answers a missing one with "handshake failure" in TLS 1.2 and
// "certificate required" in TLS 1.3, after the handshake), and a port that
// does not speak TLS at all. Result.Err wraps the crypto/tls or x509
// error, and Result.Message ends with what to check, naming chute's flag
// ("check --clickhouse-ca-file: ...").
//
// # Bisection
//
// Bisect halves a refused batch until single rows are refused; the other
// rows go in. Rows are settled left to right, so when a transient or config
// error stops it, a prefix of the batch is settled (inserted or refused)
// and the rest was not sent: the caller removes the prefix, dead-letters
// the refused rows and keeps the rest. See BisectError.
//
// # Values
//
// ValidateRow accepts exactly one JSON object with optional white space
// around it, in UTF-8 (a byte that is not is refused with its offset),
// and never re-encodes it: the bytes put are the bytes sent.
//
// # Secrets
//
// Endpoint.String shows no password, and Result.Message, Result.Detail,
// ResultError and the client's log lines go through Redact, which
// removes the password and the Authorization value. ClickHouse quotes
// rows in its errors ("expected , before: <the rest of the row>", "Cannot
// parse string '<value>' as UInt64", an unknown field's name), and
// Result.Message feeds logs, /status and spans: RedactRows cuts every
// quoted span and every copy of the input out of it, keeping the code,
// the exception's words, the key and row being read and the class, and
// it is cut to about 512 bytes after that. What RedactRows does not
// recognise loses the rest of the text, never keeps data. Result.Detail
// keeps ClickHouse's text with the data (password redacted, cut to 512
// bytes) for the one place that holds the row anyway: its dead letter.
//
// # Time
//
// The sink keeps no timers and takes no clock: the only time it measures
// is one request's deadline, set on the connection, which the kernel
// counts in real time. The retry timers that depend on its answers are
// dispatch's, on dispatch's injected clock. The tests that measure the
// deadline are in client_timing_test.go.
//
// # Decisions
//
//   - https:// speaks TLS; other schemes are refused rather than sent
//     plain HTTP.
//   - User and password in the URL are percent-decoded when they hold valid
//     escapes, and sent as written otherwise.
//   - Bisection never resends the whole batch; a single row is sent once
//     more on its own so its answer describes it.
package sink
