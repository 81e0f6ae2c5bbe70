//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// TestClickHouse_rowDataNeverLogged runs a node at debug level that puts
// two rows ClickHouse refuses and quotes back in its errors (a string
// in a UInt64 column, code 27; an unknown field, code 117), each holding
// a marker. The marker appears in no log line, in /status (whose
// last_insert_error is the last refusal) nor in /metrics; the dead
// letters keep the rows, and the first one ClickHouse's full text.
func TestClickHouse_rowDataNeverLogged(t *testing.T) {
	t.Parallel()
	const marker = "MARKER_5f3a"
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, append(chFlags(ch), "--log-level", "debug")...)
	ctlOK(t, p, "", "put", "/q/ch:events/p/1", `{"id":1,"s":"fine"}`)
	ctlOK(t, p, "", "put", "/q/ch:events/p/bad27", `{"id":"`+marker+`","s":"`+marker+`"}`)
	ctlOK(t, p, "", "put", "/q/ch:events/p/bad117", `{"id":2,"`+marker+`":1}`)
	var letters map[string]deadLetter
	testutil.Eventually(t, chLogTimeout, "two dead letters of ch:events", func() error {
		var raw string
		if letters, raw = ctlDeadLetters(t, p, "ch:events"); len(letters) != 2 {
			return fmt.Errorf("got %q", raw)
		}
		return nil
	})
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.events", "1")
	q := mustQueueOn(t, p, "ch:events")
	if q.LastInsertError == nil || q.LastInsertError.Code == 0 || !strings.Contains(q.LastInsertError.Message, "(at row 1)") {
		t.Errorf("/status last_insert_error: got %+v, want a refused row's code and position", q.LastInsertError)
	}
	places := map[string]string{
		"log":      logText(t, p),
		"/status":  httpGet(t, "http://"+p.MetricsAddr+"/status"),
		"/metrics": httpGet(t, "http://"+p.MetricsAddr+"/metrics"),
	}
	for where, text := range places {
		if i := strings.Index(text, marker); i >= 0 {
			t.Errorf("%s holds row data: ...%s...", where, text[max(0, i-200):min(len(text), i+len(marker)+50)])
		}
	}
	quoted := 0
	for key, l := range letters {
		if !strings.Contains(l.Row, marker) {
			t.Errorf("dead letter %s: row %q, want the row as put", key, l.Row)
		}
		if strings.Contains(l.Error, marker) {
			quoted++
		}
	}
	if quoted != 2 {
		t.Errorf("dead letters with ClickHouse's full text: got %d, want 2: %+v", quoted, letters)
	}
}

// TestClickHouse_allowTablesReload starts a node whose YAML file allows
// default.* only (a list): puts to ch:analytics.events and
// ch:system.query_log are refused with InvalidArgument naming the flag
// and its patterns. The file then allows analytics.* too (a comma
// string) and the node gets SIGHUP: the next put to ch:analytics.events
// is taken and lands; ch:system.query_log stays refused.
func TestClickHouse_allowTablesReload(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE DATABASE analytics")
	ch.Exec(t, "CREATE TABLE analytics.events (id UInt64) ENGINE = MergeTree ORDER BY id")
	cfgPath := filepath.Join(t.TempDir(), "chute.yaml")
	write := func(allow string) {
		body := "clickhouse_url: " + ch.URL() + "\nclickhouse_allow_tables: " + allow + "\n"
		if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("\n  - default.*\n")
	p := StartChute(t, "--config", cfgPath)
	cli := clusterClient(t, p.ClientAddr)
	put := func(queue string) error {
		ctx, cancel := rpcCtx()
		defer cancel()
		_, err := cli.Put(ctx, "/q/"+queue+"/p/1", `{"id":1}`)
		return err
	}
	for _, tc := range []struct{ queue, want string }{
		{"ch:analytics.events", "etcdserver: ch:analytics.events: table analytics.events is not in --clickhouse-allow-tables (default.*)"},
		{"ch:system.query_log", "table system.query_log is not in --clickhouse-allow-tables (default.*)"},
	} {
		if err := put(tc.queue); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("put to %s: got %v, want InvalidArgument saying %q", tc.queue, err, tc.want)
		}
	}
	write(`"default.*,analytics.*"`)
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "a put to ch:analytics.events after SIGHUP", func() error {
		return put("ch:analytics.events")
	})
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM analytics.events", "1")
	if err := put("ch:system.query_log"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("put to ch:system.query_log after the reload: got %v, want InvalidArgument", err)
	}
}
