//go:build e2e

package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"chute/internal/chtest"
)

// The oracle against a real ClickHouse: a workload puts rows into chute's
// KV (in this process, without queues), the test copies them into a
// table as chute's sink would (one INSERT ... FORMAT JSONEachRow per
// batch), then breaks the copy on purpose: the oracle must see it.

const oracleTable = "default.oracle"

// copyRows inserts the values of the puts, in batches of batch rows, into
// oracleTable on ch and returns the batches' ids.
func copyRows(t *testing.T, ch *chtest.Server, puts map[string]string, batch int) [][]uint64 {
	t.Helper()
	keys := make([]string, 0, len(puts))
	for k := range puts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var batches [][]uint64
	for len(keys) > 0 {
		n := min(batch, len(keys))
		var body strings.Builder
		var ids []uint64
		for _, k := range keys[:n] {
			body.WriteString(puts[k])
			body.WriteString("\n")
			var p int
			var m uint64
			if _, err := fmt.Sscanf(k[strings.LastIndex(k, "/")+1:], "%d-%d", &p, &m); err != nil {
				t.Fatalf("key %q: %v", k, err)
			}
			ids = append(ids, ID(p, m))
		}
		ch.Exec(t, "INSERT INTO "+oracleTable+" FORMAT JSONEachRow\n"+body.String())
		batches = append(batches, ids)
		keys = keys[n:]
	}
	return batches
}

// oracleSetup runs a workload of 3 producers × 40 puts into the KV and
// copies the rows to ClickHouse in batches of 25; it returns the log and
// the batches.
func oracleSetup(t *testing.T) (*chtest.Server, Log, [][]uint64) {
	t.Helper()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE "+oracleTable+" (id UInt64, p UInt32, n UInt64, pad String) ENGINE = MergeTree ORDER BY id")
	addr := startKV(t)
	cfg := DefaultWorkloadConfig()
	cfg.Queue, cfg.Endpoints, cfg.Producers, cfg.MaxPuts, cfg.Batch = "ch:oracle", []string{addr}, 3, 40, 5
	w, err := StartWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, w, 30*time.Second)
	log := w.Stop()
	if log.Count(Acked) != 120 {
		t.Fatalf("acked puts: got %d, want 120: %v", log.Count(Acked), w.FirstErrors())
	}
	batches := copyRows(t, ch, readPuts(t, addr, cfg.Queue), 25)
	return ch, log, batches
}

func judgeCH(t *testing.T, ch *chtest.Server, log Log) Verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	found, err := CountIDs(ctx, ch.URL(), oracleTable)
	if err != nil {
		t.Fatal(err)
	}
	return Judge(log, found)
}

func TestJudge_clickhouse_intact(t *testing.T) {
	t.Parallel()
	ch, log, _ := oracleSetup(t)
	v := judgeCH(t, ch, log)
	if err := v.Check(0, 0); err != nil || v.Rows != 120 || v.IDs != 120 {
		t.Errorf("an intact copy: %v, Check(0, 0) = %v; want 120 rows of 120 ids and nil", v, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := MaxInsertRows(ctx, ch.URL(), "default", "oracle"); err != nil || n != 25 {
		t.Errorf("MaxInsertRows: got %d, %v; want 25, the batch size", n, err)
	}
}

// TestJudge_clickhouse_doubleInsert inserts one batch a second time, as a
// sink that retries a batch ClickHouse had stored would: the oracle must
// count its rows as extra copies and the check must fail.
func TestJudge_clickhouse_doubleInsert(t *testing.T) {
	t.Parallel()
	ch, log, batches := oracleSetup(t)
	again := batches[1]
	var body strings.Builder
	for _, id := range again {
		p, n := SplitID(id)
		fmt.Fprintf(&body, `{"id":%d,"p":%d,"n":%d}`+"\n", id, p, n)
	}
	ch.Exec(t, "INSERT INTO "+oracleTable+" FORMAT JSONEachRow\n"+body.String())

	v := judgeCH(t, ch, log)
	if v.Extra != len(again) || !slices.Equal(v.Duplicated, slices.Sorted(slices.Values(again))) || len(v.Lost) != 0 {
		t.Errorf("a batch of %d inserted twice: %v, duplicated %v; want %d extra copies of exactly that batch, none lost", len(again), v, v.Duplicated, len(again))
	}
	err := v.Check(0, 0)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d extra copies", len(again))) {
		t.Errorf("Check(0, 0) after a double insert: got %v, want it to fail on %d extra copies", err, len(again))
	}
	if err := v.Check(0, len(again)); err != nil {
		t.Errorf("Check(0, %d), one batch allowed: got %v, want nil", len(again), err)
	}
}

// TestJudge_clickhouse_deletedRow deletes one acknowledged row from the
// table: the oracle must report it lost and the check must fail.
func TestJudge_clickhouse_deletedRow(t *testing.T) {
	t.Parallel()
	ch, log, batches := oracleSetup(t)
	gone := batches[2][3]
	ch.Exec(t, fmt.Sprintf("ALTER TABLE %s DELETE WHERE id = %d", oracleTable, gone))
	// A mutation runs in the background.
	var v Verdict
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if v = judgeCH(t, ch, log); len(v.Lost) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted row still there after 20s: %v", v)
		}
	}
	if !slices.Equal(v.Lost, []uint64{gone}) || v.Extra != 0 || v.Rows != 119 {
		t.Errorf("one acked row deleted: %v, lost %v; want exactly %d lost, 119 rows", v, v.Lost, gone)
	}
	p, n := SplitID(gone)
	err := v.Check(0, 0)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("lost 1 acknowledged ids, want at most 0: [%d-%d]", p, n)) {
		t.Errorf("Check(0, 0) with a row deleted: got %v, want it to fail naming %d-%d", err, p, n)
	}
}

func TestWaitIDs(t *testing.T) {
	t.Parallel()
	ch, log, _ := oracleSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	found, err := WaitIDs(ctx, ch.URL(), oracleTable, log.AckedIDs(), WaitConfig{Quiet: time.Hour, Poll: 10 * time.Millisecond})
	if err != nil || len(found) != 120 {
		t.Fatalf("WaitIDs of rows all there: got %d ids, %v", len(found), err)
	}
	// One id that never comes: WaitIDs returns once the table is quiet.
	missing := append(log.AckedIDs(), ID(99, 1))
	found, err = WaitIDs(ctx, ch.URL(), oracleTable, missing, WaitConfig{Quiet: 300 * time.Millisecond, Poll: 10 * time.Millisecond})
	if err != nil || len(found) != 120 {
		t.Errorf("WaitIDs with an id missing: got %d ids, %v", len(found), err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("WaitIDs took %v with a quiet period of 300ms", took)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if _, err := WaitIDs(short, "http://127.0.0.1:1", oracleTable, missing, WaitConfig{Quiet: time.Hour, Poll: 10 * time.Millisecond}); err == nil {
		t.Error("WaitIDs of a server nobody runs: got nil error")
	}
}
