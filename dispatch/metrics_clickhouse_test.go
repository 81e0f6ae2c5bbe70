//go:build e2e

package dispatch

import (
	"fmt"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"chute/internal/chtest"
	chuteotel "chute/otel"
)

// TestSink_metricsMaxTables inserts rows into 30 tables, and dead
// letters into one, through a real ClickHouse with MetricsMaxTables 10:
// /metrics shows at most 10 table values plus "_other" for every
// ClickHouse metric, and the rows of all 30 tables.
func TestSink_metricsMaxTables(t *testing.T) {
	const tables, maxTables = 30, 10
	ch := chtest.Start(t)
	for i := range tables {
		ch.Exec(t, fmt.Sprintf("CREATE TABLE default.m%d (id UInt64) ENGINE = Memory", i))
	}
	providers, err := chuteotel.New(chuteotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = providers.Shutdown(testCtx(t, 5*time.Second)) })
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"}, func(c *Config) {
		c.Meter = providers.MeterProvider()
		c.MetricsMaxTables = maxTables
	})
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	for i := range tables {
		for j := range 2 {
			if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:m%d/p/%d", i, j), fmt.Sprintf(`{"id":%d}`, j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cli.Put(ctx, "/q/ch:m29/p/bad", `{"id":"x"}`); err != nil {
		t.Fatal(err)
	}
	for i := range tables {
		waitCount(t, ch, fmt.Sprintf("default.m%d", i), 2, 20*time.Second)
	}
	series := regexp.MustCompile(`^(chute_clickhouse_[a-z_]+?)(?:_bucket|_sum|_count)?\{(.*)\} ([0-9.e+]+)$`)
	table := regexp.MustCompile(`table="([^"]*)"`)
	var values map[string]map[string]bool
	var rows, dead float64
	waitUntil(t, 20*time.Second, "every row and the dead letter in /metrics", func() bool {
		rec := httptest.NewRecorder()
		providers.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		values, rows, dead = make(map[string]map[string]bool), 0, 0
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			m := series.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			tm := table.FindStringSubmatch(m[2])
			if tm == nil {
				continue
			}
			if values[m[1]] == nil {
				values[m[1]] = make(map[string]bool)
			}
			values[m[1]][tm[1]] = true
			v, _ := strconv.ParseFloat(m[3], 64)
			switch m[1] {
			case "chute_clickhouse_rows_inserted_total":
				rows += v
			case "chute_clickhouse_dead_letters_total":
				dead += v
			}
		}
		return rows == 2*tables && dead == 1
	})
	for _, name := range []string{"chute_clickhouse_rows_inserted_total", "chute_clickhouse_inserted_bytes_total",
		"chute_clickhouse_batches_total", "chute_clickhouse_insert_duration_seconds",
		"chute_clickhouse_batch_rows", "chute_clickhouse_batch_wait_seconds"} {
		got := values[name]
		if len(got) != maxTables+1 || !got["_other"] {
			t.Errorf("%s: got %d table values %v, want %d and _other", name, len(got), got, maxTables+1)
		}
	}
	if got := values["chute_clickhouse_dead_letters_total"]; len(got) != 1 || !got["_other"] && !got["default.m29"] {
		t.Errorf("dead letters: got table values %v, want the one table's", got)
	}
}
