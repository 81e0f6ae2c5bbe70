//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"chute/internal/testutil"
)

// TestListenMetricsURLs_etcdParity runs etcd 3.4 and the chute binary
// with --listen-metrics-urls, as a Prometheus job and a health check
// written for etcd expect them, and compares what each URL answers:
// /metrics in Prometheus' text format, /health as on the client URLs,
// and nothing of the etcd API or of chute's /status there. chute also
// serves an https:// one with the client certificate (--auto-tls here).
// chute used to accept the flag and ignore it.
func TestListenMetricsURLs_etcdParity(t *testing.T) {
	t.Parallel()
	etcdURL, chuteURL, chuteTLS := "http://"+testutil.FreeAddr(t), "http://"+testutil.FreeAddr(t), "https://"+testutil.FreeAddr(t)
	etcd := StartEtcd(t, "--listen-metrics-urls", etcdURL)
	chute := StartChute(t, "--listen-metrics-urls", chuteURL+","+chuteTLS, "--auto-tls")
	// A call of the etcd API, so that both count one.
	for _, p := range []*Proc{etcd, chute} {
		cli := newClient(t, p)
		ctx, cancel := rpcCtx()
		if _, err := cli.Put(ctx, "k", "v"); err != nil {
			t.Fatalf("put on %s: %v", p.Kind, err)
		}
		cancel()
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(url string) (int, string, string) {
		t.Helper()
		return httpGetWith(t, client, url)
	}
	// answer is what a scraper or a checker sees of path: the status,
	// and for a 200 the kind of body.
	answer := func(base, path string) string {
		code, ctype, body := get(base + path)
		if code != http.StatusOK {
			return fmt.Sprint(code)
		}
		switch path {
		case "/metrics":
			ok := strings.HasPrefix(ctype, "text/plain") && strings.Contains(body, "# TYPE ")
			return fmt.Sprintf("200 prometheus=%v", ok)
		case "/health":
			var m map[string]string
			err := json.Unmarshal([]byte(body), &m)
			return fmt.Sprintf("200 json=%v health=%s", err == nil, m["health"])
		}
		return "200"
	}
	paths := []string{"/metrics", "/health", "/v3/kv/range", "/status", "/version"}
	for _, path := range paths {
		want := answer(etcdURL, path)
		for _, base := range []string{chuteURL, chuteTLS} {
			if got := answer(base, path); got != want {
				t.Errorf("GET %s: etcd %s, chute (%s) %s", path, want, base, got)
			}
		}
	}
	// The metrics are chute's, the same as on --metrics-listen.
	_, _, body := get(chuteURL + "/metrics")
	if !strings.Contains(body, `rpc_method="Put"`) {
		t.Errorf("chute's /metrics on --listen-metrics-urls counts no Put:\n%.2000s", body)
	}
	for _, path := range []string{"/livez", "/readyz"} {
		if code, _, body := get(chuteTLS + path); code != http.StatusOK {
			t.Errorf("GET %s on chute: %d %q, want 200 (etcd 3.5's)", path, code, body)
		}
	}
}
