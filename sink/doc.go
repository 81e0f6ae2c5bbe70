// Package sink owns talking to ClickHouse over its HTTP interface: which
// table a queue names (target.go), the clickhouse_url and its list of
// servers (url.go), the health of those servers (servers.go), the request
// line of one batch (request.go) with its insert settings (settings.go),
// compressing its body (compress.go), sending it with fasthttp
// (client.go), sorting the answer or the failure to get one
// (classify.go), finding the rows ClickHouse refuses in a batch
// (bisect.go), checking a value at put time (validate.go) and keeping
// passwords out of everything it returns or logs (redact.go). dispatch
// owns the queues, the batching, the retry timers and the dead letters;
// it calls this package. The only state kept between calls is Servers
// (each server's health and counts) and the Client's pooled compressors.
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
//	POST /?query=INSERT%20INTO%20%60db%60.%60t%60%20FORMAT%20JSONEachRow[&name=value...][&insert_deduplication_token=T]
//	Host: host:port
//	Authorization: Basic base64(user:password)      only with user info
//	Content-Encoding: gzip                          Endpoint.Compression, unless none
//	Connection: close
//
//	row 1 \n row 2 \n ... row n                       oldest first, byte for byte, then compressed
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
// # Servers, settings, compression
//
// ParseURLs reads a comma list of URLs; Servers spreads batches over
// them round-robin. A transient failure (no answer, a timeout, an
// overloaded server) marks a server down for DownMin, doubling with each
// failure in a row up to DownMax, and the caller sends the batch to the
// next server at once; any answer of ClickHouse's, OK, data or config,
// marks it up (a data or config error is the table's, not the server's,
// and is not failed over). With every server down, Pick names the one
// whose period ends first and how long until then. Down periods run on
// ServersConfig.Now, dispatch's injected clock.
//
// Endpoint.Settings are URL parameters of the INSERT, sorted by name and
// percent-encoded. Names match ^[a-z_][a-z0-9_]*$ and are not ones that
// change the request (query, database, user, password, query_id,
// session_id, insert_deduplication_token, param_*, ...); values are at
// most 1 KiB without control bytes. A setting the server does not know
// is refused with code 115 (config). Endpoint.Compression, as it means
// on the endpoint's host (Compression.On: auto is none on loopback and
// gzip elsewhere), compresses the body with klauspost/compress and
// names it in Content-Encoding, which ClickHouse decodes with no
// setting: 18.16 takes gzip and deflate (zlib's format) and refuses zstd
// with code 89 (config; the message names --clickhouse-compression).
// lz4 is ClickHouse's own compressed
// blocks (LZ4, CityHash128 checksums; blockWriter), named by
// decompress=1 in the URL rather than a Content-Encoding, which every
// version reads. Rows go into a stream encoder, or straight onto the
// connection when the body is not compressed, through a small staging
// buffer, so a batch's plain body is never whole, and the compressed
// bodies sent are pooled. InsertFrom reads the rows through a RowReader
// where it can: dispatch's reads the queue log's rows by pread rather
// than through its mapping. Result.WireBytes is the body as sent.
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
// points at a row ("(at row N)") is data, then a 400 with a code and 413
// are data, 5xx, 408 and 429 transient, and every other status config (a
// 400 with no code too: ClickHouse names a row's error with a code, so
// that one is the request's, a URL too long or a proxy). No answer at all
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
// Bisect finds the rows of a refused batch that ClickHouse refuses; the
// other rows go in. Where an answer names the row it stopped at ("(at row
// N)", which 18.16 adds to every row it cannot parse in JSONEachRow), the
// rows before it parsed and are put aside, the named row is refused with
// that answer, and the rows after it are sent next; the rows put aside go
// in together at the end. A run of bad rows costs one request per row,
// and a batch about two parts, instead of two requests per bad row and a
// part per good stretch. Without a name (or in a request over MarkerTrustBytes, where newer
// servers may count rows from a parallel-parsing chunk), it halves the
// rows until single rows are refused. When a transient or config error
// stops it, every row is inserted, refused or unsettled: the caller
// removes the first two, dead-letters the refused rows and keeps the
// unsettled ones. See BisectError.
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
// bytes) for the one place that holds the row anyway: its dead letter;
// the rows after the refused one, which ClickHouse copies too, are cut
// out of it.
//
// # Time
//
// The sink keeps no timers: the time a Client measures is one request's
// deadline, set on the connection, which the kernel counts in real time;
// Servers reads the clock it is given to start and end down periods. The
// retry timers that depend on both are dispatch's, on dispatch's injected
// clock. The tests that measure the deadline are in
// client_timing_test.go.
//
// # Decisions
//
//   - https:// speaks TLS; other schemes are refused rather than sent
//     plain HTTP.
//   - User and password in the URL are percent-decoded when they hold valid
//     escapes, and sent as written otherwise.
//   - Bisection never resends the whole batch. A refused row's answer
//     describes it: either ClickHouse named it, in a request small enough
//     for the name to be exact, or it was sent on its own.
//   - Rows that parsed before a named row are inserted after the rows
//     behind it: a batch's rows reach ClickHouse in at most a few
//     requests, each oldest first, and ClickHouse keeps no order between
//     requests anyway.
//   - Down periods double without jitter: they are one member's view of
//     a server, nothing synchronises them across members, and exact
//     periods make /status and the tests plain.
//   - A list of one server is never passed over: there is nowhere else
//     to send its batches, so the caller's retry backoff paces them.
//   - A failure reported while a server is already down does not lengthen
//     its period: concurrent batches of several queues count once.
//   - Compression defaults to auto: gzip at its fastest level, about a
//     sixth of the bytes of plain JSON rows for half a microsecond per
//     row, which every ClickHouse decodes; none to a server on a loopback
//     address, where there is no network to spare and the compression is
//     CPU at both ends (chute 8% more per row in the bench's txn-128 run,
//     ClickHouse the same). A name is not looked up: only localhost
//     counts as loopback. The default level costs twice the CPU
//     for a tenth fewer bytes; zstd saves a little more but old servers
//     refuse it. lz4 (ClickHouse's native blocks) spares ClickHouse's CPU
//     but, with pierrec/lz4, not chute's on varied rows, for half as many
//     bytes again as gzip: offered, not the default.
//     BenchmarkCompress measures them; the numbers are in
//     docs/clickhouse.md (Compression).
//   - A value in --clickhouse-settings may hold a comma where the text
//     after it holds no '=': "a=1,b=x,y" is b="x,y".
package sink
