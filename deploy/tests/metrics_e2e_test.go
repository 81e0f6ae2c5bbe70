//go:build e2e

package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
)

// metricsTimeout bounds the wait for every series the traffic makes.
const metricsTimeout = 60 * time.Second

// exposed is what one scrape of /metrics holds: each series name with the
// label names seen on it.
type exposed map[string]map[string]bool

var (
	seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
)

func scrape(t testing.TB, addr string) exposed {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	e := exposed{}
	for line := range strings.Lines(string(body)) {
		m := seriesLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		if e[m[1]] == nil {
			e[m[1]] = map[string]bool{}
		}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			e[m[1]][l[1]] = true
		}
	}
	return e
}

// missing lists what the dashboard and the rules use that e lacks.
func (u usage) missing(e exposed) []string {
	var out []string
	for name, labels := range u.labels {
		got, ok := e[name]
		if !ok {
			out = append(out, name)
			continue
		}
		for _, l := range labels {
			if !got[l] {
				out = append(out, fmt.Sprintf("%s without the label %s", name, l))
			}
		}
	}
	for _, g := range u.groupings {
		if !slices.ContainsFunc(g.metrics, func(m string) bool { return e[m][g.label] }) {
			out = append(out, fmt.Sprintf("%s: by (%s): none of %v has it", g.where, g.label, g.metrics))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestMetrics_usedByDashboardAndRulesExist: every metric the dashboard
// and the alert rules select, with the labels they match and group by,
// is on a node's /metrics once it has inserted rows, stored a dead letter
// and failed an insert.
func TestMetrics_usedByDashboardAndRulesExist(t *testing.T) {
	used := usedMetrics(t)
	bin := buildChute(t)
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, msg String) ENGINE = MergeTree ORDER BY id")
	n := startNode(t, bin, "--clickhouse-url="+ch.URL())

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.clientAddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for key, value := range map[string]string{
		"/q/ch:events/p/1":   `{"id":1,"msg":"inserted"}`,
		"/q/ch:events/p/2":   `{"id":2,"msg":[1]}`, // refused by ClickHouse: a dead letter
		"/q/ch:no_table/p/1": `{"id":1}`,           // a configuration error, retried
		"/q/jobs/p/1":        "a message nobody consumes",
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}

	deadline := time.Now().Add(metricsTimeout)
	for {
		miss := used.missing(scrape(t, n.metricsAddr))
		if len(miss) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, /metrics lacks what the dashboard or the rules use:\n  %s", metricsTimeout, strings.Join(miss, "\n  "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := ch.Count(t, "default.events"); got != 1 {
		t.Errorf("default.events holds %d rows, want 1: the traffic did not go as planned", got)
	}
}
