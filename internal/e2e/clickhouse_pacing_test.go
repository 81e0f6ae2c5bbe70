//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"chute/internal/chtest"
)

// TestClickHouse_pacingFlags runs the binary with
// --clickhouse-max-inserts-per-second 0.5 and puts three rows one after
// another to a queue with ack=inserted and no pacing settings of its
// own: each put returns once its row is in ClickHouse, and the flag lets
// one insert start every two seconds, so the three take at least four
// (the first goes at once; the default of two a second would let them
// through in one). All three rows land.
func TestClickHouse_pacingFlags(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.paced (id UInt64) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, "--clickhouse-url", ch.URL(), "--clickhouse-max-inserts-per-second", "0.5",
		"--clickhouse-max-inflight-inserts", "1", "--clickhouse-batch-interval", "10ms")
	cli := clusterClient(t, p.ClientAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "/config/queues/ch:paced", `{"ack":"inserted"}`); err != nil {
		t.Fatalf("put the queue's settings: %v", err)
	}
	const rows, perInsert = 3, 2 * time.Second
	start := time.Now()
	for id := range rows {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:paced/p/%d", id), fmt.Sprintf(`{"id":%d}`, id)); err != nil {
			t.Fatalf("put %d: %v", id, err)
		}
	}
	if took, least := time.Since(start), (rows-1)*perInsert; took < least {
		t.Errorf("%d puts with ack=inserted took %v; want at least %v at 0.5 inserts a second", rows, took, least)
	}
	if got := ch.Query(t, "SELECT count() FROM default.paced"); got != "3" {
		t.Errorf("rows in ClickHouse: got %s, want %d", got, rows)
	}
}
