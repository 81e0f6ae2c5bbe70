package dispatch

import "testing"

// TestRowCap: a refused batch halves the cap (never below one row, never
// raising a lower cap), growAfter full batches double it, a batch cut
// short by something else does not count, and at batch_rows the cap is
// gone.
func TestRowCap(t *testing.T) {
	var c rowCap
	if got := c.limit(1000); got != 1000 {
		t.Fatalf("no cap: limit %d, want batch_rows", got)
	}
	if got := c.refused(1000); got != 500 || c.limit(1000) != 500 {
		t.Fatalf("after a refused batch of 1000: cap %d, limit %d; want 500", got, c.limit(1000))
	}
	if got := c.refused(900); got != 450 {
		t.Fatalf("a second refused batch of 900: cap %d, want 450", got)
	}
	if got := c.refused(1000); got != 450 {
		t.Fatalf("a batch of 1000 refused after the cap fell: cap %d, want 450 kept", got)
	}
	for i := range 3 * growAfter {
		c.landed(100, 1000) // short batches
		if i == growAfter-2 {
			c.landed(450, 1000) // one at the cap: growAfter-1 more needed
		}
	}
	if got := c.limit(1000); got != 450 {
		t.Fatalf("after short batches: limit %d, want 450", got)
	}
	for range growAfter - 1 {
		c.landed(450, 1000)
	}
	if got := c.limit(1000); got != 900 {
		t.Fatalf("after %d batches at the cap: limit %d, want 900", growAfter, got)
	}
	for range growAfter {
		c.landed(900, 1000)
	}
	if got := c.limit(1000); got != 1000 || c.rows != 0 {
		t.Fatalf("doubled past batch_rows: limit %d, cap %d; want batch_rows, no cap", got, c.rows)
	}
	var one rowCap
	if got := one.refused(1); got != 1 {
		t.Fatalf("a refused batch of one row: cap %d, want 1", got)
	}
}
