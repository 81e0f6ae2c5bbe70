package bench

import (
	"strings"
	"testing"
	"time"
)

func TestCheckCompressionCells(t *testing.T) {
	tests := []struct {
		codecs []string
		ok     bool
	}{
		{nil, true},
		{[]string{"none", "gzip"}, true},
		{[]string{"gzip", "deflate", "zstd", "none"}, true},
		{[]string{"brotli"}, false},
		{[]string{"GZIP"}, false},
		{[]string{"none", "gzip", "none"}, false},
	}
	for _, tt := range tests {
		err := checkCompressionCells(tt.codecs)
		if (err == nil) != tt.ok {
			t.Errorf("checkCompressionCells(%q): got %v, want ok %v", tt.codecs, err, tt.ok)
		}
	}
}

func TestClickHouseUpstream(t *testing.T) {
	tests := []struct {
		url, upstream, node string
	}{
		{"http://127.0.0.1:18124", "127.0.0.1:18124", "http://127.0.0.1:9"},
		{"http://ch", "ch:8123", "http://127.0.0.1:9"},
		{"https://ch", "ch:8443", "https://127.0.0.1:9"},
		{"ch:9000", "ch:9000", "http://127.0.0.1:9"},
		{"http://u:p%40ss@[::1]:8123/ignored?x=1", "[::1]:8123", "http://u:p%40ss@127.0.0.1:9"},
	}
	for _, tt := range tests {
		up, u, err := clickHouseUpstream(tt.url)
		if err != nil {
			t.Errorf("clickHouseUpstream(%q): %v", tt.url, err)
			continue
		}
		if up != tt.upstream {
			t.Errorf("clickHouseUpstream(%q): got upstream %q, want %q", tt.url, up, tt.upstream)
		}
		if got := throughProxy(u, "127.0.0.1:9"); got != tt.node {
			t.Errorf("throughProxy(%q): got %q, want %q", tt.url, got, tt.node)
		}
	}
	for _, bad := range []string{"ftp://ch", "http://", "http://a b"} {
		if _, _, err := clickHouseUpstream(bad); err == nil {
			t.Errorf("clickHouseUpstream(%q): got nil error", bad)
		}
	}
}

func TestCompressionTarget(t *testing.T) {
	mc := matrixConfig{chute: "/bin/chute", nodeArgs: []string{"--x"}, clickhouseURL: "http://ch:8123"}
	got := compressionTarget(mc, "gzip", []int{1, 2, 3, 4}, "/d", []string{"HOME=/h", "OTEL_X=y"}, "http://127.0.0.1:9")
	want := "--name bench-gzip --listen-client-urls http://127.0.0.1:1 --listen-peer-urls http://127.0.0.1:2" +
		" --gossip-listen 127.0.0.1:3 --metrics-listen 127.0.0.1:4 --log-level warn --data-dir /d/bench-gzip.chute" +
		" --x --clickhouse-url http://127.0.0.1:9 --clickhouse-compression gzip"
	if a := strings.Join(got.argv, " "); a != want {
		t.Errorf("argv:\ngot  %q\nwant %q", a, want)
	}
	if got.name != "chute, --clickhouse-compression=gzip" || got.exe != "/bin/chute" || got.endpoint != "http://127.0.0.1:1" || got.metrics != "127.0.0.1:4" {
		t.Errorf("target: got %s (%s) at %s, metrics %s", got.name, got.exe, got.endpoint, got.metrics)
	}
	if e := strings.Join(got.env, " "); e != "HOME=/h" {
		t.Errorf("env: got %q, want HOME=/h", e)
	}
}

func TestNewWireCount(t *testing.T) {
	w := newWireCount("gzip", wireCounts{sent: 50_000, received: 3000, conns: 20}, 1000,
		[]NodeCPU{{Node: "n", Seconds: 0.25, MicrosPerPut: 999}}, 40*time.Millisecond)
	want := WireCount{Compression: "gzip", Rows: 1000, BytesSent: 50_000, BytesReceived: 3000, Conns: 20,
		BytesPerRow: 50, NodeMicrosPerRow: 250, ClickHouseMicrosPerRow: 40}
	if *w != want {
		t.Errorf("newWireCount: got %+v, want %+v", *w, want)
	}
	none := newWireCount("none", wireCounts{sent: 10}, 0, nil, 0)
	if none.BytesPerRow != 0 || none.NodeMicrosPerRow != 0 || none.BytesSent != 10 {
		t.Errorf("newWireCount without rows: got %+v, want the counts and no per-row figures", *none)
	}
}
