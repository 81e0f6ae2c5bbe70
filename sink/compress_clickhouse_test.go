//go:build e2e

package sink

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"chute/internal/chtest"
)

// recordingProxy is a reverse proxy on 127.0.0.1 in front of a real
// ClickHouse that notes each request's Content-Encoding and the bytes of
// its body as they crossed the wire, then passes the request on
// unchanged. 18.16 keeps no query log in chtest's configuration, and
// nothing in its answer says how the body came, so the proxy is how a
// test sees the request ClickHouse decoded.
type recordingProxy struct {
	srv *httptest.Server

	mu   sync.Mutex // guards seen
	seen []proxied
}

type proxied struct {
	encoding string
	bytes    int64
}

func newRecordingProxy(t *testing.T, ch *chtest.Server) *recordingProxy {
	t.Helper()
	target, err := url.Parse(ch.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.seen = append(p.seen, proxied{encoding: r.Header.Get("Content-Encoding"), bytes: int64(len(body))})
		p.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *recordingProxy) last(t *testing.T) proxied {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) == 0 {
		t.Fatal("no request went through the proxy")
	}
	return p.seen[len(p.seen)-1]
}

// TestClickHouse_compression sends the same 6,000 rows (1.2 MB, two of
// lz4's blocks) with each compression through the recording proxy: gzip,
// deflate and lz4 land whole (count and contents), with their
// Content-Encoding (none for lz4, which says decompress=1) and fewer
// bytes on the wire than the rows; auto, the proxy being on loopback,
// sends them as none does; 18.16 refuses zstd with code 89, a config
// error that names the flag, and stores nothing.
func TestClickHouse_compression(t *testing.T) {
	srv := chtest.Start(t)
	proxy := newRecordingProxy(t, srv)
	c := NewClient(ClientConfig{Timeout: 20 * time.Second})
	ctx := context.Background()
	rows := benchRows(6000)
	plain := 0
	for _, r := range rows {
		plain += len(r) + 1
	}
	if plain <= blockBytes {
		t.Fatalf("%d bytes of rows, want more than one lz4 block (%d)", plain, blockBytes)
	}
	for _, asked := range []Compression{CompressionGzip, CompressionDeflate, CompressionNone, CompressionZstd, CompressionLZ4, CompressionAuto} {
		table := "comp_" + asked.String()
		srv.Exec(t, "CREATE TABLE default."+table+" (id UInt64, ts String, user_id UInt32, method String, path String, status UInt16, duration_ms Float64, agent String, trace String) ENGINE = MergeTree ORDER BY id")
		ep, err := ParseURL(proxy.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		ep.Compression = asked
		comp := asked.On(ep.Addr) // auto: none, the proxy being on loopback
		if asked == CompressionAuto && comp != CompressionNone {
			t.Fatalf("auto on %s: %v, want none", ep.Addr, comp)
		}
		res := c.Insert(ctx, ep, Target("", table), rows, "")
		seen := proxy.last(t)
		if seen.bytes != int64(res.WireBytes) {
			t.Errorf("%v: proxy saw %d body bytes, WireBytes %d", comp, seen.bytes, res.WireBytes)
		}
		if comp == CompressionZstd {
			if res.Class != ClassConfig || res.Code != 89 || !strings.Contains(res.Message, "--clickhouse-compression") {
				t.Errorf("zstd on 18.16: got %+v, want config 89 naming --clickhouse-compression", res)
			}
			if n := srv.Count(t, "default."+table); n != 0 {
				t.Errorf("zstd: %d rows stored, want none", n)
			}
			continue
		}
		if !res.OK() {
			t.Fatalf("%v: got %+v, want OK", comp, res)
		}
		if seen.encoding != comp.contentEncoding() {
			t.Errorf("%v: Content-Encoding %q on the wire, want %q", comp, seen.encoding, comp.contentEncoding())
		}
		if comp != CompressionNone && comp != CompressionLZ4 && seen.bytes*3 > int64(plain) {
			t.Errorf("%v: %d bytes on the wire for %d of rows, want under a third", comp, seen.bytes, plain)
		}
		if comp == CompressionLZ4 && seen.bytes*2 > int64(plain) {
			t.Errorf("%v: %d bytes on the wire for %d of rows, want under half", comp, seen.bytes, plain)
		}
		got := srv.Query(t, "SELECT count(), min(id), max(id), sum(user_id), countIf(path = '/login') FROM default."+table)
		var sum, logins uint64
		for i := range rows {
			if strings.Contains(string(rows[i]), `"path":"/login"`) {
				logins++
			}
			var uid uint64
			j := strings.Index(string(rows[i]), `"user_id":`)
			fmt.Sscanf(string(rows[i][j:]), `"user_id":%d`, &uid)
			sum += uid
		}
		if want := fmt.Sprintf("6000\t1000000\t1005999\t%d\t%d", sum, logins); got != want {
			t.Errorf("%v: table holds %q, want %q", comp, got, want)
		}
	}
}

// TestClickHouse_insertSettings checks settings as URL parameters on
// 18.16: input_format_skip_unknown_fields=1 takes a row with a field the
// table lacks, which is refused (117) without it; a setting the server
// does not know is refused with 115, a config error.
func TestClickHouse_insertSettings(t *testing.T) {
	srv := chtest.Start(t)
	srv.Exec(t, "CREATE TABLE default.st (id UInt64, msg String) ENGINE = MergeTree ORDER BY id")
	c := NewClient(ClientConfig{Timeout: 20 * time.Second})
	ctx := context.Background()
	ep, err := ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	row := [][]byte{[]byte(`{"id":7,"msg":"x","extra":1}`)}
	if res := c.Insert(ctx, ep, Target("", "st"), row, ""); res.Class != ClassData || res.Code != 117 {
		t.Fatalf("unknown field, no setting: got %+v, want data 117", res)
	}
	ep.Settings, _ = ParseSettingsText("input_format_skip_unknown_fields=1,date_time_input_format=best_effort")
	if res := c.Insert(ctx, ep, Target("", "st"), row, ""); !res.OK() {
		t.Fatalf("with input_format_skip_unknown_fields=1: got %+v, want OK", res)
	}
	if got := srv.Query(t, "SELECT id, msg FROM default.st"); got != "7\tx" {
		t.Fatalf("table: got %q, want 7 x", got)
	}
	ep.Settings, _ = ParseSettingsText("no_such_setting=1")
	if res := c.Insert(ctx, ep, Target("", "st"), row, ""); res.Class != ClassConfig || res.Code != 115 {
		t.Fatalf("unknown setting: got %+v, want config 115", res)
	}
}
