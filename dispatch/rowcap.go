package dispatch

import "sync"

// splitAfter is how many times a batch is refused by ClickHouse's limits
// of one query (sink.Result.OverQueryLimit) before its rows go back to
// the queue to form batches of half its size: a time limit may pass with
// the load, and a memory limit never does.
const splitAfter = 2

// growAfter is how many batches at the cap must go in before it doubles.
const growAfter = 8

// rowCap bounds the rows of a queue's batches below batch_rows while
// ClickHouse's limits of one query (max_memory_usage, max_execution_time)
// refuse larger ones: without it such a batch was sent again whole, for
// ever, and the queue behind it never moved. A refused batch halves the
// cap; growAfter batches in at the cap double it, until batch_rows is
// the bound again. Batches of one row are never split: a row over the
// limits on its own stays queued and is tried again, as with any
// transient failure, and /status shows why. The drainer's loop reads it,
// the batches' goroutines change it.
type rowCap struct {
	mu   sync.Mutex
	rows int // 0: no cap
	in   int // batches in at the cap since it last changed
}

// limit returns batchRows, or the cap when it is lower.
func (c *rowCap) limit(batchRows int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows > 0 && c.rows < batchRows {
		return c.rows
	}
	return batchRows
}

// refused notes a batch of n rows the limits refused and returns the new
// cap.
func (c *rowCap) refused(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if half := max(n/2, 1); c.rows == 0 || half < c.rows {
		c.rows = half
	}
	c.in = 0
	return c.rows
}

// landed notes a batch of n rows ClickHouse took, batchRows being the
// queue's bound: growAfter of them at the cap double it.
func (c *rowCap) landed(n, batchRows int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == 0 || n < c.rows {
		return // a batch cut short by its rows or bytes says nothing of the cap
	}
	if c.in++; c.in < growAfter {
		return
	}
	c.rows, c.in = 2*c.rows, 0
	if c.rows >= batchRows {
		c.rows = 0
	}
}
