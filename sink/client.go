package sink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// DefaultTimeout bounds one request to ClickHouse: connect, send, answer.
const DefaultTimeout = 30 * time.Second

const (
	// maxAnswer bounds what is read of an answer; ClickHouse answers an
	// INSERT with an empty body and an error with a short message.
	maxAnswer = 1 << 20
	// maxMessage bounds Result.Message: ClickHouse quotes row data in its
	// errors, and messages go to logs and dead letters.
	maxMessage = 512
	userAgent  = "chute"
)

// ErrTimeout is wrapped by Result.Err when ClickHouse did not answer within
// the client's timeout or by the request context's deadline (then with
// context.DeadlineExceeded): the request may have landed all the same.
var ErrTimeout = errors.New("sink: clickhouse did not answer in time")

// ClientConfig configures a Client.
type ClientConfig struct {
	// Timeout bounds one request, from connecting to the last byte of the
	// answer. Zero means DefaultTimeout (30 s).
	Timeout time.Duration
	// Logger gets one debug line per request. Nil discards.
	Logger *slog.Logger
	// TLSConfig is used for https endpoints without an
	// Endpoint.TLSConfig; ServerName is filled from the endpoint's host
	// when empty. Nil means the system's roots and no client certificate.
	TLSConfig *tls.Config
}

// DefaultClientConfig returns the configuration NewClient uses for zero
// fields.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{Timeout: DefaultTimeout}
}

// Validate reports a configuration NewClient would not use as written.
func (c ClientConfig) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("sink: timeout %s is negative", c.Timeout)
	}
	return nil
}

// Client sends requests to ClickHouse's HTTP interface. Every request opens
// its own connection and closes it after the answer (Connection: close), so
// a Client holds no connections and needs no Close. It is safe for
// concurrent use.
type Client struct {
	timeout time.Duration
	log     *slog.Logger
	tls     *tls.Config
	enc     *compressors
}

// NewClient returns a Client. Zero or negative fields of cfg take their
// defaults.
func NewClient(cfg ClientConfig) *Client {
	c := &Client{timeout: cfg.Timeout, log: cfg.Logger, tls: cfg.TLSConfig, enc: &compressors{}}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Result is ClickHouse's answer to one request, classified.
type Result struct {
	// Status is the HTTP status; 0 when there was no answer.
	Status int
	// Code is ClickHouse's exception code; 0 when there is none.
	Code int
	// Class says what to do with the rows: see Class.
	Class Class
	// Message is ClickHouse's error text (or the transport error's),
	// without the row data ClickHouse quotes in it (RedactRows) or the
	// password (Redact), trimmed and cut to about 512 bytes; "" when OK.
	// It is what logs, /status and spans show.
	Message string
	// Detail is ClickHouse's error text with the row data it quotes,
	// the password still redacted, trimmed and cut to about 512 bytes:
	// for the dead letter of a refused row, which holds the row anyway.
	// The rows after the refused one are cut out (cutFollowingRows).
	// It equals Message for a transport error; "" when OK.
	Detail string
	// Err is the transport error (connect, TLS, send, read, timeout,
	// cancellation); nil when an answer came. It wraps ErrTimeout on a
	// timeout and the context's error when ctx ended the request.
	Err error
	// Landed is set on an error raised while pushing the inserted block
	// to a materialized view ("while pushing to view"): the block is in
	// the table already (18.16 writes it before the views, and a batch is
	// one block), and sent again it would be there twice.
	Landed bool
	// Duration is the time from the start of the request to its end.
	Duration time.Duration
	// WireBytes is the size of the request body as sent, after
	// compression; 0 when it could not be built.
	WireBytes int
}

// OK reports whether ClickHouse took the request: a 2xx without an
// exception in its body. The zero Result is not OK.
func (r Result) OK() bool {
	return r.Class == ClassOK && r.Err == nil && r.Status >= 200 && r.Status < 300
}

// ResultError is a Result that is not OK, as an error.
type ResultError struct {
	Op     string // "insert into `db`.`t`", "read system.settings"
	Result Result
}

func (e *ResultError) Error() string {
	r := e.Result
	if r.Err != nil {
		return fmt.Sprintf("sink: %s: %s: %s", e.Op, r.Class, strings.TrimPrefix(r.Message, "sink: "))
	}
	return fmt.Sprintf("sink: %s: %s error, status %d, code %d: %s", e.Op, r.Class, r.Status, r.Code, r.Message)
}

// Unwrap returns the transport error, if any.
func (e *ResultError) Unwrap() error { return e.Result.Err }

// Insert sends rows to target (a quoted name from Target) as one INSERT ...
// FORMAT JSONEachRow: rows joined by "\n" in the order given, byte for
// byte, compressed as ep.Compression means on ep.Addr (On), with
// ep.Settings as URL parameters. token, when not empty, is sent as
// insert_deduplication_token; send one only to a server whose
// HasSetting(TokenSetting) is true. Insert returns when ClickHouse
// answered, the timeout passed or ctx ended; it never retries. The caller
// keeps ownership of rows; Insert does not keep or change them.
func (c *Client) Insert(ctx context.Context, ep Endpoint, target string, rows [][]byte, token string) Result {
	return c.InsertFrom(ctx, ep, target, rows, nil, token)
}

// InsertFrom is Insert with the rows read through rd where it reads them
// (RowReader); nil reads them all from memory. A body sent uncompressed is
// never made whole: its rows go to the connection a staging buffer at a
// time.
func (c *Client) InsertFrom(ctx context.Context, ep Endpoint, target string, rows [][]byte, rd RowReader, token string) Result {
	comp := ep.Compression.On(ep.Addr)
	uri := insertURI(target, token, ep.Settings)
	body := requestBody{rows: rows, rd: rd, enc: c.enc, n: bodyLen(rows)}
	plain := body.n
	if comp != CompressionNone {
		wire, _, err := c.enc.rows(comp, rows, rd)
		if err != nil {
			res := Result{Class: ClassConfig, Err: err, Message: err.Error()}
			c.log.Warn("clickhouse insert body not compressed", "endpoint", ep.String(), "compression", comp.String(), "err", err)
			return res
		}
		defer c.enc.release(wire) // do is done with it when it returns
		body = requestBody{raw: wire, n: len(wire)}
	}
	if comp == CompressionLZ4 {
		uri += "&decompress=1" // the body is in ClickHouse's compressed blocks
	}
	res, _ := c.do(ctx, ep, uri, comp.contentEncoding(), body)
	res.WireBytes = body.n
	if res.Code == codeUnknownCompression {
		res.Message += " (check --clickhouse-compression: this server does not decode " + comp.String() + ")"
	}
	c.log.Debug("clickhouse insert",
		"endpoint", ep.String(), "target", target, "rows", len(rows), "bytes", plain, "wire_bytes", body.n,
		"status", res.Status, "code", res.Code, "class", res.Class.String(),
		"duration", res.Duration, "message", res.Message)
	return res
}

// requestBody is a request's body: raw bytes, or rows joined by newlines
// and gathered onto the connection as they are written (compressors.gather).
type requestBody struct {
	raw  []byte
	rows [][]byte
	rd   RowReader
	enc  *compressors
	n    int // the body's length
}

// writeTo writes the body to w.
func (b requestBody) writeTo(w io.Writer) error {
	if b.enc == nil {
		_, err := w.Write(b.raw)
		return err
	}
	return b.enc.gather(b.rows, b.rd, func(p []byte) error { _, err := w.Write(p); return err })
}

// codeUnknownCompression is ClickHouse's UNKNOWN_COMPRESSION_METHOD: a
// Content-Encoding the server cannot decode (zstd on 18.16).
const codeUnknownCompression = 89

// HasSetting reports whether the server knows the setting called name, by
// counting it in system.settings. An error is a *ResultError.
func (c *Client) HasSetting(ctx context.Context, ep Endpoint, name string) (bool, error) {
	q := []byte(settingQuery(name))
	res, answer := c.do(ctx, ep, "/", "", requestBody{raw: q, n: len(q)})
	c.log.Debug("clickhouse setting",
		"endpoint", ep.String(), "setting", name, "status", res.Status, "code", res.Code,
		"class", res.Class.String(), "duration", res.Duration, "message", res.Message)
	if !res.OK() {
		return false, &ResultError{Op: "read system.settings", Result: res}
	}
	count, err := strconv.Atoi(string(bytes.TrimSpace(answer)))
	if err != nil {
		res.Class = ClassTransient
		res.Message = truncate([]byte(Redact(string(answer), ep)))
		return false, &ResultError{Op: "read system.settings: not a count", Result: res}
	}
	return count > 0, nil
}

// do POSTs body, of Content-Encoding encoding ("": none), to uri on a
// new connection and returns the classified answer and its body.
func (c *Client) do(ctx context.Context, ep Endpoint, uri, encoding string, body requestBody) (Result, []byte) {
	start := time.Now()
	deadline, ctxDeadline := start.Add(c.timeout), false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxDeadline = d, true
	}
	status, code, answer, err := c.roundTrip(ctx, ep, uri, encoding, body, deadline)
	res := Result{Status: status, Duration: time.Since(start)}
	if err != nil {
		timedOut := errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, fasthttp.ErrTimeout)
		res.Class = ClassTransient
		switch {
		case ctxDeadline && (timedOut || errors.Is(ctx.Err(), context.DeadlineExceeded)):
			err = fmt.Errorf("sink: POST to %s: %w after %s: %w", ep.Addr, ErrTimeout, deadline.Sub(start).Round(time.Millisecond), context.DeadlineExceeded)
		case ctx.Err() != nil:
			err = fmt.Errorf("sink: POST to %s: %w", ep.Addr, context.Cause(ctx))
		case timedOut:
			err = fmt.Errorf("sink: POST to %s: %w after %s", ep.Addr, ErrTimeout, c.timeout)
		default:
			var hint string
			res.Class, hint = classifyTransport(err)
			if hint != "" {
				err = fmt.Errorf("%w: %s", err, hint)
			}
			err = fmt.Errorf("sink: POST to %s: %w", ep.Addr, err)
		}
		res.Status = 0
		res.Err = err
		res.Message = truncate([]byte(Redact(err.Error(), ep)))
		res.Detail = res.Message
		return res, nil
	}
	res.Class, res.Code = Classify(status, code, answer)
	if res.Class != ClassOK {
		res.Landed = viewFailed(answer)
		full := Redact(string(answer), ep)
		res.Detail = truncate([]byte(cutFollowingRows(full)))
		res.Message = truncate([]byte(RedactRows(full))) // before the cut, which may split a quote
		if res.Message == "" {
			res.Message = fmt.Sprintf("HTTP %d with no body", status)
			res.Detail = res.Message
		}
	}
	return res, answer
}

// viewTail is how ClickHouse ends an exception a materialized view
// raised after the block went into its source table (Result.Landed):
// "while pushing to view <name>" (ex.addMessage), on later releases the
// view's uuid after its name, then the class (18.16: ", e.what() =
// DB::Exception") or the code's name and the version, and nothing else.
var viewTail = regexp.MustCompile("while pushing to view (?:`[^`\n]*`|[^\\s,()`])+(?: \\([0-9a-fA-F-]{36}\\))?" +
	`(?:, e\.what\(\) = [A-Za-z:_]+|\.? \([A-Z][A-Z0-9_]*\) \(version [0-9.]+(?: \(official build\))?\))?\s*$`)

// viewFailed reports whether answer is ClickHouse's report of a
// materialized view that failed once the block was in its source table:
// the exception ends with the view's context (viewTail). Only at the end:
// a parse error quotes the rows from the one it could not read, whose
// text may hold the same words, and then adds its own context after the
// quote ("(at row 2)"). Found anywhere, the words in a row made a refused
// batch count as inserted, and its rows were dropped.
func viewFailed(answer []byte) bool {
	return viewTail.Match(answer)
}

// roundTrip sends one request on a new connection and reads the answer.
// The connection is closed when ctx ends, so a cancelled caller does not
// wait for the deadline.
func (c *Client) roundTrip(ctx context.Context, ep Endpoint, uri, encoding string, body requestBody, deadline time.Time) (status int, code string, answer []byte, err error) {
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(dctx, "tcp", ep.Addr)
	if err != nil {
		return 0, "", nil, deadlineErr(dctx, err)
	}
	defer raw.Close()
	// Closing the TCP connection, not the TLS one (whose Close may wait to
	// send an alert), ends a read or write at once.
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	conn := raw
	if ep.TLS {
		cfg := &tls.Config{}
		if ep.TLSConfig != nil {
			cfg = ep.TLSConfig.Clone()
		} else if c.tls != nil {
			cfg = c.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = ep.Host()
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			return 0, "", nil, deadlineErr(dctx, err)
		}
		conn = tc
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return 0, "", nil, err
	}

	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(uri) // written as is: req.URI() is never parsed
	req.Header.SetHost(ep.Addr)
	req.Header.SetUserAgent(userAgent)
	req.Header.SetNoDefaultContentType(true)
	req.SetConnectionClose()
	if auth := ep.AuthHeader(); auth != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
	}
	if encoding != "" {
		req.Header.Set(fasthttp.HeaderContentEncoding, encoding)
	}
	req.Header.SetContentLength(body.n)

	// The body is written while the answer is read: ClickHouse may answer
	// an error before it has read the whole body (a row it cannot parse, a
	// memory limit) and close the connection, and the answer, not the
	// failed write, says what happened.
	wrote := make(chan error, 1)
	go func() {
		bw := bufio.NewWriter(pieceWriter{conn})
		err := req.Header.Write(bw)
		if err == nil {
			err = body.writeTo(bw)
		}
		if err == nil {
			err = bw.Flush()
		}
		wrote <- err
	}()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	in := &readErrRecorder{r: conn}
	rerr := resp.ReadLimitBody(bufio.NewReader(in), maxAnswer)
	raw.Close() // ends a write still going on after an early answer
	werr := <-wrote
	if rerr != nil {
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			// fasthttp reports any error on the first byte as EOF; the
			// connection's own error says more, such as a TLS 1.3 server
			// refusing the client's certificate after the handshake.
			if in.err != nil && !errors.Is(in.err, io.EOF) {
				return 0, "", nil, in.err
			}
			if werr != nil {
				return 0, "", nil, werr
			}
			rerr = io.ErrUnexpectedEOF // the server closed without answering
		}
		return 0, "", nil, rerr
	}
	return resp.StatusCode(), string(resp.Header.Peek(ExceptionCodeHeader)), bytes.Clone(resp.Body()), nil
}

// bodyPiece bounds what one system call writes of a request. A write of
// megabytes holds its thread's processor for the whole call, and with
// the runtime's monitor kept out of its deep sleep (internal/sysmon) the
// processor is taken back only after 10 ms or more; in pieces, with the
// writer yielding between them, the goroutines queued behind it (calls
// waiting for their answers) run meanwhile.
const bodyPiece = 128 << 10

// pieceWriter writes to w at most bodyPiece bytes at a time, yielding
// the processor between pieces.
type pieceWriter struct{ w io.Writer }

func (pw pieceWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if n > 0 {
			runtime.Gosched()
		}
		k := min(len(p), bodyPiece)
		m, err := pw.w.Write(p[:k])
		n += m
		if err == nil && m < k {
			err = io.ErrShortWrite
		}
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// readErrRecorder keeps the first error of the reader it wraps.
type readErrRecorder struct {
	r   io.Reader
	err error
}

func (r *readErrRecorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// deadlineErr turns a dial or handshake error caused by the deadline into
// os.ErrDeadlineExceeded, as a read past the deadline reports it.
func deadlineErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", os.ErrDeadlineExceeded, err)
	}
	return err
}

// truncate returns b trimmed of spaces and cut to maxMessage bytes, at a
// rune boundary, with "..." when cut.
func truncate(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) <= maxMessage {
		return string(b)
	}
	cut := maxMessage
	for cut > 0 && b[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return string(b[:cut]) + "..."
}
