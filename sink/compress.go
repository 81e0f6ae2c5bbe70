package sink

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Compression is how the body of an INSERT is compressed on the wire,
// named by its Content-Encoding. ClickHouse decodes a request body by
// its Content-Encoding without any setting (enable_http_compression is
// for its answers): 18.16 knows gzip and deflate (zlib's format, RFC
// 1950) and answers zstd with code 89, which Classify calls config.
// The zero value is CompressionNone.
type Compression int

const (
	// CompressionNone sends the rows as they are.
	CompressionNone Compression = iota
	// CompressionGzip sends gzip at its fastest level (see doc.go,
	// Decisions).
	CompressionGzip
	// CompressionDeflate sends zlib's format at its fastest level.
	CompressionDeflate
	// CompressionZstd sends zstd at its fastest level; ClickHouse
	// servers before 20.x refuse it.
	CompressionZstd
)

// DefaultCompression is what --clickhouse-compression is when not given:
// see doc.go, Decisions, and docs/benchmarks.md for the numbers.
const DefaultCompression = CompressionGzip

// Levels used for each method: the fastest. The benchmark
// (BenchmarkCompress) shows they keep most of the ratio of the default
// levels at a fraction of the CPU.
const (
	gzipLevel = gzip.BestSpeed
	zlibLevel = zlib.BestSpeed
	zstdLevel = zstd.SpeedFastest
)

// ParseCompression reads none, gzip, deflate or zstd, in any case; blank
// is none.
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return CompressionNone, nil
	case "gzip":
		return CompressionGzip, nil
	case "deflate":
		return CompressionDeflate, nil
	case "zstd":
		return CompressionZstd, nil
	}
	return CompressionNone, fmt.Errorf("sink: compression %q: want none, gzip, deflate or zstd", s)
}

// String returns none, gzip, deflate or zstd.
func (c Compression) String() string {
	if c == CompressionNone {
		return "none"
	}
	return c.contentEncoding()
}

// contentEncoding is the Content-Encoding header of c; "" for none.
func (c Compression) contentEncoding() string {
	switch c {
	case CompressionGzip:
		return "gzip"
	case CompressionDeflate:
		return "deflate"
	case CompressionZstd:
		return "zstd"
	}
	return ""
}

// compressors keeps the encoders a Client reuses: a gzip or zlib writer
// holds a few hundred KiB of tables, too much to make per batch. It also
// keeps the buffers of bodies sent (wire, returned by release) and the
// small staging buffers rows are gathered in on their way into a stream
// encoder: a batch's plain body is never made whole for gzip or deflate,
// and no body is allocated per batch once the pools are warm. Safe for
// concurrent use.
type compressors struct {
	gzip, zlib sync.Pool
	zstdOnce   sync.Once
	zstd       *zstd.Encoder // EncodeAll is safe for concurrent use; nil if it could not be made
	wire       sync.Pool     // *[]byte: bodies, plain or compressed, for release
	stage      sync.Pool     // *[]byte of stageBytes: rows gathered for a stream encoder
}

// stageBytes is the size of the buffer rows are gathered in before a
// stream encoder takes them: a few rows per Write rather than two Writes
// per row, in a buffer that stays in the CPU's cache.
const stageBytes = 64 << 10

// maxPooledWire is the largest body buffer kept for reuse; a larger one
// (a batch far over the usual batch_bytes) is left to the collector.
const maxPooledWire = 32 << 20

// rows returns the body of rows, one per line, compressed with c, in a
// buffer to hand back with release once sent, and the plain body's
// length.
func (p *compressors) rows(c Compression, rows [][]byte) ([]byte, int, error) {
	n := len(rows)
	for _, r := range rows {
		n += len(r)
	}
	if n > 0 {
		n-- // newlines go between rows
	}
	switch c {
	case CompressionGzip:
		out, err := p.streamRows(&p.gzip, rows, n, func(buf *bytes.Buffer) (resetWriter, error) { return gzip.NewWriterLevel(buf, gzipLevel) })
		return out, n, err
	case CompressionDeflate:
		out, err := p.streamRows(&p.zlib, rows, n, func(buf *bytes.Buffer) (resetWriter, error) { return zlib.NewWriterLevel(buf, zlibLevel) })
		return out, n, err
	}
	body := p.wireBuf(n)
	for i, r := range rows {
		if i > 0 {
			body = append(body, '\n')
		}
		body = append(body, r...)
	}
	if c == CompressionNone {
		return body, n, nil
	}
	out, err := p.compress(c, body)
	p.release(body)
	return out, n, err
}

// wireBuf returns an empty buffer of at least n bytes' capacity.
func (p *compressors) wireBuf(n int) []byte {
	if b, ok := p.wire.Get().(*[]byte); ok {
		if cap(*b) >= n {
			return (*b)[:0]
		}
		p.wire.Put(b)
	}
	return make([]byte, 0, n)
}

// release hands back a body rows returned, once nothing reads it.
func (p *compressors) release(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledWire {
		return
	}
	b = b[:0]
	p.wire.Put(&b)
}

// streamRows compresses rows, one per line, plain bytes in all, with a
// pooled writer of pool (made by mk when the pool is empty), gathering
// them in a staging buffer on the way.
func (p *compressors) streamRows(pool *sync.Pool, rows [][]byte, plain int, mk func(*bytes.Buffer) (resetWriter, error)) ([]byte, error) {
	buf := bytes.NewBuffer(p.wireBuf(plain/4 + 64))
	w, _ := pool.Get().(resetWriter)
	if w == nil {
		var err error
		if w, err = mk(buf); err != nil {
			return nil, err
		}
	} else {
		w.Reset(buf)
	}
	sp, _ := p.stage.Get().(*[]byte)
	if sp == nil {
		s := make([]byte, 0, stageBytes)
		sp = &s
	}
	stage := (*sp)[:0]
	var err error
	flush := func() {
		if err == nil && len(stage) > 0 {
			_, err = w.Write(stage)
		}
		stage = stage[:0]
	}
	for i, r := range rows {
		sep := min(i, 1) // the newline before every row but the first
		if sep+len(r) > cap(stage)-len(stage) {
			flush()
		}
		if sep == 1 {
			stage = append(stage, '\n')
		}
		if len(r) > cap(stage)-len(stage) { // larger than the staging buffer: as it is
			flush()
			if err == nil {
				_, err = w.Write(r)
			}
			continue
		}
		stage = append(stage, r...)
	}
	flush()
	*sp = stage[:0]
	p.stage.Put(sp)
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return nil, err
	}
	pool.Put(w)
	return buf.Bytes(), nil
}

// compress returns body compressed with c, in a new slice.
func (p *compressors) compress(c Compression, body []byte) ([]byte, error) {
	switch c {
	case CompressionGzip:
		return p.stream(&p.gzip, body, func(buf *bytes.Buffer) (resetWriter, error) { return gzip.NewWriterLevel(buf, gzipLevel) })
	case CompressionDeflate:
		return p.stream(&p.zlib, body, func(buf *bytes.Buffer) (resetWriter, error) { return zlib.NewWriterLevel(buf, zlibLevel) })
	case CompressionZstd:
		p.zstdOnce.Do(func() {
			p.zstd, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstdLevel), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		})
		if p.zstd == nil {
			return nil, fmt.Errorf("sink: zstd encoder could not be made")
		}
		return p.zstd.EncodeAll(body, make([]byte, 0, len(body)/4)), nil
	}
	return body, nil
}

// resetWriter is a gzip or zlib writer.
type resetWriter interface {
	Write([]byte) (int, error)
	Close() error
	Reset(io.Writer)
}

// stream compresses body with a pooled writer of pool, made by mk when
// the pool is empty.
func (p *compressors) stream(pool *sync.Pool, body []byte, mk func(*bytes.Buffer) (resetWriter, error)) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, len(body)/4+64))
	w, _ := pool.Get().(resetWriter)
	if w == nil {
		var err error
		if w, err = mk(buf); err != nil {
			return nil, err
		}
	} else {
		w.Reset(buf)
	}
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	pool.Put(w)
	return buf.Bytes(), nil
}
