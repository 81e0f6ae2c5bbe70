package sink

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/go-faster/city"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

func TestParseCompression(t *testing.T) {
	tests := []struct {
		in   string
		want Compression
		bad  bool
	}{
		{"", CompressionNone, false}, {"none", CompressionNone, false}, {"gzip", CompressionGzip, false},
		{" GZIP ", CompressionGzip, false}, {"deflate", CompressionDeflate, false}, {"zstd", CompressionZstd, false},
		{"lz4", CompressionLZ4, false}, {" LZ4", CompressionLZ4, false}, {"auto", CompressionAuto, false},
		{"Auto ", CompressionAuto, false}, {"br", 0, true}, {"lz4hc", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseCompression(tt.in)
		if (err != nil) != tt.bad || !tt.bad && got != tt.want {
			t.Errorf("ParseCompression(%q): got %v, %v, want %v (error %v)", tt.in, got, err, tt.want, tt.bad)
		}
		if !tt.bad {
			if back, _ := ParseCompression(got.String()); back != got {
				t.Errorf("%v.String() = %q does not parse back", got, got.String())
			}
		}
	}
}

// TestCompression_On: auto is none for a server on a loopback host
// and gzip for any other; every other compression is itself anywhere.
// Only resolved, never dialed: tests keep to loopback.
func TestCompression_On(t *testing.T) {
	loopback := []string{"127.0.0.1:8123", "127.45.6.7:8123", "[::1]:8123", "[::ffff:127.0.0.1]:8123", "localhost:8123",
		"LOCALHOST:8443", "ch.localhost:8123", "127.0.0.1", "::1"}
	network := []string{"192.0.2.10:8123", "[2001:db8::1]:8123", "clickhouse:8123", "ch.example.com:8443", "localhost.example:8123",
		"0.0.0.0:8123", "[::]:8123", "128.0.0.1:8123", "10.0.0.1"}
	for _, addr := range loopback {
		if got := CompressionAuto.On(addr); got != CompressionNone {
			t.Errorf("auto on %s: %v, want none", addr, got)
		}
	}
	for _, addr := range network {
		if got := CompressionAuto.On(addr); got != CompressionGzip {
			t.Errorf("auto on %s: %v, want gzip", addr, got)
		}
	}
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionDeflate, CompressionZstd, CompressionLZ4} {
		for _, addr := range []string{loopback[0], network[0]} {
			if got := c.On(addr); got != c {
				t.Errorf("%v on %s: %v, want itself", c, addr, got)
			}
		}
	}
}

// decompress undoes the Content-Encoding enc ("" for none).
func decompress(t testing.TB, enc string, b []byte) []byte {
	t.Helper()
	var r io.Reader
	var err error
	switch enc {
	case "":
		return b
	case "gzip":
		r, err = gzip.NewReader(bytes.NewReader(b))
	case "deflate":
		r, err = zlib.NewReader(bytes.NewReader(b))
	case "lz4":
		return decodeBlocks(t, b)
	case "zstd":
		var d *zstd.Decoder
		d, err = zstd.NewReader(bytes.NewReader(b))
		if err == nil {
			defer d.Close()
			r = d
		}
	default:
		t.Fatalf("unknown encoding %q", enc)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", enc, err)
	}
	return out
}

// TestClient_Insert_compressesWithContentEncoding checks, on the fake
// server's view of the request, that each compression sends its
// Content-Encoding and a body that decodes to the rows, and that
// WireBytes is the body's size.
func TestClient_Insert_compressesWithContentEncoding(t *testing.T) {
	f := newFakeClickHouse(t, false)
	var encodings []string
	f.setAnswer(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		encodings = append(encodings, r.Header.Get("Content-Encoding"))
	})
	c := NewClient(ClientConfig{Timeout: 5 * time.Second})
	rows := benchRows(200)
	plain := bytes.Join(rows, []byte("\n"))
	for _, comp := range []Compression{CompressionNone, CompressionGzip, CompressionDeflate, CompressionZstd} {
		ep := f.endpoint("", "")
		ep.Compression = comp
		res := c.Insert(context.Background(), ep, "`d`.`t`", rows, "")
		if !res.OK() {
			t.Fatalf("%v: got %+v, want OK", comp, res)
		}
		req := f.lastRequest(t)
		enc := encodings[len(encodings)-1]
		if enc != comp.contentEncoding() {
			t.Errorf("%v: Content-Encoding %q, want %q", comp, enc, comp.contentEncoding())
		}
		if res.WireBytes != len(req.Body) {
			t.Errorf("%v: WireBytes %d, want the body's %d", comp, res.WireBytes, len(req.Body))
		}
		if comp != CompressionNone && len(req.Body) > len(plain)/2 {
			t.Errorf("%v: %d bytes on the wire for %d, want less than half", comp, len(req.Body), len(plain))
		}
		if got := decompress(t, enc, req.Body); !bytes.Equal(got, plain) {
			t.Errorf("%v: body decodes to %d bytes, want the %d of the rows", comp, len(got), len(plain))
		}
	}
}

// benchRows returns n JSON rows of about 200 bytes, like an event stream:
// a few repeated names and values, an id, a timestamp, a random token.
func benchRows(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	paths := []string{"/", "/login", "/api/v1/orders", "/api/v1/items/search", "/static/app.js"}
	agents := []string{"Mozilla/5.0 (X11; Linux x86_64)", "curl/8.5.0", "Go-http-client/2.0"}
	rows := make([][]byte, n)
	ts := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := range rows {
		rows[i] = fmt.Appendf(nil, `{"id":%d,"ts":"%s","user_id":%d,"method":"GET","path":"%s","status":%d,"duration_ms":%.3f,"agent":"%s","trace":"%016x"}`,
			1_000_000+i, ts.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), r.IntN(50_000), paths[r.IntN(len(paths))],
			[]int{200, 200, 200, 404, 500}[r.IntN(5)], r.Float64()*250, agents[r.IntN(len(agents))], r.Uint64())
	}
	return rows
}

// BenchmarkCompress measures the CPU per row and the bytes on the wire of
// each compression of a 10,000-row batch of ~200-byte rows: the numbers
// behind DefaultCompression and the levels (docs/benchmarks.md). ns/row
// is the compression alone; ratio is plain bytes over wire bytes.
func BenchmarkCompress(b *testing.B) {
	rows := benchRows(10_000)
	body := bytes.Join(rows, []byte("\n"))
	type codec struct {
		name string
		run  func([]byte) []byte
	}
	stream := func(mk func(io.Writer) io.WriteCloser) func([]byte) []byte {
		return func(in []byte) []byte {
			var buf bytes.Buffer
			w := mk(&buf)
			_, _ = w.Write(in)
			_ = w.Close()
			return buf.Bytes()
		}
	}
	zstdAt := func(l zstd.EncoderLevel) func([]byte) []byte {
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1))
		return func(in []byte) []byte { return enc.EncodeAll(in, nil) }
	}
	pooled := &compressors{}
	codecs := []codec{
		{"none", func(in []byte) []byte { return in }},
		{"gzip-fastest", stream(func(w io.Writer) io.WriteCloser { z, _ := gzip.NewWriterLevel(w, gzip.BestSpeed); return z })},
		{"gzip-default", stream(func(w io.Writer) io.WriteCloser { z, _ := gzip.NewWriterLevel(w, gzip.DefaultCompression); return z })},
		{"deflate-fastest", stream(func(w io.Writer) io.WriteCloser { z, _ := zlib.NewWriterLevel(w, zlib.BestSpeed); return z })},
		{"zstd-fastest", zstdAt(zstd.SpeedFastest)},
		{"zstd-default", zstdAt(zstd.SpeedDefault)},
		{"client-gzip", func(in []byte) []byte { out, _ := pooled.compress(CompressionGzip, in); return out }},
		{"client-zstd", func(in []byte) []byte { out, _ := pooled.compress(CompressionZstd, in); return out }},
		{"client-rows-gzip", func([]byte) []byte {
			out, _, _ := pooled.rows(CompressionGzip, rows, nil)
			pooled.release(out)
			return out
		}},
		{"client-rows-lz4", func([]byte) []byte {
			out, _, _ := pooled.rows(CompressionLZ4, rows, nil)
			pooled.release(out)
			return out
		}},
	}
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			var wire int
			for b.Loop() {
				wire = len(c.run(body))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
			b.ReportMetric(float64(len(body))/float64(wire), "ratio")
			b.ReportMetric(float64(wire)/float64(len(rows)), "wireB/row")
		})
	}
}

// TestCompressors_rows_bodyIsTheJoinedRows checks that each compression's
// body, and the plain body streamed as Insert sends it, is the rows
// joined by newlines, byte for byte, for rows that fill the staging
// buffer many times, rows larger than it, empty rows, one row and none,
// with the buffers reused from one body to the next; and the same with
// the rows read through a RowReader that reads some of them.
func TestCompressors_rows_bodyIsTheJoinedRows(t *testing.T) {
	big := bytes.Repeat([]byte(`{"pad":"x"}`), stageBytes/5) // over twice the staging buffer
	exact := bytes.Repeat([]byte("y"), stageBytes)
	cases := map[string][][]byte{
		"many":      benchRows(2000),
		"large":     {[]byte(`{"a":1}`), big, []byte(`{"b":2}`), big},
		"exact":     {exact, exact, []byte(`{"c":3}`)},
		"empty":     {{}, []byte(`{"d":4}`), {}, {}},
		"one":       {[]byte(`{"e":5}`)},
		"none":      nil,
		"afterFull": append(benchRows(300), big),
	}
	p := &compressors{}
	for name, rows := range cases {
		for _, rd := range []*partReader{nil, {}} {
			label := name
			if rd != nil {
				label += " read"
			}
			want := rd.body(rows)
			for _, comp := range []Compression{CompressionNone, CompressionGzip, CompressionDeflate, CompressionZstd, CompressionLZ4} {
				for round := range 2 { // the second from pooled buffers
					wire, plain, err := p.rows(comp, rows, rd.rowReader())
					if err != nil {
						t.Fatalf("%s %v: %v", label, comp, err)
					}
					if plain != len(want) {
						t.Errorf("%s %v round %d: got plain %d bytes, want %d", label, comp, round, plain, len(want))
					}
					enc := comp.contentEncoding()
					if comp == CompressionLZ4 {
						enc = "lz4"
					}
					if got := decompress(t, enc, wire); !bytes.Equal(got, want) {
						t.Errorf("%s %v round %d: got a body of %d bytes, want the %d of the joined rows", label, comp, round, len(got), len(want))
					}
					p.release(wire)
				}
			}
			var streamed bytes.Buffer
			body := requestBody{rows: rows, rd: rd.rowReader(), enc: p, n: bodyLen(rows)}
			if err := body.writeTo(&streamed); err != nil || !bytes.Equal(streamed.Bytes(), want) || body.n != len(want) {
				t.Errorf("%s streamed: got %d bytes (length %d), err %v; want the %d of the joined rows", label, streamed.Len(), body.n, err, len(want))
			}
		}
	}
}

// partReader is a RowReader that reads one, two or three rows at a
// time, and every fourth time none; none of a row
// larger than its buffer either. It reads a row in upper case, so that
// a body shows which rows were taken from it.
type partReader struct{ calls int }

func (r *partReader) ReadRows(buf []byte, rows, views [][]byte) [][]byte {
	r.calls++
	if r.calls%4 == 0 {
		return views
	}
	n := 0
	for _, row := range rows[:min(len(rows), r.calls%4)] {
		if n+len(row) > len(buf) {
			break
		}
		copy(buf[n:], bytes.ToUpper(row))
		views = append(views, buf[n:n+len(row):n+len(row)])
		n += len(row)
	}
	return views
}

// body returns the body of rows as read through a new reader like r (rows
// as they are for nil), without reading them through r.
func (r *partReader) body(rows [][]byte) []byte {
	if r == nil {
		return bytes.Join(rows, []byte("\n"))
	}
	sim := &partReader{}
	var out [][]byte
	buf := make([]byte, readBytes)
	for i := 0; i < len(rows); {
		views := sim.ReadRows(buf, rows[i:], nil)
		if len(views) == 0 {
			out = append(out, rows[i])
			i++
			continue
		}
		for _, v := range views {
			out = append(out, bytes.Clone(v))
			i++
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// rowReader returns r as a RowReader, starting over; nil for nil.
func (r *partReader) rowReader() RowReader {
	if r == nil {
		return nil
	}
	r.calls = 0
	return r
}

// decodeBlocks decodes ClickHouse's compressed blocks (blockWriter),
// checking each block's checksum and sizes.
func decodeBlocks(t testing.TB, b []byte) []byte {
	t.Helper()
	var out []byte
	for len(b) > 0 {
		if len(b) < blockHeader || b[16] != methodLZ4 {
			t.Fatalf("block of %d bytes: no LZ4 header", len(b))
		}
		size, plain := int(binary.LittleEndian.Uint32(b[17:])), int(binary.LittleEndian.Uint32(b[21:]))
		if size < 9 || 16+size > len(b) || plain > blockBytes {
			t.Fatalf("block: size %d, plain %d, %d bytes left", size, plain, len(b))
		}
		h := city.CH128(b[16 : 16+size])
		if binary.LittleEndian.Uint64(b) != h.Low || binary.LittleEndian.Uint64(b[8:]) != h.High {
			t.Fatalf("block of %d bytes: checksum does not match", size)
		}
		dst := make([]byte, plain)
		n, err := lz4.UncompressBlock(b[blockHeader:16+size], dst)
		if err != nil || n != plain {
			t.Fatalf("block: %d of %d bytes decoded: %v", n, plain, err)
		}
		out = append(out, dst...)
		b = b[16+size:]
	}
	return out
}
