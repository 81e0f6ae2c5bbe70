//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// curlPost runs curl -X POST of body to url with extra arguments first,
// and returns its exit code, the HTTP status (000 when none came) and the
// answer's body.
func curlPost(t *testing.T, url, body string, extra ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := append(append([]string{"-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}"}, extra...), "-X", "POST", url, "-d", body)
	out, err := exec.CommandContext(ctx, lookTool(t, "curl"), args...).Output()
	return splitCurl(t, url, out, err)
}

// splitCurl returns curl's exit code, and the HTTP status and the body of
// its output (-o - -w "\n%{http_code}").
func splitCurl(t *testing.T, url string, out []byte, err error) (int, string, string) {
	t.Helper()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return code, s, ""
	}
	return code, s[i+1:], s[:i]
}

// putJSON is the body of etcd's /v3/kv/put for key and value.
func putJSON(key, value string) string {
	b, _ := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString([]byte(value)),
	})
	return string(b)
}

// TestGateway_curlPutBecomesRow drives the binary as a producer without
// gRPC does: curl posts JSON to etcd's gateway on the client port. A put
// to a ClickHouse queue lands as a row; a value that is not one JSON
// object is refused with HTTP 400 and chute's message, and one with an
// Origin header (a web page's) with 403, neither inserted; a key etcdctl
// put is read back through the gateway. On a node
// started with --enable-grpc-gateway=false curl gets no HTTP answer and
// etcdctl still works.
func TestGateway_curlPutBecomesRow(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.gw (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	url := "http://" + p.ClientAddr + "/v3/kv/"

	if code, status, body := curlPost(t, url+"put", putJSON("/q/ch:gw/p/1", `{"id":1,"s":"from curl"}`)); code != 0 || status != "200" {
		t.Fatalf("curl put to a ClickHouse queue: exit %d, HTTP %s: %s", code, status, body)
	}
	code, status, body := curlPost(t, url+"put", putJSON("/q/ch:gw/p/2", `not json`))
	if code != 0 || status != "400" || !strings.Contains(body, "one JSON object") {
		t.Fatalf("curl put of text that is not JSON: exit %d, HTTP %s: %s; want 400 and chute's message", code, status, body)
	}
	// As a web page's fetch() would send it: refused.
	if code, status, body := curlPost(t, url+"put", putJSON("/q/ch:gw/p/3", `{"id":3,"s":"from a page"}`), "-H", "Origin: http://page.example"); code != 0 || status != "403" {
		t.Fatalf("curl put with an Origin header: exit %d, HTTP %s: %s; want 403", code, status, body)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT id, s FROM default.gw", "1\tfrom curl")

	ctlOK(t, p, "", "put", "/cfg/a", "from etcdctl")
	code, status, body = curlPost(t, url+"range", `{"key":"`+base64.StdEncoding.EncodeToString([]byte("/cfg/a"))+`"}`)
	if code != 0 || status != "200" || !strings.Contains(body, base64.StdEncoding.EncodeToString([]byte("from etcdctl"))) {
		t.Fatalf("curl range of a key etcdctl put: exit %d, HTTP %s: %s", code, status, body)
	}
	if got := ch.Query(t, "SELECT count() FROM default.gw"); got != "1" {
		t.Errorf("rows after the refused put: %s, want 1", got)
	}

	off := StartChute(t, "--enable-grpc-gateway=false")
	if code, status, body := curlPost(t, "http://"+off.ClientAddr+"/v3/kv/put", putJSON("k", "v")); code == 0 || status != "000" {
		t.Errorf("curl with the gateway off: exit %d, HTTP %s: %s; want no HTTP answer", code, status, body)
	}
	ctlOK(t, off, "", "put", "k", "v")
}

// TestGateway_tlsClientCert: on an https:// URL with --client-cert-auth,
// curl with a certificate of the trusted CA puts through the gateway (over
// HTTP/1.1, which the node prefers to curl's HTTP/2) and etcdctl reads it
// over gRPC on the same port; curl without a certificate is refused in
// the handshake.
func TestGateway_tlsClientCert(t *testing.T) {
	t.Parallel()
	etcdctl := lookTool(t, "etcdctl")
	srv := newCertSet(t, "gateway CA", "server")
	cert, key := srv.issue(t, "app")
	addr := testutil.FreeAddr(t)
	StartChute(t, "--listen-client-urls", "https://"+addr,
		"--cert-file", srv.cert, "--key-file", srv.key,
		"--client-cert-auth", "--trusted-ca-file", srv.caFile)
	url := "https://" + addr + "/v3/kv/put"

	code, status, body := curlPost(t, url, putJSON("/tls/a", "1"), "--cacert", srv.caFile, "--cert", cert, "--key", key)
	if code != 0 || status != "200" {
		t.Fatalf("curl with a trusted certificate: exit %d, HTTP %s: %s", code, status, body)
	}
	res, err := runEtcdctl(etcdctl, "https://"+addr, "", "--cacert", srv.caFile, "--cert", cert, "--key", key, "get", "/tls/a", "--print-value-only")
	if err != nil || res.Code != 0 || strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("etcdctl get over gRPC on the same port: %v, exit %d: %s %s", err, res.Code, res.Stdout, res.Stderr)
	}
	if code, status, body := curlPost(t, url, putJSON("/tls/b", "2"), "--cacert", srv.caFile); code == 0 || status != "000" {
		t.Errorf("curl without a certificate: exit %d, HTTP %s: %s; want refused in the handshake", code, status, body)
	}
}

// TestGateway_etcdParity sends the same JSON requests with curl to etcd
// 3.4 and to chute, each fresh, and wants the same HTTP status and the
// same JSON answer (the header's cluster, member and term aside): puts
// with prev_kv, ranges by key and prefix, a txn, a delete, a lease with
// a key, etcd 3.3's /v3beta/ path, etcd's errors, a lock and an
// election; then GET /health and /version.
func TestGateway_etcdParity(t *testing.T) {
	t.Parallel()
	etcd := StartEtcd(t)
	chute := StartChute(t)
	b := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	steps := []struct{ path, body string }{
		{"/v3/kv/put", `{"key":"` + b("/p/a") + `","value":"` + b("1") + `"}`},
		{"/v3/kv/put", `{"key":"` + b("/p/a") + `","value":"` + b("2") + `","prev_kv":true}`},
		{"/v3/kv/put", `{"key":"` + b("/p/b") + `","value":"` + b("3") + `"}`},
		{"/v3/kv/range", `{"key":"` + b("/p/a") + `"}`},
		{"/v3/kv/range", `{"key":"` + b("/p/") + `","range_end":"` + b("/p0") + `","keys_only":true}`},
		{"/v3/kv/range", `{"key":"` + b("/p/") + `","range_end":"` + b("/p0") + `","count_only":true}`},
		{"/v3beta/kv/range", `{"key":"` + b("/p/b") + `"}`},
		{"/v3/kv/txn", `{"compare":[{"key":"` + b("/p/a") + `","result":"EQUAL","target":"VALUE","value":"` + b("2") + `"}],` +
			`"success":[{"request_put":{"key":"` + b("/p/c") + `","value":"` + b("4") + `"}}],` +
			`"failure":[{"request_range":{"key":"` + b("/p/a") + `"}}]}`},
		{"/v3/kv/deleterange", `{"key":"` + b("/p/b") + `","prev_kv":true}`},
		{"/v3/lease/grant", `{"TTL":60,"ID":7}`},
		{"/v3/kv/put", `{"key":"` + b("/p/l") + `","value":"` + b("5") + `","lease":7}`},
		{"/v3/lease/timetolive", `{"ID":7,"keys":true}`},
		{"/v3/lease/revoke", `{"ID":7}`},
		{"/v3/kv/range", `{"key":"` + b("/p/l") + `"}`},
		{"/v3/kv/put", `{"value":"` + b("v") + `"}`},
		{"/v3/kv/put", `{"key":`},
		{"/v3/kv/put", `{"key":"` + b("k") + `","lease":99}`},
		{"/v3/kv/range", `{"key":"` + b("/p/a") + `","revision":99}`},
		{"/v3/kv/nothing", `{}`},
		// etcd's Lock and Election services through the gateway.
		{"/v3/lease/grant", `{"TTL":60,"ID":8}`},
		{"/v3/lock/lock", `{"name":"` + b("lk") + `","lease":8}`},
		{"/v3/lock/unlock", `{"key":"` + b("lk/8") + `"}`},
		{"/v3/election/campaign", `{"name":"` + b("el") + `","lease":8,"value":"` + b("v1") + `"}`},
		{"/v3/election/leader", `{"name":"` + b("el") + `"}`},
		{"/v3/election/proclaim", `{"leader":{"name":"` + b("el") + `","key":"` + b("el/8") + `","rev":11,"lease":8},"value":"` + b("v2") + `"}`},
		{"/v3/election/leader", `{"name":"` + b("el") + `"}`},
		{"/v3/election/resign", `{"leader":{"name":"` + b("el") + `","key":"` + b("el/8") + `","rev":11,"lease":8}}`},
		{"/v3/election/leader", `{"name":"` + b("el") + `"}`},
	}
	for i, s := range steps {
		var got [2]string
		for j, p := range []*Proc{etcd, chute} {
			code, status, body := curlPost(t, "http://"+p.ClientAddr+s.path, s.body)
			if code != 0 {
				t.Fatalf("step %d, %s %s on %s: curl exit %d", i, s.path, s.body, p.Kind, code)
			}
			if s.path == "/v3/lease/timetolive" {
				body = remainingTTL(t, p.Kind, body)
			}
			got[j] = status + " " + normalGatewayJSON(body)
		}
		if got[0] != got[1] {
			t.Errorf("step %d, %s %s:\n etcd:  %s\n chute: %s", i, s.path, s.body, got[0], got[1])
		} else {
			t.Logf("step %d, %s: %s", i, s.path, got[0])
		}
	}
	// GET /health and /version: the same status, health and fields (the
	// versions are each server's own; chute's health adds etcd 3.5's
	// reason).
	for _, path := range []string{"/health", "/version"} {
		var got [2]string
		for j, p := range []*Proc{etcd, chute} {
			code, status, body := curlGet(t, "http://"+p.ClientAddr+path)
			var m map[string]string
			if code != 0 || json.Unmarshal([]byte(body), &m) != nil {
				t.Fatalf("GET %s on %s: curl exit %d, HTTP %s: %s", path, p.Kind, code, status, body)
			}
			keys := slices.Sorted(maps.Keys(m))
			keys = slices.DeleteFunc(keys, func(k string) bool { return k == "reason" && m[k] == "" })
			got[j] = status + " " + strings.Join(keys, ",") + " health=" + m["health"]
		}
		if got[0] != got[1] {
			t.Errorf("GET %s:\n etcd:  %s\n chute: %s", path, got[0], got[1])
		}
	}
}

// curlGet is curlPost's GET.
func curlGet(t *testing.T, url string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, lookTool(t, "curl"), "-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_code}", url).Output()
	return splitCurl(t, url, out, err)
}

// remainingTTL checks the TTL left of a TimeToLive answer, whole seconds
// of a lease granted a moment before: within 5 s of its granted TTL, on
// a loaded machine one second more or less on either server. It returns
// body with the TTL replaced by "granted-5s..granted" for the comparison.
func remainingTTL(t *testing.T, server, body string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return body
	}
	ttl, err1 := strconv.ParseInt(fmt.Sprint(m["TTL"]), 10, 64)
	granted, err2 := strconv.ParseInt(fmt.Sprint(m["grantedTTL"]), 10, 64)
	if err1 != nil || err2 != nil || ttl > granted || ttl < granted-5 {
		t.Errorf("%s: TimeToLive answered %s, want a TTL within 5 s of the granted TTL", server, body)
		return body
	}
	m["TTL"] = "granted-5s..granted"
	out, _ := json.Marshal(m)
	return string(out)
}

// normalGatewayJSON returns body with its whitespace and the order of its
// fields made canonical, and the header's fields that differ between two
// servers by nature (cluster and member ids, raft term) left out. A body
// that is not JSON is returned as it is.
func normalGatewayJSON(body string) string {
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return strings.TrimSpace(body)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if h, ok := x["header"].(map[string]any); ok {
				delete(h, "cluster_id")
				delete(h, "member_id")
				delete(h, "raft_term")
			}
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v) // maps marshal in key order
	return string(out)
}
