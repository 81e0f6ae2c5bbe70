package bench

import (
	"context"
	"log/slog"
	"strings"
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

func TestWriteEndToEnd(t *testing.T) {
	var b strings.Builder
	err := writeEndToEnd(&b, []EndToEndResult{
		{Server: ServerChute, Rows: 20000, Clients: 16, Batch: 1, PutsPerSec: 7000, RowsPerSec: 6900, P50: 38 * time.Millisecond, P99: 72 * time.Millisecond},
		{Server: ServerChuteTraced, Rows: 20000, Clients: 16, Batch: 1, PutsPerSec: 6000, RowsPerSec: 5900, P50: 40 * time.Millisecond, P99: 80 * time.Millisecond,
			Trace: &TraceCount{Spans: 20400, Calls: 20000}},
	})
	if err != nil {
		t.Fatalf("writeEndToEnd: %v", err)
	}
	for _, want := range []string{
		"| server | rows | clients | puts per txn |",
		"| chute | 20000 | 16 | 1 | 7000 | 6900 | 38.0 | 72.0 |",
		"| chute, traced 100% | 20000 | 16 | 1 | 6000 | 5900 | 40.0 | 80.0 |",
		"spans received by the bench's OTLP sink in the chute, traced 100% run of 20000 rows, 1 puts per txn: 20400, for 20000 KV calls and their INSERT batches",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if n := strings.Count(b.String(), "spans received"); n != 1 {
		t.Errorf("spans lines: got %d, want 1", n)
	}
}
