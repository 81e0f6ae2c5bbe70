package sink

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/go-faster/city"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
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
	// CompressionLZ4 sends ClickHouse's own compressed blocks (LZ4, each
	// checksummed with CityHash128) with decompress=1 in the URL and no
	// Content-Encoding: every ClickHouse decodes it, 18.16 included, with
	// less CPU than gzip, for a larger body (docs/clickhouse.md).
	CompressionLZ4
	// CompressionAuto is none for a server on a loopback address and
	// gzip for any other (On): compressing for a server on the same
	// host spares no network and costs CPU at both ends.
	CompressionAuto
)

// DefaultCompression is what --clickhouse-compression is when not given:
// see doc.go, Decisions, and docs/benchmarks.md for the numbers.
const DefaultCompression = CompressionAuto

// On returns the compression c means for a server at addr (host:port,
// as Endpoint.Addr): auto is none when the host is a loopback address
// (127.0.0.0/8, ::1, an IPv4-mapped one) or localhost, and gzip for
// any other host, a name included (no lookup: a name that resolves to
// loopback gets gzip); every other value is itself.
func (c Compression) On(addr string) Compression {
	if c != CompressionAuto {
		return c
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return CompressionNone
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return CompressionNone
	}
	return CompressionGzip
}

// Levels used for each method: the fastest. The benchmark
// (BenchmarkCompress) shows they keep most of the ratio of the default
// levels at a fraction of the CPU.
const (
	gzipLevel = gzip.BestSpeed
	zlibLevel = zlib.BestSpeed
	zstdLevel = zstd.SpeedFastest
)

// ParseCompression reads auto, none, gzip, deflate, zstd or lz4, in any
// case; blank is none.
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
	case "lz4":
		return CompressionLZ4, nil
	case "auto":
		return CompressionAuto, nil
	}
	return CompressionNone, fmt.Errorf("sink: compression %q: want auto, none, gzip, deflate, zstd or lz4", s)
}

// String returns auto, none, gzip, deflate, zstd or lz4.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionAuto:
		return "auto"
	case CompressionLZ4:
		return "lz4"
	}
	return c.contentEncoding()
}

// contentEncoding is the Content-Encoding header of c; "" for none and
// lz4 (a URL parameter says that).
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
// small buffers rows are gathered in on their way into a stream encoder
// or onto the connection (gather): a batch's plain body is never made
// whole, and no body is allocated per batch once the pools are warm.
// Safe for concurrent use.
type compressors struct {
	gzip, zlib sync.Pool
	lz4        sync.Pool // *blockWriter
	zstdOnce   sync.Once
	zstd       *zstd.Encoder // EncodeAll is safe for concurrent use; nil if it could not be made
	wire       sync.Pool     // *[]byte: bodies, plain or compressed, for release
	stage      sync.Pool     // *[]byte of stageBytes: rows gathered for a stream encoder or the connection
	read       sync.Pool     // *readBuf: rows a RowReader read
}

// stageBytes is the size of the buffer rows are gathered in before a
// stream encoder or the connection takes them: a few rows per Write
// rather than two Writes per row, in a buffer that stays in the CPU's
// cache.
const stageBytes = 64 << 10

// readBytes is the size of the buffer a RowReader reads rows into.
const readBytes = 256 << 10

// readBuf is a buffer a RowReader reads rows into and the views of them.
type readBuf struct {
	buf   []byte
	views [][]byte
}

// maxPooledWire is the largest body buffer kept for reuse; a larger one
// (a batch far over the usual batch_bytes) is left to the collector.
const maxPooledWire = 32 << 20

// A RowReader reads rows from where they are stored, when that costs less
// than reading them through memory. Dispatch's rows are views of the
// queue log's file mappings, whose pages a read faults into the process
// a few at a time; a pread of the same bytes copies them from the page
// cache for a fraction of that CPU (docs/benchmarks.md).
type RowReader interface {
	// ReadRows reads a prefix of rows into buf and appends to views the
	// rows read, as slices of buf, one per row. It reads none when it
	// cannot read rows[0] so (not where it reads from, larger than buf),
	// and the row is then taken from memory.
	ReadRows(buf []byte, rows, views [][]byte) [][]byte
}

// bodyLen is the length of the body of rows: the rows and a newline
// between each two.
func bodyLen(rows [][]byte) int {
	n := len(rows)
	for _, r := range rows {
		n += len(r)
	}
	return max(n-1, 0)
}

// gather hands put the body of rows (rows joined by newlines) in pieces
// of at most stageBytes, gathered in a pooled staging buffer; a row larger
// than the buffer goes to put on its own. Rows are read through rd where
// it reads them, else from memory; nil rd reads all from memory. It stops
// at put's first error and returns it.
func (p *compressors) gather(rows [][]byte, rd RowReader, put func([]byte) error) error {
	sp, _ := p.stage.Get().(*[]byte)
	if sp == nil {
		s := make([]byte, 0, stageBytes)
		sp = &s
	}
	defer p.stage.Put(sp)
	stage := (*sp)[:0]
	var rb *readBuf
	if rd != nil {
		if rb, _ = p.read.Get().(*readBuf); rb == nil {
			rb = &readBuf{buf: make([]byte, readBytes)}
		}
		defer p.read.Put(rb)
	}
	flush := func() error {
		if len(stage) == 0 {
			return nil
		}
		err := put(stage)
		stage = stage[:0]
		return err
	}
	for i := 0; i < len(rows); {
		next := rows[i:]
		if rb != nil {
			if rb.views = rd.ReadRows(rb.buf, next, rb.views[:0]); len(rb.views) > 0 {
				next = rb.views
			} else {
				next = next[:1]
			}
		}
		for _, r := range next {
			sep := min(i, 1) // the newline before every row but the first
			i++
			if sep+len(r) > cap(stage)-len(stage) {
				if err := flush(); err != nil {
					return err
				}
			}
			if sep == 1 {
				stage = append(stage, '\n')
			}
			if len(r) > cap(stage)-len(stage) { // larger than the staging buffer: as it is
				if err := flush(); err != nil {
					return err
				}
				if err := put(r); err != nil {
					return err
				}
				continue
			}
			stage = append(stage, r...)
		}
	}
	return flush()
}

// rows returns the body of rows, one per line, compressed with c, in a
// buffer to hand back with release once sent, and the plain body's
// length. rd, when not nil, reads the rows (gather). Insert streams a
// body it does not compress rather than make it here.
func (p *compressors) rows(c Compression, rows [][]byte, rd RowReader) ([]byte, int, error) {
	n := bodyLen(rows)
	switch c {
	case CompressionGzip:
		out, err := p.streamRows(&p.gzip, rows, rd, n, newGzip)
		return out, n, err
	case CompressionDeflate:
		out, err := p.streamRows(&p.zlib, rows, rd, n, newZlib)
		return out, n, err
	case CompressionLZ4:
		out, err := p.streamRows(&p.lz4, rows, rd, n, func(buf *bytes.Buffer) (resetWriter, error) { return newBlockWriter(buf), nil })
		return out, n, err
	}
	body := p.wireBuf(n)
	_ = p.gather(rows, rd, func(b []byte) error { body = append(body, b...); return nil })
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
// them on the way.
func (p *compressors) streamRows(pool *sync.Pool, rows [][]byte, rd RowReader, plain int, mk func(*bytes.Buffer) (resetWriter, error)) ([]byte, error) {
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
	err := p.gather(rows, rd, func(b []byte) error { _, err := w.Write(b); return err })
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
		return p.streamRows(&p.gzip, [][]byte{body}, nil, len(body), newGzip)
	case CompressionDeflate:
		return p.streamRows(&p.zlib, [][]byte{body}, nil, len(body), newZlib)
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

// newGzip and newZlib make the writers of streamRows' pools.
func newGzip(buf *bytes.Buffer) (resetWriter, error) { return gzip.NewWriterLevel(buf, gzipLevel) }
func newZlib(buf *bytes.Buffer) (resetWriter, error) { return zlib.NewWriterLevel(buf, zlibLevel) }

// resetWriter is a gzip, zlib or lz4 block writer.
type resetWriter interface {
	Write([]byte) (int, error)
	Close() error
	Reset(io.Writer)
}

// blockWriter writes ClickHouse's compressed format, which an INSERT
// with decompress=1 reads (CompressedReadBuffer): blocks of at most
// blockBytes of input, each
//
//	checksum   16 bytes  CityHash128 (ClickHouse's, v1.0.2) of the rest, low then high half, little-endian
//	method      1 byte   0x82: LZ4
//	size        4 bytes  of method, sizes and data, little-endian
//	plain size  4 bytes  of the block's input, little-endian
//	data                 one LZ4 block
//
// Each block is whole in itself (no dictionary from the one before).
type blockWriter struct {
	w     io.Writer
	block []byte // input not yet written, up to blockBytes
	frame []byte // one block's output
	lz    lz4.Compressor
	err   error
}

// blockBytes is ClickHouse's own max_compress_block_size default.
const blockBytes = 1 << 20

// blockHeader is the checksum, method and sizes before a block's data.
const blockHeader = 16 + 1 + 4 + 4

// methodLZ4 is ClickHouse's CompressionMethodByte for LZ4.
const methodLZ4 = 0x82

func newBlockWriter(w io.Writer) *blockWriter {
	return &blockWriter{w: w, block: make([]byte, 0, blockBytes)}
}

// Reset starts a new body written to w.
func (b *blockWriter) Reset(w io.Writer) {
	b.w, b.block, b.err = w, b.block[:0], nil
}

// Write gathers p into blocks, writing each once full.
func (b *blockWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && b.err == nil {
		k := copy(b.block[len(b.block):cap(b.block)], p)
		b.block, p = b.block[:len(b.block)+k], p[k:]
		if len(b.block) == cap(b.block) {
			b.flush()
		}
	}
	if b.err != nil {
		return 0, b.err
	}
	return n, nil
}

// Close writes the last block.
func (b *blockWriter) Close() error {
	if len(b.block) > 0 {
		b.flush()
	}
	return b.err
}

// flush writes the gathered input as one block.
func (b *blockWriter) flush() {
	if b.err != nil {
		return
	}
	// With room for the bound, LZ4 always encodes the block, as
	// literals where it finds no match: ClickHouse needs no other method.
	need := blockHeader + lz4.CompressBlockBound(len(b.block))
	if cap(b.frame) < need {
		b.frame = make([]byte, need)
	}
	f := b.frame[:need]
	k, err := b.lz.CompressBlock(b.block, f[blockHeader:])
	if err != nil || k == 0 {
		b.err = fmt.Errorf("sink: lz4 block of %d bytes not compressed: %v", len(b.block), err)
		return
	}
	f = f[:blockHeader+k]
	f[16] = methodLZ4
	binary.LittleEndian.PutUint32(f[17:], uint32(9+k))
	binary.LittleEndian.PutUint32(f[21:], uint32(len(b.block)))
	h := city.CH128(f[16:])
	binary.LittleEndian.PutUint64(f[0:], h.Low)
	binary.LittleEndian.PutUint64(f[8:], h.High)
	_, b.err = b.w.Write(f)
	b.block = b.block[:0]
}
