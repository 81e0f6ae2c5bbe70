//go:build e2e

package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"chute/internal/chtest"
	"chute/internal/otlptest"
	"chute/internal/testutil"
)

// TestClickHouse_passwordNeverLeaks runs ClickHouse with a user "writer"
// and a password, and three nodes that are not one cluster: a with the
// right password in --clickhouse-url, b with a wrong one (percent-encoded,
// "wr0ng@pass"), c with the right one and a port where nothing listens.
// a inserts rows, then fails on a missing table (code 60) and refuses a
// row (code 27, a dead letter); b fails with code 193; c cannot connect.
// No password, in any spelling, nor the Authorization value, appears in
// any node's log, /status, /metrics, /debug/pprof/cmdline (whose command
// line has the URL) or keys (dead letters included), nor
// in any span the nodes export (all three trace to one OTLP receiver).
func TestClickHouse_passwordNeverLeaks(t *testing.T) {
	t.Parallel()
	const user, password = "writer", "s3cr3t-pass"
	const wrongInURL, wrong = "wr0ng%40pass", "wr0ng@pass"
	ch := chtest.Start(t, chtest.Options{User: user, Password: password})
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	url := func(pass, addr string) string { return "http://" + user + ":" + pass + "@" + addr }
	r := otlptest.Start(t)
	env := otlpEnv(r, "grpc")

	a := StartChuteEnv(t, env, "--clickhouse-url", url(password, ch.HTTPAddr()), "--clickhouse-db", "default")
	ctlPutLoops(t, a, "ch:events", `{"id":%d,"s":"row %d"}`, 0, 10, 1)
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.events", "10")
	ctlOK(t, a, "", "put", "/q/ch:missing/p/1", `{"id":1}`)
	waitLogLine(t, a, "insert failed", "queue=ch:missing", "code=60")
	ctlOK(t, a, "", "put", "/q/ch:events/p/bad", `{"id":"bad","s":"refused"}`)
	testutil.Eventually(t, chLogTimeout, "a dead letter of ch:events on a", func() error {
		if letters, raw := ctlDeadLetters(t, a, "ch:events"); len(letters) != 1 {
			return fmt.Errorf("got %q", raw)
		}
		return nil
	})

	b := StartChuteEnv(t, env, "--clickhouse-url", url(wrongInURL, ch.HTTPAddr()), "--clickhouse-db", "default")
	ctlOK(t, b, "", "put", "/q/ch:events/p/1", `{"id":100,"s":"wrong password"}`)
	line := waitLogLine(t, b, "insert failed", "queue=ch:events", "code=193")
	if !strings.Contains(line, "Wrong password for user "+user) {
		t.Errorf("b's log line %q: want ClickHouse's message", line)
	}
	requireDepth(t, b, "ch:events", 1)

	c := StartChuteEnv(t, env, "--clickhouse-url", url(password, testutil.FreeAddr(t)), "--clickhouse-db", "default")
	ctlOK(t, c, "", "put", "/q/ch:events/p/1", `{"id":200,"s":"nobody listens"}`)
	waitLogLine(t, c, "insert failed", "queue=ch:events")
	requireDepth(t, c, "ch:events", 1)

	secrets := []string{
		password, wrong, wrongInURL,
		base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
		base64.StdEncoding.EncodeToString([]byte(user + ":" + wrong)),
		base64.StdEncoding.EncodeToString([]byte(user + ":" + wrongInURL)),
	}
	for _, p := range []*Proc{a, b, c} {
		places := map[string]string{"log": logText(t, p)}
		for _, path := range []string{"/status", "/metrics"} {
			places[path] = httpGet(t, "http://"+p.MetricsAddr+path)
		}
		kvs, err := dump(clusterClient(t, p.ClientAddr))
		if err != nil {
			t.Fatalf("%s: get all keys: %v", p.Name, err)
		}
		var all strings.Builder
		for k, v := range kvs {
			fmt.Fprintf(&all, "%s\n%s\n", k, v)
		}
		places["keys and values"] = all.String()
		_, places["/debug/pprof/cmdline"] = httpAnswer(t, "http://"+p.MetricsAddr+"/debug/pprof/cmdline")
		places["etcdctl get --prefix /q/"] = ctlOK(t, p, "", "get", "--prefix", "/q/")
		for where, text := range places {
			for _, s := range secrets {
				if i := strings.Index(text, s); i >= 0 {
					t.Errorf("%s: %s holds the secret %q: ...%s...", p.Name, where, s, text[max(0, i-200):min(len(text), i+len(s)+50)])
				}
			}
		}
	}
	// Spans of every kind of failure reach the receiver: a's dead letter
	// at once, and the batches b and c retry when they stop (a batch's
	// span covers all its attempts, and ends when its node hands it on).
	for _, p := range []*Proc{b, c} {
		if err := p.Stop(); err != nil {
			t.Errorf("%s: stop: %v", p.Name, err)
		}
	}
	r.WaitFor(t, traceTimeout, "INSERT spans of a's dead letter and of b's and c's failed attempts", func(spans []otlptest.Span) bool {
		seen := map[string]bool{}
		for _, s := range spans {
			if s.Name != "INSERT events" {
				continue
			}
			if s.Attr("error.type") == "dead_letters" {
				seen["a"] = true
			}
			for _, e := range s.Events {
				switch {
				case e.Name == "clickhouse.retry" && e.Attrs["error.type"] == "193":
					seen["b"] = true
				case e.Name == "clickhouse.retry" && e.Attrs["error.type"] == "transport":
					seen["c"] = true
				}
			}
		}
		return len(seen) == 3
	})
	for _, s := range secrets {
		if r.Contains(s) {
			t.Errorf("an exported span holds the secret %q", s)
		}
	}
}

// httpGet returns the body of a 200 answer to GET url.
func httpGet(t testing.TB, url string) string {
	t.Helper()
	code, body := httpAnswer(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %.200s", url, code, body)
	}
	return body
}

// httpAnswer returns the status and body of GET url.
func httpAnswer(t testing.TB, url string) (int, string) {
	t.Helper()
	code, _, body := httpGetWith(t, &http.Client{Timeout: statusTimeout}, url)
	return code, body
}

// httpGetWith returns the status, Content-Type and body of GET url made
// with c.
func httpGetWith(t testing.TB, c *http.Client, url string) (code int, contentType, body string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}
