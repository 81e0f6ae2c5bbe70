package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"chute/internal/nodeprobe"
)

// chQueryTimeout bounds one statement the bench sends to ClickHouse.
const chQueryTimeout = 30 * time.Second

// httpClient talks to ClickHouse and to the nodes' metrics listeners. It
// has no timeout of its own: every request carries a context.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// chQuery runs a statement over ClickHouse's HTTP interface at url (the
// default user, no password), within chQueryTimeout, and returns the body.
func chQuery(ctx context.Context, url, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, chQueryTimeout)
	defer cancel()
	out, err := nodeprobe.Query(ctx, httpClient, url, sql)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return out, nil
}

// createTable creates default.table with the columns of the bench's rows.
func createTable(ctx context.Context, url, table string) error {
	_, err := chQuery(ctx, url, "CREATE TABLE default."+table+" (id UInt64, v String) ENGINE = MergeTree ORDER BY id")
	return err
}

// dropTable drops default.table if it exists.
func dropTable(ctx context.Context, url, table string) error {
	_, err := chQuery(ctx, url, "DROP TABLE IF EXISTS default."+table)
	return err
}

// chCounts returns the rows each of default.tables holds, in one query
// while every table has rows. It sums the rows of the tables' active
// parts in system.parts rather than asking count(): ClickHouse 18.16
// answers count() by reading the whole first column, a cost that grows
// with the table and, polled every 50 ms through a run, came to more of
// ClickHouse's CPU than the inserts under measurement
// (docs/benchmarks-clickhouse-cost.md). The parts cost the same at any
// size. A table without parts is looked up in system.tables, so a
// missing one is still an error.
func chCounts(ctx context.Context, url string, tables []string) ([]int64, error) {
	var names strings.Builder
	for i, t := range tables {
		if i > 0 {
			names.WriteString(", ")
		}
		names.WriteString("'" + t + "'")
	}
	out, err := chQuery(ctx, url, "SELECT table, sum(rows) FROM system.parts WHERE database = 'default' AND table IN ("+
		names.String()+") AND active GROUP BY table FORMAT TabSeparated")
	if err != nil {
		return nil, err
	}
	counts := make([]int64, len(tables))
	seen, err := tableValues(out, tables, counts)
	if err != nil {
		return nil, err
	}
	if seen == len(tables) {
		return counts, nil
	}
	out, err = chQuery(ctx, url, "SELECT name, 0 FROM system.tables WHERE database = 'default' AND name IN ("+
		names.String()+") FORMAT TabSeparated")
	if err != nil {
		return nil, err
	}
	if n, err := tableValues(out, tables, make([]int64, len(tables))); err != nil {
		return nil, err
	} else if n != len(tables) {
		return nil, fmt.Errorf("bench: clickhouse: counts: %d of %d tables exist", n, len(tables))
	}
	return counts, nil
}

// tableValues reads the lines "table\tn" of out into into, at each
// table's index in tables, and returns how many lines it read.
func tableValues(out string, tables []string, into []int64) (int, error) {
	seen := 0
	for line := range strings.Lines(out) {
		name, n, ok := strings.Cut(strings.TrimSpace(line), "\t")
		i := slices.Index(tables, name)
		c, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || i < 0 {
			return 0, fmt.Errorf("bench: clickhouse: counts: unexpected line %q", line)
		}
		into[i] = c
		seen++
	}
	return seen, nil
}

// insertEvents are ClickHouse's server-wide counts of INSERT queries and
// of the rows they inserted (system.events).
type insertEvents struct {
	queries, rows int64
}

// chInsertEvents reads insertEvents; an event not yet counted is zero.
func chInsertEvents(ctx context.Context, url string) (insertEvents, error) {
	out, err := chQuery(ctx, url, "SELECT event, value FROM system.events WHERE event IN ('InsertQuery', 'InsertedRows') FORMAT TabSeparated")
	if err != nil {
		return insertEvents{}, err
	}
	var ev insertEvents
	for line := range strings.Lines(out) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), "\t")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return insertEvents{}, fmt.Errorf("bench: clickhouse: events: unexpected line %q", line)
		}
		switch name {
		case "InsertQuery":
			ev.queries = n
		case "InsertedRows":
			ev.rows = n
		}
	}
	return ev, nil
}

// chQueryCPU reads the CPU time ClickHouse's query threads have used
// since it started: system.events UserTimeMicroseconds +
// SystemTimeMicroseconds. An event not yet counted is zero.
func chQueryCPU(ctx context.Context, url string) (time.Duration, error) {
	out, err := chQuery(ctx, url, "SELECT sum(value) FROM system.events WHERE event IN ('UserTimeMicroseconds', 'SystemTimeMicroseconds') FORMAT TabSeparated")
	if err != nil {
		return 0, err
	}
	us, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || us < 0 {
		return 0, fmt.Errorf("bench: clickhouse: query cpu: unexpected answer %q", out)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// chVersion returns the server's version().
func chVersion(ctx context.Context, url string) (string, error) {
	out, err := chQuery(ctx, url, "SELECT version()")
	return strings.TrimSpace(out), err
}
