package sink

import (
	"context"
	"fmt"
)

// Inserter sends rows as one batch, typically a closure over
// Client.Insert with the endpoint and target bound. rows is a sub-slice of
// the slice given to Bisect; the Inserter must not keep or change it.
type Inserter func(ctx context.Context, rows [][]byte) Result

// RangeInserter is an Inserter that is also told where its rows start in
// the slice given to BisectRange: rows is all[first:first+len(rows)]. A
// caller that derives insert_deduplication_token from the sequence numbers
// a batch carries needs it.
type RangeInserter func(ctx context.Context, first int, rows [][]byte) Result

// Refused is a row ClickHouse refused on its own with a data error.
type Refused struct {
	// Index is the row's index in the slice given to Bisect.
	Index int
	// Row is that row, the caller's bytes (not a copy).
	Row []byte
	// Result is ClickHouse's answer to this row alone (ClassData).
	Result Result
}

// BisectError is returned by Bisect when an answer other than OK or a data
// error stopped it (or ctx ended). Everything before Settled is done:
// rows[:Settled] are in ClickHouse except the refused ones, which Bisect
// returned. Nothing from Settled on is in ClickHouse (as far as answers
// tell: a request that timed out may have been written, as with any
// batch); the caller keeps those rows and sends them again later.
type BisectError struct {
	// Settled is the number of leading rows that are inserted or refused.
	Settled int
	// Result is the answer that stopped the bisection; for an ended ctx,
	// a ClassTransient Result whose Err is the context's error.
	Result Result
}

func (e *BisectError) Error() string {
	return fmt.Sprintf("sink: bisection stopped at row %d: %s", e.Settled, (&ResultError{Op: "insert", Result: e.Result}).Error())
}

// Unwrap returns the transport error of the stopping answer, if any
// (context.Canceled when ctx ended).
func (e *BisectError) Unwrap() error { return e.Result.Err }

// Bisect inserts what it can of rows, a batch ClickHouse just refused as a
// whole with a data error, and finds the rows it refuses on their own. It
// halves the batch and sends the halves, left first; a half that fails
// with a data error is halved again, down to single rows. A half whose
// sibling on the left went in whole is known to hold the fault and is
// halved without being sent. One bad row among n costs at most
// 2*ceil(log2 n)+1 requests. Rows are sent in their order, never twice: a
// row ends up inserted (once), refused (returned in refused, oldest first,
// each with its own answer), or, when err is a *BisectError, not yet sent
// after the contiguous settled prefix.
//
// Bisect does not resend rows as a whole: a single row is sent once more on
// its own, so its Result describes it. A transient or config error, or ctx
// ending, stops it with a *BisectError (see there). Bisect makes its
// requests one after another from the calling goroutine.
func Bisect(ctx context.Context, insert Inserter, rows [][]byte) (refused []Refused, err error) {
	return BisectRange(ctx, func(ctx context.Context, _ int, rows [][]byte) Result {
		return insert(ctx, rows)
	}, rows)
}

// BisectRange is Bisect with an inserter that is told where its rows start.
func BisectRange(ctx context.Context, insert RangeInserter, rows [][]byte) (refused []Refused, err error) {
	if len(rows) == 0 {
		return nil, nil
	}
	b := bisector{ctx: ctx, insert: insert, rows: rows}
	err = b.split(0, len(rows))
	return b.refused, err
}

type bisector struct {
	ctx     context.Context
	insert  RangeInserter
	rows    [][]byte
	refused []Refused
}

// split settles rows[lo:hi], known to fail as a whole, half by half.
func (b *bisector) split(lo, hi int) error {
	if hi-lo == 1 {
		return b.try(lo, hi)
	}
	mid := lo + (hi-lo)/2
	before := len(b.refused)
	if err := b.try(lo, mid); err != nil {
		return err
	}
	if len(b.refused) == before {
		return b.split(mid, hi) // the left half went in: the fault is on the right
	}
	return b.try(mid, hi)
}

// try sends rows[lo:hi] and settles them.
func (b *bisector) try(lo, hi int) error {
	if err := b.ctx.Err(); err != nil {
		return &BisectError{Settled: lo, Result: Result{Class: ClassTransient, Err: err, Message: err.Error()}}
	}
	res := b.insert(b.ctx, lo, b.rows[lo:hi:hi])
	switch {
	case res.OK():
		return nil
	case res.Class != ClassData:
		return &BisectError{Settled: lo, Result: res}
	case hi-lo == 1:
		b.refused = append(b.refused, Refused{Index: lo, Row: b.rows[lo], Result: res})
		return nil
	}
	return b.split(lo, hi)
}
