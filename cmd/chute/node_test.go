package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"chute/internal/testcerts"

	"chute/internal/testutil"
	"chute/sink"
)

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestRunNode_operatorEndpoints starts a node in-process and checks
// /healthz, /readyz and that /metrics counts each RPC with its latency.
func TestRunNode_operatorEndpoints(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name = "ops"
	client, metrics := testutil.FreeAddr(t), testutil.FreeAddr(t)
	cfg.ListenClientURLs = []string{"http://" + client}
	cfg.ListenPeerURLs = []string{"http://" + testutil.FreeAddr(t)}
	cfg.GossipListen = testutil.FreeAddr(t)
	cfg.GossipProfile = "fast"
	cfg.MetricsListen = metrics
	cfg.DataDir = t.TempDir()
	cfg.fillAdvertise()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runNode(ctx, cfg, slog.New(slog.DiscardHandler), nil) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("runNode: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("runNode did not return after cancel")
		}
	}()

	base := "http://" + metrics
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, err := httpGet(base + "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 10s: code %d err %v", code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body, err := httpGet(base + "/healthz"); err != nil || code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: got %d %q %v", code, body, err)
	}
	// Profiles for go tool pprof: a gzipped protobuf (magic 1f 8b), and 404
	// for a profile that does not exist.
	if code, body, err := httpGet(base + "/debug/pprof/goroutine"); err != nil || code != http.StatusOK || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Fatalf("/debug/pprof/goroutine: got %d, %d bytes, %v; want a gzipped profile", code, len(body), err)
	}
	if code, _, err := httpGet(base + "/debug/pprof/nothing"); err != nil || code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/nothing: got %d %v, want 404", code, err)
	}
	// The index lists the profiles; debug=1 answers text; a short
	// execution trace is served too, the command line not.
	if code, body, err := httpGet(base + "/debug/pprof/"); err != nil || code != http.StatusOK || !strings.Contains(body, "goroutine") || !strings.Contains(body, "heap") {
		t.Fatalf("/debug/pprof/: got %d %q %v, want the profile index", code, body, err)
	}
	if code, body, err := httpGet(base + "/debug/pprof/goroutine?debug=1"); err != nil || code != http.StatusOK || !strings.HasPrefix(body, "goroutine profile:") {
		t.Fatalf("/debug/pprof/goroutine?debug=1: got %d %.60q %v, want text", code, body, err)
	}
	if code, body, err := httpGet(base + "/debug/pprof/cmdline"); err != nil || code != http.StatusNotFound || !strings.Contains(body, "secrets") {
		t.Fatalf("/debug/pprof/cmdline: got %d %q %v; want 404 saying why (it holds secrets)", code, body, err)
	}
	if code, body, err := httpGet(base + "/debug/pprof/trace?seconds=0.05"); err != nil || code != http.StatusOK || !strings.HasPrefix(body, "go 1.") {
		t.Fatalf("/debug/pprof/trace: got %d, %.20q, %v; want an execution trace", code, body, err)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	for i := range 3 {
		if _, err := cli.Put(rctx, fmt.Sprint("k", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(rctx, "", "v"); err == nil {
		t.Fatal("put of an empty key succeeded")
	}

	_, body, err := httpGet(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	count := func(method, code string) int {
		re := regexp.MustCompile(`rpc_server_call_duration_seconds_count\{[^}]*rpc_grpc_status_code="` + code + `"[^}]*rpc_method="` + method + `"[^}]*\} (\d+)`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if got := count("Put", "OK"); got != 3 {
		t.Errorf("Put OK count: got %d, want 3\n%s", got, body)
	}
	if got := count("Put", "InvalidArgument"); got != 1 {
		t.Errorf("Put InvalidArgument count: got %d, want 1", got)
	}
	if !regexp.MustCompile(`rpc_server_call_duration_seconds_bucket\{[^}]*rpc_method="Put"`).MatchString(body) {
		t.Error("no latency histogram buckets for Put")
	}

	// chute status prints this member and the queue.
	var out, errOut strings.Builder
	if code := run([]string{"status", "--endpoints", metrics}, func(string) string { return "" }, &out, &errOut); code != exitOK {
		t.Fatalf("chute status: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "ops") || !strings.Contains(out.String(), "alive") {
		t.Fatalf("chute status output lacks the member:\n%s", out.String())
	}

	// Queue metrics: three messages put, none consumed.
	for i := range 3 {
		if _, err := cli.Put(rctx, fmt.Sprint("/q/jobs/p/m", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	_, body, err = httpGet(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"status", "--endpoints", metrics}, func(string) string { return "" }, &out, &errOut); code != exitOK {
		t.Fatalf("chute status: exit %d: %s", code, errOut.String())
	}
	if !regexp.MustCompile(`(?m)^jobs\s+\S+\s+1\s+3\s`).MatchString(out.String()) {
		t.Errorf("chute status: no row for queue jobs with epoch 1 and 3 rows:\n%s", out.String())
	}
	for _, want := range []string{
		`chute_queue_enqueued_total{queue="jobs"} 3`,
		`chute_queue_depth_rows{queue="jobs"} 3`,
		`chute_queue_depth_bytes{queue="jobs"} 9`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "chute_") {
				t.Log(line)
			}
		}
	}
}

func TestClickhouseSettings_update(t *testing.T) {
	c := &clickhouseSettings{url: "http://a:8123", db: "default"}
	c.update(Config{ClickHouseDB: "analytics"}, slog.New(slog.DiscardHandler))
	if u, db := c.get(); u != "http://a:8123" || db != "analytics" {
		t.Fatalf("empty url: got %q %q, want the old url and the new db", u, db)
	}
	c.update(Config{ClickHouseURL: "http://b:8123", ClickHouseDB: "analytics"}, slog.New(slog.DiscardHandler))
	if u, _ := c.get(); u != "http://b:8123" {
		t.Fatalf("new url: got %q", u)
	}
}

// A reload replaces the URL list, the insert settings and the
// compression the queues read at their next batch; settings that do not
// parse leave everything as it was.
func TestClickhouseSettings_update_listSettingsCompression(t *testing.T) {
	c, err := newClickHouseSettings(Config{ClickHouseURL: "http://a:1", ClickHouseDB: "default", ClickHouseCompression: "gzip",
		ClickHouseSettings: "max_threads=2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.update(Config{ClickHouseURL: "http://a:1,http://b:2", ClickHouseDB: "default", ClickHouseCompression: "deflate",
		ClickHouseSettings: "input_format_skip_unknown_fields=1"}, slog.New(slog.DiscardHandler))
	set, comp := c.options()
	if u, _ := c.get(); u != "http://a:1,http://b:2" || set.String() != "input_format_skip_unknown_fields=1" || comp != sink.CompressionDeflate {
		t.Fatalf("after reload: got %q, %q, %v, want the list, the new settings and deflate", u, set.String(), comp)
	}
	var log testutil.Buffer
	c.update(Config{ClickHouseURL: "http://c:3", ClickHouseDB: "default", ClickHouseSettings: "user=x"}, slog.New(slog.NewTextHandler(&log, nil)))
	set, comp = c.options()
	if u, _ := c.get(); u != "http://a:1,http://b:2" || set.String() != "input_format_skip_unknown_fields=1" || comp != sink.CompressionDeflate {
		t.Fatalf("after a bad reload: got %q, %q, %v, want everything as it was", u, set.String(), comp)
	}
	if !strings.Contains(log.String(), "--clickhouse-settings") {
		t.Errorf("log %q: want the refused flag named", log.String())
	}
}

// A reload replaces the allowed tables and the database puts are checked
// against, from the next put, and keeps the same list (which dispatch
// remembers its answers by) when neither changed.
func TestClickhouseSettings_update_allowTables(t *testing.T) {
	cfg := Config{ClickHouseURL: "http://ch:8123", ClickHouseDB: "default"}
	c, err := newClickHouseSettings(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	allow, db := c.tables()
	if db != "default" || !allow.Allows("default", "events") || allow.Allows("system", "query_log") {
		t.Fatalf("defaults: got %q, %s; want default, *.* without system", db, allow)
	}
	c.update(cfg, slog.New(slog.DiscardHandler))
	if again, _ := c.tables(); again != allow {
		t.Error("a reload that changed nothing replaced the list")
	}
	cfg.ClickHouseAllowTables = []string{"*.*", "system.query_log"}
	cfg.ClickHouseDB = "analytics"
	c.update(cfg, slog.New(slog.DiscardHandler))
	allow, db = c.tables()
	if db != "analytics" || !allow.Allows("system", "query_log") || allow.Allows("system", "tables") {
		t.Fatalf("after the reload: got %q, %s; want analytics, system.query_log allowed", db, allow)
	}
	var log testutil.Buffer
	bad := cfg
	bad.ClickHouseAllowTables = []string{"events"}
	c.update(bad, slog.New(slog.NewTextHandler(&log, nil)))
	if got, _ := c.tables(); got != allow || !strings.Contains(log.String(), "configuration not reloaded") {
		t.Errorf("bad pattern: got list %s, log %q; want the old list, the reload refused", got, log.String())
	}
}

// A reload reads the TLS files again, so a renewed CA applies from the
// next batch; files that cannot be used leave every setting as it was.
func TestClickhouseSettings_update_tlsFiles(t *testing.T) {
	dir := t.TempDir()
	first := testcerts.NewCA(t, "first")
	caFile := first.WriteCA(t, dir, "ca")
	next := Config{ClickHouseURL: "https://ch:8443", ClickHouseDB: "default", ClickHouseCAFile: caFile}
	c := &clickhouseSettings{url: "http://ch:8123", db: "default"}
	c.update(next, slog.New(slog.DiscardHandler))
	cfg := c.tlsConfig()
	if u, _ := c.get(); u != next.ClickHouseURL || cfg == nil || !cfg.RootCAs.Equal(pool(first)) {
		t.Fatalf("https with a CA file: got %q and %+v, want the new URL and the first CA", u, cfg)
	}

	second := testcerts.NewCA(t, "second")
	second.WriteCA(t, dir, "ca") // renewed in place
	c.update(next, slog.New(slog.DiscardHandler))
	if cfg := c.tlsConfig(); cfg == nil || !cfg.RootCAs.Equal(pool(second)) {
		t.Fatalf("after the CA file changed: got %+v, want the second CA", cfg)
	}

	if err := os.WriteFile(caFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	var log testutil.Buffer
	c.update(Config{ClickHouseURL: "https://other:8443", ClickHouseDB: "analytics", ClickHouseCAFile: caFile}, slog.New(slog.NewTextHandler(&log, nil)))
	if u, db := c.get(); u != next.ClickHouseURL || db != "default" || !c.tlsConfig().RootCAs.Equal(pool(second)) {
		t.Fatalf("after a bad CA file: got %q %q, want every setting as it was", u, db)
	}
	if !strings.Contains(log.String(), "configuration not reloaded") || !strings.Contains(log.String(), "--clickhouse-ca-file") {
		t.Errorf("log %q: want the reload refused, naming the flag", log.String())
	}

	// Back to plain http: no TLS configuration any more.
	c.update(Config{ClickHouseURL: "http://ch:8123", ClickHouseDB: "default"}, slog.New(slog.DiscardHandler))
	if c.tlsConfig() != nil {
		t.Fatal("plain http after https: the TLS configuration stayed")
	}
}

func pool(cas ...*testcerts.CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}
