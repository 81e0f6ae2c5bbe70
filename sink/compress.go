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
// holds a few hundred KiB of tables, too much to make per batch. Safe for
// concurrent use.
type compressors struct {
	gzip, zlib sync.Pool
	zstdOnce   sync.Once
	zstd       *zstd.Encoder // EncodeAll is safe for concurrent use; nil if it could not be made
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
