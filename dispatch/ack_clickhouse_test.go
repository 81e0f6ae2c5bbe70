//go:build e2e

package dispatch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/internal/chtest"
)

// TestAck_insertedReturnsAfterInsert checks ack=inserted: a put returns
// once its row is in ClickHouse; with no table it times out (and the row
// lands once the table exists); a row ClickHouse refuses fails its put,
// naming the dead letter.
func TestAck_insertedReturnsAfterInsert(t *testing.T) {
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.typed (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	n := startSinkNode(t, &chURL{url: ch.URL(), db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 60*time.Second)
	for _, q := range []string{"ch:typed", "ch:later"} {
		if _, err := cli.Put(ctx, SettingsKey(q), `{"ack":"inserted","batch_interval":"0s"}`); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/ch:typed/p/%d", i), fmt.Sprintf(`{"id":%d,"n":1}`, i)); err != nil {
			t.Fatal(err)
		}
		if got := ch.Count(t, "default.typed"); got != i+1 {
			t.Fatalf("after put %d returned: %d rows in ClickHouse, want %d", i, got, i+1)
		}
	}
	_, err := cli.Put(ctx, "/q/ch:typed/p/bad", `{"id":9,"n":"x"}`)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/q/ch:typed/dlq/") {
		t.Fatalf("refused row: got %v, want InvalidArgument naming its dead letter", err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := cli.Put(short, "/q/ch:later/p/1", `{"id":1}`); err == nil {
		t.Fatal("put to a missing table returned before its row was inserted")
	}
	ch.Exec(t, "CREATE TABLE default.later (id UInt64) ENGINE = MergeTree ORDER BY id")
	waitCount(t, ch, "default.later", 1, 10*time.Second)
}
