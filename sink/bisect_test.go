package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"testing"
)

// fakeTable is an Inserter over an in-memory table: a batch holding a bad
// row is refused whole with a data error, any other batch goes in. Like
// 18.16 it names the first bad row of the request ("(at row N)"), unless
// noMarker is set; with chunkRows, it counts rows from the start of a
// chunk of that many rows, as newer servers do when they parse a large
// body in parallel.
type fakeTable struct {
	t         *testing.T
	bad       map[int]bool
	noMarker  bool
	chunkRows int
	inserted  []int // row numbers, in insert order
	requests  int
	sent      int // rows sent, over all requests
	// answer, when set, overrides the answer to request number n (from 1).
	answer func(n int) (Result, bool)
}

func rowsN(n int) [][]byte {
	rows := make([][]byte, n)
	for i := range rows {
		rows[i] = fmt.Appendf(nil, `{"i":%d}`, i)
	}
	return rows
}

// bigRowsN returns n rows of about size bytes each.
func bigRowsN(n, size int) [][]byte {
	rows := make([][]byte, n)
	for i := range rows {
		rows[i] = fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), size))
	}
	return rows
}

func rowNumber(t *testing.T, row []byte) int {
	t.Helper()
	s := row[len(`{"i":`):]
	end := bytes.IndexAny(s, ",}")
	n, err := strconv.Atoi(string(s[:end]))
	if err != nil {
		t.Fatalf("row %q: %v", row, err)
	}
	return n
}

// refusal is the answer of 18.16 to a row it cannot parse at position
// pos (from 1) of its request.
func refusal(pos int) Result {
	return Result{Status: 500, Code: 27, Class: ClassData,
		Message: fmt.Sprintf("Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected \" before: bad: (while read the value of key n): (at row %d)\n, e.what() = DB::Exception", pos)}
}

// inserter is insert as an Inserter.
func (f *fakeTable) inserter(ctx context.Context, _ []int, rows [][]byte) Result {
	return f.insert(ctx, rows)
}

func (f *fakeTable) insert(_ context.Context, rows [][]byte) Result {
	f.requests++
	f.sent += len(rows)
	if f.answer != nil {
		if res, ok := f.answer(f.requests); ok {
			return res
		}
	}
	for k, r := range rows {
		if f.bad[rowNumber(f.t, r)] {
			switch {
			case f.noMarker:
				return Result{Status: 500, Code: 27, Class: ClassData, Message: "Code: 27, e.displayText() = DB::Exception: Cannot parse input"}
			case f.chunkRows > 0:
				return refusal(k%f.chunkRows + 1)
			}
			return refusal(k + 1)
		}
	}
	for _, r := range rows {
		f.inserted = append(f.inserted, rowNumber(f.t, r))
	}
	return Result{Status: 200, Class: ClassOK}
}

// first returns the answer of the table to the whole batch of n rows,
// without counting it as a request of Bisect's.
func (f *fakeTable) first(rows [][]byte) Result {
	res := f.insert(context.Background(), rows)
	f.requests--
	f.sent -= len(rows)
	if res.OK() {
		f.t.Fatal("the first answer went in: no bad row")
	}
	return res
}

// checkSettled checks that every row not in unsettled is inserted once or
// refused (with the answer of a request that named it or held it alone),
// that unsettled rows were never inserted, and that each refused row is
// bad.
func (f *fakeTable) checkSettled(t *testing.T, n int, unsettled []int, refused []Refused) {
	t.Helper()
	seen := make(map[int]int)
	for _, i := range f.inserted {
		seen[i]++
	}
	keep := make(map[int]bool)
	for k, i := range unsettled {
		if k > 0 && unsettled[k-1] >= i {
			t.Errorf("unsettled rows out of order: %d after %d", i, unsettled[k-1])
		}
		keep[i] = true
	}
	ref := make(map[int]bool)
	for k, r := range refused {
		if k > 0 && refused[k-1].Index >= r.Index {
			t.Errorf("refused rows out of order: %d after %d", r.Index, refused[k-1].Index)
		}
		if !f.bad[r.Index] {
			t.Errorf("row %d refused, but it is good", r.Index)
		}
		if got := rowNumber(t, r.Row); got != r.Index {
			t.Errorf("refused row %d carries row %d", r.Index, got)
		}
		if r.Result.Class != ClassData {
			t.Errorf("refused row %d: class %s, want data", r.Index, r.Result.Class)
		}
		ref[r.Index] = true
	}
	for i := 0; i < n; i++ {
		switch {
		case keep[i] && (seen[i] != 0 || ref[i]):
			t.Errorf("unsettled row %d: inserted %d times, refused %v", i, seen[i], ref[i])
		case !keep[i] && f.bad[i] && !ref[i]:
			t.Errorf("bad row %d neither refused nor left for later", i)
		case !keep[i] && !f.bad[i] && seen[i] != 1:
			t.Errorf("good row %d inserted %d times, want 1", i, seen[i])
		}
	}
}

func TestBisect_oneBadRowAmongThousand(t *testing.T) {
	const n = 1000
	halving := 2*bits.Len(uint(n-1)) + 1 // 2*ceil(log2 n)+1
	for _, noMarker := range []bool{false, true} {
		maxRequests := 2 // the rows after it, then the rows before it
		if noMarker {
			maxRequests = halving
		}
		for _, bad := range []int{0, 1, 499, 500, 617, 998, 999} {
			f := &fakeTable{t: t, bad: map[int]bool{bad: true}, noMarker: noMarker}
			rows := rowsN(n)
			refused, err := Bisect(context.Background(), f.inserter, rows, f.first(rows))
			if err != nil {
				t.Fatalf("bad row %d: %v", bad, err)
			}
			if len(refused) != 1 || refused[0].Index != bad {
				t.Fatalf("bad row %d: refused %+v", bad, refused)
			}
			if len(f.inserted) != n-1 {
				t.Errorf("bad row %d: inserted %d rows, want %d", bad, len(f.inserted), n-1)
			}
			if f.requests > maxRequests {
				t.Errorf("bad row %d, no marker %v: %d requests, want at most %d", bad, noMarker, f.requests, maxRequests)
			}
			f.checkSettled(t, n, nil, refused)
		}
	}
}

func TestBisect_everyPlacement(t *testing.T) {
	for _, noMarker := range []bool{false, true} {
		for n := 1; n <= 24; n++ {
			for a := 0; a < n; a++ {
				for b := a; b < n; b++ { // a == b: one bad row
					f := &fakeTable{t: t, bad: map[int]bool{a: true, b: true}, noMarker: noMarker}
					rows := rowsN(n)
					refused, err := Bisect(context.Background(), f.inserter, rows, f.first(rows))
					if err != nil {
						t.Fatalf("n=%d bad=%d,%d: %v", n, a, b, err)
					}
					if want := len(f.bad); len(refused) != want {
						t.Fatalf("n=%d bad=%d,%d no marker %v: refused %d rows, want %d", n, a, b, noMarker, len(refused), want)
					}
					f.checkSettled(t, n, nil, refused)
				}
			}
		}
	}
}

// TestBisect_runsOfBadRows checks the cost of many bad rows when the
// answers name them: one request per bad row at most, plus one for the
// rows put aside, and small requests: rows sent grow with the rows, not
// with their square.
func TestBisect_runsOfBadRows(t *testing.T) {
	const n = 3000
	for _, every := range []int{1, 2, 3, 10} { // row i is good when i%every == 0, for every > 1
		f := &fakeTable{t: t, bad: map[int]bool{}}
		for i := 0; i < n; i++ {
			if every == 1 || i%every != 0 {
				f.bad[i] = true
			}
		}
		rows := rowsN(n)
		refused, err := Bisect(context.Background(), f.inserter, rows, f.first(rows))
		if err != nil {
			t.Fatal(err)
		}
		if len(refused) != len(f.bad) {
			t.Fatalf("every %d: refused %d, want %d", every, len(refused), len(f.bad))
		}
		if max := len(f.bad) + 1; f.requests > max {
			t.Errorf("every %d: %d requests for %d bad rows, want at most %d", every, f.requests, len(f.bad), max)
		}
		if max := 20 * n; f.sent > max {
			t.Errorf("every %d: %d rows sent for %d, want at most %d", every, f.sent, n, max)
		}
		f.checkSettled(t, n, nil, refused)
	}
}

// TestBisect_chunkRelativeNumbers checks that a large request whose row
// numbers count from a chunk's start, not the request's, never gets a
// good row refused.
func TestBisect_chunkRelativeNumbers(t *testing.T) {
	rows := bigRowsN(3000, 1000) // about 3 MiB
	f := &fakeTable{t: t, bad: map[int]bool{1100: true, 1500: true, 2999: true}, chunkRows: 1000}
	refused, err := Bisect(context.Background(), f.inserter, rows, f.first(rows))
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 3 {
		t.Fatalf("refused %d rows, want 3", len(refused))
	}
	f.checkSettled(t, len(rows), nil, refused)
}

func TestBisect_allBad(t *testing.T) {
	const n = 9
	for _, noMarker := range []bool{false, true} {
		f := &fakeTable{t: t, bad: map[int]bool{}, noMarker: noMarker}
		for i := 0; i < n; i++ {
			f.bad[i] = true
		}
		rows := rowsN(n)
		refused, err := Bisect(context.Background(), f.inserter, rows, f.first(rows))
		if err != nil || len(refused) != n {
			t.Fatalf("got %d refused, %v; want %d, nil", len(refused), err, n)
		}
		if f.requests > 2*n {
			t.Errorf("%d requests for %d bad rows, want at most %d", f.requests, n, 2*n)
		}
		f.checkSettled(t, n, nil, refused)
	}
}

// A batch of one row refused is that row's answer: nothing is sent again.
func TestBisect_singleRowNotSentAgain(t *testing.T) {
	f := &fakeTable{t: t, bad: map[int]bool{0: true}, noMarker: true}
	rows := rowsN(1)
	refused, err := Bisect(context.Background(), f.inserter, rows, f.first(rows))
	if err != nil || len(refused) != 1 || f.requests != 0 {
		t.Fatalf("got refused %+v, err %v, %d requests; want row 0, nil, 0", refused, err, f.requests)
	}
}

// A refused row over MarkerTrustBytes (a put may carry 1.5 MiB) is
// refused after a few requests, alone or among others: its own answer
// names it, whatever its size. It was sent alone again for ever.
func TestBisect_bigRowRefused(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		rows := bigRowsN(n, MarkerTrustBytes+1000)
		f := &fakeTable{t: t, bad: map[int]bool{0: true}}
		ctx, cancel := context.WithCancel(context.Background())
		const limit = 50
		ins := func(ctx context.Context, idx []int, part [][]byte) Result {
			if f.requests >= limit {
				cancel()
			}
			return f.inserter(ctx, idx, part)
		}
		refused, err := Bisect(ctx, ins, rows, f.first(rows))
		cancel()
		if err != nil || len(refused) != 1 || refused[0].Index != 0 {
			t.Fatalf("%d rows of over 1 MiB, the first bad: refused %+v, err %v after %d requests; want row 0", n, refused, err, f.requests)
		}
		if f.requests > 2*n {
			t.Errorf("%d rows: %d requests, want at most %d", n, f.requests, 2*n)
		}
		f.checkSettled(t, n, nil, refused)
	}
}

// Without the batch's answer, a single row is sent on its own.
func TestBisect_noRefusalGiven(t *testing.T) {
	f := &fakeTable{t: t, bad: map[int]bool{0: true, 5: true}}
	refused, err := Bisect(context.Background(), f.inserter, rowsN(8), Result{})
	if err != nil || len(refused) != 2 {
		t.Fatalf("got refused %+v, err %v; want rows 0 and 5", refused, err)
	}
	f.checkSettled(t, 8, nil, refused)
}

func TestBisect_empty(t *testing.T) {
	f := &fakeTable{t: t}
	refused, err := Bisect(context.Background(), f.inserter, nil, refusal(1))
	if refused != nil || err != nil || f.requests != 0 {
		t.Fatalf("got %v, %v, %d requests", refused, err, f.requests)
	}
}

// A batch refused once but whose halves all go in (a flaky server, a proxy
// limit) ends with every row in and nothing refused.
func TestBisect_halvesAllGoIn(t *testing.T) {
	const n = 10
	f := &fakeTable{t: t, bad: map[int]bool{}}
	refused, err := Bisect(context.Background(), f.inserter, rowsN(n), Result{Status: 413, Class: ClassData, Message: "too large"})
	if err != nil || len(refused) != 0 || len(f.inserted) != n {
		t.Fatalf("got refused %v, err %v, %d inserted", refused, err, len(f.inserted))
	}
	f.checkSettled(t, n, nil, refused)
}

// Rows put aside that fail together at the end are settled again: here
// the first try of them is refused without a name, once.
func TestBisect_rowsPutAsideFail(t *testing.T) {
	const n = 100
	f := &fakeTable{t: t, bad: map[int]bool{40: true}}
	rows := rowsN(n)
	first := f.first(rows)
	f.answer = func(k int) (Result, bool) {
		if k == 2 { // 1: the rows after row 40; 2: the 40 before it
			return Result{Status: 500, Code: 241, Class: ClassData, Message: "Code: 241, memory"}, true
		}
		return Result{}, false
	}
	refused, err := Bisect(context.Background(), f.inserter, rows, first)
	if err != nil || len(refused) != 1 || refused[0].Index != 40 {
		t.Fatalf("got refused %+v, err %v; want row 40", refused, err)
	}
	f.checkSettled(t, n, nil, refused)
}

func TestBisect_transientStops(t *testing.T) {
	const n = 64
	for _, noMarker := range []bool{false, true} {
		for stopAt := 1; stopAt <= 12; stopAt++ {
			for _, class := range []Class{ClassTransient, ClassConfig} {
				f := &fakeTable{t: t, bad: map[int]bool{5: true, 40: true, 41: true}, noMarker: noMarker}
				rows := rowsN(n)
				first := f.first(rows)
				f.answer = func(k int) (Result, bool) {
					if k == stopAt {
						return Result{Status: 500, Code: 252, Class: class, Message: "Code: 252 too many parts"}, true
					}
					return Result{}, false
				}
				refused, err := Bisect(context.Background(), f.inserter, rows, first)
				var be *BisectError
				if !errors.As(err, &be) {
					if err == nil && f.requests < stopAt {
						continue // finished before the failing request
					}
					t.Fatalf("stop at %d (%s): got %v, want a *BisectError", stopAt, class, err)
				}
				if be.Result.Class != class || be.Result.Code != 252 {
					t.Errorf("stop at %d: stopping result %+v", stopAt, be.Result)
				}
				if f.requests != stopAt {
					t.Errorf("stop at %d: %d requests made, want %d", stopAt, f.requests, stopAt)
				}
				if len(be.Unsettled) == 0 {
					t.Errorf("stop at %d: no row unsettled", stopAt)
				}
				f.checkSettled(t, n, be.Unsettled, refused)
			}
		}
	}
}

func TestBisect_contextEnds(t *testing.T) {
	const n = 32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeTable{t: t, bad: map[int]bool{3: true, 20: true}, noMarker: true}
	rows := rowsN(n)
	first := f.first(rows)
	f.answer = func(k int) (Result, bool) {
		if k == 3 {
			cancel()
		}
		return Result{}, false
	}
	refused, err := Bisect(ctx, f.inserter, rows, first)
	var be *BisectError
	if !errors.As(err, &be) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want a *BisectError wrapping context.Canceled", err)
	}
	if f.requests != 3 {
		t.Errorf("%d requests, want 3: none after the context ended", f.requests)
	}
	f.checkSettled(t, n, be.Unsettled, refused)
}

func TestBisect_namedRow(t *testing.T) {
	msg := func(s string) Result { return Result{Class: ClassData, Message: s} }
	tests := []struct {
		name    string
		res     Result
		body, n int
		row     int
		trusted bool
	}{
		{"18.16", refusal(7), 100, 10, 7, true},
		{"newer server", msg("Code: 27. DB::Exception: Cannot parse input: (at row 3)\n: While executing ParallelParsingBlockInputFormat"), 100, 10, 3, true},
		{"at the end", msg("Code: 117, Unknown field found while parsing JSONEachRow format: zz: (at row 2)"), 100, 10, 2, true},
		{"large request", refusal(7), MarkerTrustBytes + 1, 10, 7, false},
		{"one large row", refusal(1), MarkerTrustBytes + 1, 1, 1, true},
		{"past the rows", refusal(11), 100, 10, 0, false},
		{"row 0", refusal(0), 100, 10, 0, false},
		{"none", msg("Code: 27, Cannot parse input"), 100, 10, 0, false},
		{"a row's text, then the real one", msg(`Code: 27, before: {"s":"(at row 1)"}: (at row 4)` + "\n, e.what()"), 100, 10, 4, true},
		{"a row's text in a cut message", msg(`Code: 27, before: {"s":"(at row 1)","t":"xxxx...`), 100, 10, 0, false},
		{"not a number", msg("(at row x)\n"), 100, 10, 0, false},
	}
	for _, tt := range tests {
		row, trusted := namedRow(tt.res, tt.body, tt.n)
		if row != tt.row || trusted != tt.trusted {
			t.Errorf("%s: got row %d trusted %v, want %d %v", tt.name, row, trusted, tt.row, tt.trusted)
		}
	}
}
