package faults

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"chute/internal/nodeprobe"
)

// query runs sql at chURL (http://[user:pass@]host:port) and returns
// the body of a 200 answer. Each call has a connection of its own: a
// pooled one to a server a scenario killed would fail the next query.
func query(ctx context.Context, chURL, sql string) (string, error) {
	out, err := nodeprobe.Query(ctx, nil, chURL, sql)
	if err != nil {
		return "", fmt.Errorf("faults: %w", err)
	}
	return out, nil
}

// CountIDs returns how many rows of each id table holds: SELECT id,
// count() FROM table GROUP BY id. table is used as written ("db.t").
func CountIDs(ctx context.Context, chURL, table string) (map[uint64]int, error) {
	out, err := query(ctx, chURL, "SELECT id, count() FROM "+table+" GROUP BY id FORMAT TabSeparated")
	if err != nil {
		return nil, err
	}
	found := make(map[uint64]int)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		idText, nText, ok := strings.Cut(sc.Text(), "\t")
		id, err1 := strconv.ParseUint(idText, 10, 64)
		n, err2 := strconv.Atoi(nText)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("faults: ids of %s: line %q: want <id>\\t<count>", table, sc.Text())
		}
		found[id] = n
	}
	return found, sc.Err()
}

// MaxInsertRows returns the rows of the largest insert into
// database.table: every INSERT into a MergeTree without partitions makes
// one part of level 0, which merges leave behind as an inactive part for
// 8 minutes (old_parts_lifetime), so the largest such part is the largest
// batch of that time. 0 when there was none.
func MaxInsertRows(ctx context.Context, chURL, database, table string) (int, error) {
	out, err := query(ctx, chURL, fmt.Sprintf(
		"SELECT max(rows) FROM system.parts WHERE database = '%s' AND table = '%s' AND level = 0",
		quoteString(database), quoteString(table)))
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, fmt.Errorf("faults: largest insert into %s.%s: %q: %w", database, table, out, err)
	}
	return n, nil
}

// quoteString escapes s for a single-quoted ClickHouse string literal.
func quoteString(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

// WaitConfig is how WaitIDs polls a table.
type WaitConfig struct {
	// Quiet is how long the table's ids and counts must stay the same
	// for WaitIDs to take them as all that is coming.
	Quiet time.Duration
	// Poll is the pause between two counts.
	Poll time.Duration
	// CountTimeout bounds one count. A query that gets no answer in
	// time (a server stalled on a loaded machine, a connection nobody
	// answers) is given up and asked again at the next poll, so one
	// lost query cannot hold the whole wait. Zero: defaultCountTimeout.
	CountTimeout time.Duration
}

// defaultCountTimeout is WaitConfig.CountTimeout's zero value: a GROUP BY
// over a few thousand rows takes milliseconds on an idle machine and has
// taken seconds on a loaded one.
const defaultCountTimeout = 10 * time.Second

// WaitIDs polls CountIDs every cfg.Poll until the table holds every id
// of want, or holds the same rows for cfg.Quiet (the rest is not
// coming), or ctx ends; it returns the last count it read. It returns an
// error only when no count could be read at all: then it says how many
// were tried and the last error.
func WaitIDs(ctx context.Context, chURL, table string, want []uint64, cfg WaitConfig) (map[uint64]int, error) {
	countTimeout := cfg.CountTimeout
	if countTimeout <= 0 {
		countTimeout = defaultCountTimeout
	}
	var last map[uint64]int
	var firstErr, lastErr error
	var stableSince time.Time
	for tries := 1; ; tries++ {
		cctx, cancel := context.WithTimeout(ctx, countTimeout)
		found, err := CountIDs(cctx, chURL, table)
		cancel()
		switch {
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
			lastErr = err
		case last != nil && maps.Equal(found, last):
			if time.Since(stableSince) >= cfg.Quiet {
				return found, nil
			}
		default:
			last, stableSince = found, time.Now()
			if hasAll(found, want) {
				return found, nil
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("faults: ids of %s: %w: none of %d counts answered (each given %v); the first error: %v; the last: %v",
					table, ctx.Err(), tries, countTimeout, firstErr, lastErr)
			}
			return last, nil
		case <-time.After(cfg.Poll):
		}
	}
}

func hasAll(found map[uint64]int, want []uint64) bool {
	for _, id := range want {
		if found[id] == 0 {
			return false
		}
	}
	return true
}
