package dispatch

import (
	"context"
	"fmt"
	"testing"

	"chute/dispatch/qlog"
)

// TestRegionReader_readsRunsOfEachRegion: a batch's values in two logs'
// mappings and on the heap are read by pread a run at a time, each run
// from its own region, and a value on the heap is left to memory.
func TestRegionReader_readsRunsOfEachRegion(t *testing.T) {
	logRows := func(n int, tag string) []row {
		t.Helper()
		cfg := qlog.DefaultConfig()
		cfg.Dir, cfg.NoSync = t.TempDir(), true
		l, err := qlog.OpenMapped(cfg, func(uint64, []byte, *qlog.Region) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		recs := make([][]byte, n)
		for i := range recs {
			recs[i] = fmt.Appendf(nil, `{"log":%q,"i":%d}`, tag, i)
		}
		_, views, r, err := l.AppendMapped(context.Background(), recs, nil)
		if err != nil || r == nil {
			t.Fatalf("append: region %v, err %v", r, err)
		}
		rows := make([]row, n)
		for i, v := range views {
			rows[i] = row{seq: uint64(i + 1), m: &message{value: v, region: r}}
		}
		return rows
	}
	a, b := logRows(3, "a"), logRows(2, "b")
	heap := row{seq: 9, m: &message{value: []byte(`{"heap":1}`)}}
	rows := []row{a[0], a[1], heap, b[0], b[1], a[2]}
	values := make([][]byte, len(rows))
	for i, r := range rows {
		values[i] = r.m.value
	}
	rd := newRegionReader(rows)
	if rd == nil {
		t.Fatal("no reader for a batch of mapped values")
	}
	buf := make([]byte, 4096)
	for _, step := range []struct {
		from, want int
	}{{0, 2}, {2, 0}, {3, 2}, {5, 1}, {1, 1}} {
		views := rd.ReadRows(buf, values[step.from:], nil)
		if len(views) != step.want {
			t.Fatalf("read from row %d: %d rows, want %d", step.from, len(views), step.want)
		}
		for i, v := range views {
			if string(v) != string(values[step.from+i]) {
				t.Errorf("row %d reads %q, want %q", step.from+i, v, values[step.from+i])
			}
		}
	}
	if newRegionReader([]row{heap}).rowReader() != nil {
		t.Error("a batch of heap values got a reader; want none")
	}
}
