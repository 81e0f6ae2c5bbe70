package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"chute/dispatch"
	"chute/internal/chtest"
	"chute/kv"
)

// TestRunEndToEnd_rowsLand runs the end-to-end measurement against an
// in-process node draining into a real ClickHouse: every row must land and
// the figures must be positive and ordered.
func TestRunEndToEnd_rowsLand(t *testing.T) {
	ch := chtest.Start(t)
	mgr, err := dispatch.New(dispatch.Config{MemberID: 1, ClickHouse: func() (string, string) { return ch.URL(), "default" }})
	if err != nil {
		t.Fatal(err)
	}
	kcfg := kv.DefaultConfig()
	kcfg.MemberID = 1
	kcfg.ListenClientURLs = []string{"http://127.0.0.1:0"}
	kcfg.Queues = mgr
	srv, err := kv.New(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	mgr.Start(srv, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = mgr.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := runEndToEnd(ctx, EndToEnd{
		Endpoint: srv.ClientAddrs()[0].String(), ClickHouseURL: ch.URL(),
		Rows: 1000, Clients: 4, Batch: 50,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if r.Rows != 1000 || r.RowsPerSec <= 0 || r.PutsPerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 {
		t.Fatalf("result: %+v", r)
	}
}
