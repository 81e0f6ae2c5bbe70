package sink

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
)

// Inserter sends rows as one batch, typically a closure over
// Client.Insert with the endpoint and target bound. rows are some of the
// rows given to Bisect, in their order, in a slice of Bisect's, and idx
// their indexes there (for a deduplication token of the part); the
// Inserter must not keep or change either.
type Inserter func(ctx context.Context, idx []int, rows [][]byte) Result

// Refused is a row ClickHouse refused with a data error.
type Refused struct {
	// Index is the row's index in the slice given to Bisect.
	Index int
	// Row is that row, the caller's bytes (not a copy).
	Row []byte
	// Result is the answer that names this row: ClickHouse's answer to
	// it alone, or to a request it was the named row of (see Bisect).
	Result Result
}

// BisectError is returned by Bisect when an answer other than OK or a data
// error stopped it (or ctx ended). Unsettled lists the rows neither
// inserted nor refused, by index, ascending: none of them is in
// ClickHouse (as far as answers tell: a request that timed out may have
// been written, as with any batch), and the caller keeps them and sends
// them again later. Every other row is in ClickHouse, or refused and
// returned by Bisect.
type BisectError struct {
	// Unsettled are the indexes of the rows to keep, ascending.
	Unsettled []int
	// Result is the answer that stopped the bisection; for an ended ctx,
	// a ClassTransient Result whose Err is the context's error.
	Result Result
}

func (e *BisectError) Error() string {
	return fmt.Sprintf("sink: bisection stopped with %d rows unsettled: %s", len(e.Unsettled), (&ResultError{Op: "insert", Result: e.Result}).Error())
}

// Unwrap returns the transport error of the stopping answer, if any
// (context.Canceled when ctx ended).
func (e *BisectError) Unwrap() error { return e.Result.Err }

// MarkerTrustBytes is the largest request whose "(at row N)" Bisect takes
// as naming the refused row. ClickHouse counts rows from the start of the
// request, except where it parses a large body in parallel chunks: newer
// servers then count from the start of the chunk, so a number is never
// larger than the row's true position but may be smaller. A chunk is at
// least min_chunk_bytes_for_parallel_parsing, 1 MiB or more in every
// version that has it, so a smaller request is one chunk.
const MarkerTrustBytes = 1 << 20

// minWindow is the fewest rows Bisect sends after a row it refused.
const minWindow = 16

// Bisect inserts what it can of rows, a batch ClickHouse just refused as a
// whole with refusal (a data error), and finds the rows it refuses. It
// returns the refused rows by index, ascending, each with the answer that
// named it; every other row ends up inserted once, or, when err is a
// *BisectError, unsettled (see there). A refusal that is not a data error
// (the zero Result) tells nothing: the rows are halved from the start.
//
// Where an answer names the row it stopped at ("(at row N)", which 18.16
// adds to every row it cannot parse in JSONEachRow), the rows before it
// parsed: they are put aside, to be inserted together at the end, the
// named row is refused with that answer (it describes the row), and the
// rows after it are sent next, in windows (see settle). A run of bad rows
// costs one small request per row, and a batch about one part for the
// rows before its bad ones and one for those after. A name is believed
// only in a request of at most MarkerTrustBytes (see there); in a larger
// one only the rows before it are put aside. Without a name, Bisect
// halves: it sends the halves, left first, a half that fails is settled
// the same way, and a half whose sibling on the left went in whole is
// known to hold the fault and is halved without being sent. One bad row
// among n costs at most 2*ceil(log2 n)+1 requests that way, and a single
// row is sent on its own so that its answer describes it. Rows put aside
// that fail together at the end are settled again like a batch.
//
// A transient or config error, or ctx ending, stops Bisect with a
// *BisectError. Bisect makes its requests one after another from the
// calling goroutine.
func Bisect(ctx context.Context, insert Inserter, rows [][]byte, refusal Result) ([]Refused, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	b := bisector{ctx: ctx, insert: insert, rows: rows, state: make([]rowState, len(rows))}
	all := make([]int, len(rows))
	for i := range all {
		all[i] = i
	}
	var err error
	if refusal.Class == ClassData {
		err = b.settle(all, refusal, len(all))
	} else {
		err = b.halve(all)
	}
	// Each round settles at least one of the rows put aside, so the
	// rounds end.
	for err == nil && len(b.parsed) > 0 {
		p := b.parsed
		b.parsed = nil
		_, err = b.attempt(p)
	}
	slices.SortFunc(b.refused, func(x, y Refused) int { return x.Index - y.Index })
	if be, ok := err.(*BisectError); ok {
		for i, s := range b.state {
			if s == rowUnsettled {
				be.Unsettled = append(be.Unsettled, i)
			}
		}
	}
	return b.refused, err
}

type rowState uint8

const (
	rowUnsettled rowState = iota
	rowInserted
	rowRefused
)

type bisector struct {
	ctx     context.Context
	insert  Inserter
	rows    [][]byte
	state   []rowState // by index
	refused []Refused
	// parsed are rows an answer showed ClickHouse parsed, not sent
	// since: they go in together once the rest is settled.
	parsed []int
}

// settle settles the rows idx (ascending), the first win of which failed
// together with the data error res. Rows are sent in windows: all the
// rest after the first row refused, then after each row refused four
// times the distance from the one refused before it (at least
// minWindow), so that a run of bad rows costs small requests and a long
// good stretch few parts; a window that goes in doubles the next. A
// window is at most MarkerTrustBytes, so that its answer names its bad
// row exactly.
func (b *bisector) settle(idx []int, res Result, win int) error {
	w, last := len(idx), -1 // last: the row refused last, -1 before the first
	for len(idx) > 0 {
		if win == 0 {
			k := b.window(idx, w)
			var ok bool
			var err error
			if res, ok, err = b.send(idx[:k]); err != nil {
				return err
			}
			if ok {
				idx, w = idx[k:], 2*k
				continue
			}
			win = k
		}
		part := idx[:win]
		n, trusted := namedRow(res, b.bodyBytes(part), win)
		switch {
		case n > 0 && trusted:
			b.parsed = append(b.parsed, part[:n-1]...)
			b.refuse(part[n-1], res)
			if last >= 0 {
				w = max(minWindow, 4*(part[n-1]-last))
			}
			last = part[n-1]
			idx = idx[n:]
		case n > 0:
			// Only the rows before the named one are known to have
			// parsed; the fault is in the others.
			b.parsed = append(b.parsed, part[:n-1]...)
			if err := b.halve(part[n-1:]); err != nil {
				return err
			}
			idx = idx[win:]
		case win == 1:
			b.refuse(part[0], res)
			idx = idx[1:]
		default:
			if err := b.halve(part); err != nil {
				return err
			}
			idx = idx[win:]
		}
		win = 0
	}
	return nil
}

// window returns how many of the rows idx the next request carries: at
// most w, and at most MarkerTrustBytes of body, but at least one.
func (b *bisector) window(idx []int, w int) int {
	k, size := 0, -1
	for k < len(idx) && k < w {
		size += len(b.rows[idx[k]]) + 1
		if k > 0 && size > MarkerTrustBytes {
			break
		}
		k++
	}
	return k
}

// halve settles the rows x, which hold a refused row, half by half: it
// sends the halves, left first; a half that fails is settled, and a half
// whose sibling on the left went in whole is known to hold the fault and
// is halved without being sent. A single row is sent on its own.
func (b *bisector) halve(x []int) error {
	if len(x) == 1 {
		_, err := b.attempt(x)
		return err
	}
	mid := len(x) / 2
	before := len(b.refused)
	if _, err := b.attempt(x[:mid]); err != nil {
		return err
	}
	if len(b.refused) == before {
		return b.halve(x[mid:]) // the left half went in: the fault is on the right
	}
	_, err := b.attempt(x[mid:])
	return err
}

// attempt sends idx and settles it; it reports whether idx went in whole.
func (b *bisector) attempt(idx []int) (bool, error) {
	res, ok, err := b.send(idx)
	if err != nil || ok {
		return ok, err
	}
	return false, b.settle(idx, res, len(idx))
}

// send sends the rows idx. ok: they are in. A data error is returned as
// res; any other failure as a *BisectError (its Unsettled filled by
// Bisect).
func (b *bisector) send(idx []int) (res Result, ok bool, err error) {
	if err := b.ctx.Err(); err != nil {
		return Result{}, false, &BisectError{Result: Result{Class: ClassTransient, Err: err, Message: err.Error()}}
	}
	rows := make([][]byte, len(idx))
	for i, j := range idx {
		rows[i] = b.rows[j]
	}
	res = b.insert(b.ctx, idx, rows)
	switch {
	case res.OK():
		for _, j := range idx {
			b.state[j] = rowInserted
		}
		return res, true, nil
	case res.Class != ClassData:
		return res, false, &BisectError{Result: res}
	}
	return res, false, nil
}

func (b *bisector) refuse(i int, res Result) {
	b.state[i] = rowRefused
	b.refused = append(b.refused, Refused{Index: i, Row: b.rows[i], Result: res})
}

// bodyBytes is the size of the request body of idx: rows and newlines.
func (b *bisector) bodyBytes(idx []int) int {
	n := len(idx) - 1
	for _, i := range idx {
		n += len(b.rows[i])
	}
	return n
}

var atRow = []byte("(at row ")

// namedRow returns the row (from 1) that res names by its last "(at row
// N)", 0 when it names none of the n rows it answers. ClickHouse appends
// the marker after the rows it quotes, followed by a newline or nothing,
// and a quoted row cannot hold a newline (a JSON string has none and rows
// are split at them), so a marker that a row's text imitates is not taken;
// nor is one cut off with the end of a long message. trusted: the request
// (of body bytes) was small enough for the number to count from its first
// row (MarkerTrustBytes), or held one row, which the answer is about
// whatever its size: a refused row over MarkerTrustBytes was sent alone
// again and again, for ever, holding its batch back.
func namedRow(res Result, body, n int) (row int, trusted bool) {
	msg := []byte(res.Message)
	i := bytes.LastIndex(msg, atRow)
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len(atRow):]
	end := bytes.IndexByte(rest, ')')
	if end < 0 || (end+1 < len(rest) && rest[end+1] != '\n') {
		return 0, false
	}
	row, err := strconv.Atoi(string(rest[:end]))
	if err != nil || row < 1 || row > n {
		return 0, false
	}
	return row, body <= MarkerTrustBytes || n == 1
}
