package bench

import "testing"

func TestMemoryResult(t *testing.T) {
	// Goals of 100 MB and 188.4 MB at GOGC 100: 44.2 MB of live heap for
	// 100000 rows of 256 bytes.
	m := memoryResult(100000, 256, 16, 100_000_000, 188_400_000, 50_000_000, 147_400_000, 100)
	if m.HeapBytes != 44_200_000 || m.HeapPerRow != 442 || m.OverheadPerRow != 186 || m.RSSPerRow != 974 {
		t.Errorf("got %+v, want 44.2 MB, 442 B a row, 186 beyond the value, 974 of RSS", m)
	}
	if m.HeapGoalBefore != 100_000_000 || m.HeapGoalAfter != 188_400_000 {
		t.Errorf("goals: got %d and %d, want the two read", m.HeapGoalBefore, m.HeapGoalAfter)
	}
	if m := memoryResult(1000, 100, 16, 10_000_000, 10_300_000, 0, 0, 50); m.HeapBytes != 200_000 {
		t.Errorf("GOGC 50: got %d bytes, want 200000", m.HeapBytes)
	}
}

func TestMemoryRowsFor(t *testing.T) {
	if got := memoryRowsFor(256, 16, memoryRows); got != memoryRows {
		t.Errorf("256-byte values: got %d rows, want %d", got, memoryRows)
	}
	if got := memoryRowsFor(4096, 16, memoryRows); got != memoryQueueBytes/(4096+16+64) {
		t.Errorf("4096-byte values: got %d rows, want them under %d bytes", got, memoryQueueBytes)
	}
	if got := memoryRowsFor(256, 16, 500); got != 500 {
		t.Errorf("limit 500: got %d", got)
	}
}

func TestMedianMemory(t *testing.T) {
	run := func(rss float64, rows int64) MemoryResult { return MemoryResult{Rows: rows, RSSPerRow: rss} }
	got := medianMemory([]MemoryResult{run(700, 1), run(300, 2), run(500, 3)})
	if got.Rows != 3 || got.Runs != 3 || got.MinRSSPerRow != 300 || got.MaxRSSPerRow != 700 {
		t.Errorf("medianMemory: got %+v, want the run of 500 B, 3 runs, 300-700", got)
	}
	if got := medianMemory([]MemoryResult{run(700, 1)}); got.Runs != 0 || got.Rows != 1 {
		t.Errorf("medianMemory of one: got %+v, want it as it is", got)
	}
	if got := medianMemory(nil); got.Rows != 0 {
		t.Errorf("medianMemory of none: got %+v, want zero", got)
	}
}
