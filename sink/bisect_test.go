package sink

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"testing"
)

// fakeTable is an Inserter over an in-memory table: a batch holding a bad
// row is refused whole with a data error, any other batch goes in.
type fakeTable struct {
	t        *testing.T
	bad      map[int]bool
	inserted []int // row numbers, in insert order
	requests int
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

func rowNumber(t *testing.T, row []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(row[len(`{"i":`) : len(row)-1]))
	if err != nil {
		t.Fatalf("row %q: %v", row, err)
	}
	return n
}

func (f *fakeTable) insert(_ context.Context, rows [][]byte) Result {
	f.requests++
	if f.answer != nil {
		if res, ok := f.answer(f.requests); ok {
			return res
		}
	}
	for _, r := range rows {
		if f.bad[rowNumber(f.t, r)] {
			return Result{Status: 500, Code: 27, Class: ClassData, Message: "Code: 27 (at row 1)"}
		}
	}
	for _, r := range rows {
		f.inserted = append(f.inserted, rowNumber(f.t, r))
	}
	return Result{Status: 200, Class: ClassOK}
}

// checkSettled checks that rows[:settled] are each inserted once or refused
// and rows[settled:] were never inserted, and that inserts came in order.
func (f *fakeTable) checkSettled(t *testing.T, n, settled int, refused []Refused) {
	t.Helper()
	seen := make(map[int]int)
	prev := -1
	for _, i := range f.inserted {
		seen[i]++
		if i <= prev {
			t.Errorf("row %d inserted after row %d: not oldest first", i, prev)
		}
		prev = i
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
		case i < settled && f.bad[i] && !ref[i]:
			t.Errorf("bad row %d neither refused nor left for later", i)
		case i < settled && !f.bad[i] && seen[i] != 1:
			t.Errorf("good row %d inserted %d times, want 1", i, seen[i])
		case i >= settled && (seen[i] != 0 || ref[i]):
			t.Errorf("row %d after the settled prefix %d: inserted %d times, refused %v", i, settled, seen[i], ref[i])
		}
	}
}

func TestBisect_oneBadRowAmongThousand(t *testing.T) {
	const n = 1000
	maxRequests := 2*bits.Len(uint(n-1)) + 1 // 2*ceil(log2 n)+1
	for _, bad := range []int{0, 1, 499, 500, 617, 998, 999} {
		f := &fakeTable{t: t, bad: map[int]bool{bad: true}}
		refused, err := Bisect(context.Background(), f.insert, rowsN(n))
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
			t.Errorf("bad row %d: %d requests, want at most %d", bad, f.requests, maxRequests)
		}
		f.checkSettled(t, n, n, refused)
	}
}

func TestBisect_everyPlacement(t *testing.T) {
	for n := 1; n <= 24; n++ {
		for a := 0; a < n; a++ {
			for b := a; b < n; b++ { // a == b: one bad row
				f := &fakeTable{t: t, bad: map[int]bool{a: true, b: true}}
				refused, err := Bisect(context.Background(), f.insert, rowsN(n))
				if err != nil {
					t.Fatalf("n=%d bad=%d,%d: %v", n, a, b, err)
				}
				if want := len(f.bad); len(refused) != want {
					t.Fatalf("n=%d bad=%d,%d: refused %d rows, want %d", n, a, b, len(refused), want)
				}
				f.checkSettled(t, n, n, refused)
			}
		}
	}
}

func TestBisect_allBad(t *testing.T) {
	const n = 9
	f := &fakeTable{t: t, bad: map[int]bool{}}
	for i := 0; i < n; i++ {
		f.bad[i] = true
	}
	refused, err := Bisect(context.Background(), f.insert, rowsN(n))
	if err != nil || len(refused) != n {
		t.Fatalf("got %d refused, %v; want %d, nil", len(refused), err, n)
	}
	if f.requests > 2*n {
		t.Errorf("%d requests for %d bad rows, want at most %d", f.requests, n, 2*n)
	}
	f.checkSettled(t, n, n, refused)
}

func TestBisect_singleRowIsSentOnce(t *testing.T) {
	f := &fakeTable{t: t, bad: map[int]bool{0: true}}
	refused, err := Bisect(context.Background(), f.insert, rowsN(1))
	if err != nil || len(refused) != 1 || f.requests != 1 {
		t.Fatalf("got refused %+v, err %v, %d requests; want row 0, nil, 1", refused, err, f.requests)
	}
}

func TestBisect_empty(t *testing.T) {
	f := &fakeTable{t: t}
	refused, err := Bisect(context.Background(), f.insert, nil)
	if refused != nil || err != nil || f.requests != 0 {
		t.Fatalf("got %v, %v, %d requests", refused, err, f.requests)
	}
}

// A batch refused once but whose halves all go in (a flaky server, a proxy
// limit) ends with every row in and nothing refused.
func TestBisect_halvesAllGoIn(t *testing.T) {
	const n = 10
	f := &fakeTable{t: t, bad: map[int]bool{}}
	refused, err := Bisect(context.Background(), f.insert, rowsN(n))
	if err != nil || len(refused) != 0 || len(f.inserted) != n {
		t.Fatalf("got refused %v, err %v, %d inserted", refused, err, len(f.inserted))
	}
	f.checkSettled(t, n, n, refused)
}

func TestBisect_transientStops(t *testing.T) {
	const n = 64
	for stopAt := 1; stopAt <= 12; stopAt++ {
		for _, class := range []Class{ClassTransient, ClassConfig} {
			f := &fakeTable{t: t, bad: map[int]bool{5: true, 40: true}}
			f.answer = func(k int) (Result, bool) {
				if k == stopAt {
					return Result{Status: 500, Code: 252, Class: class, Message: "Code: 252 too many parts"}, true
				}
				return Result{}, false
			}
			refused, err := Bisect(context.Background(), f.insert, rowsN(n))
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
			f.checkSettled(t, n, be.Settled, refused)
		}
	}
}

func TestBisect_contextEnds(t *testing.T) {
	const n = 32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeTable{t: t, bad: map[int]bool{3: true}}
	f.answer = func(k int) (Result, bool) {
		if k == 3 {
			cancel()
		}
		return Result{}, false
	}
	refused, err := Bisect(ctx, f.insert, rowsN(n))
	var be *BisectError
	if !errors.As(err, &be) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want a *BisectError wrapping context.Canceled", err)
	}
	if f.requests != 3 {
		t.Errorf("%d requests, want 3: none after the context ended", f.requests)
	}
	f.checkSettled(t, n, be.Settled, refused)
}

func TestBisectRange_first(t *testing.T) {
	const n = 37
	f := &fakeTable{t: t, bad: map[int]bool{20: true}}
	all := rowsN(n)
	_, err := BisectRange(context.Background(), func(ctx context.Context, first int, rows [][]byte) Result {
		if got := rowNumber(t, rows[0]); got != first {
			t.Errorf("first = %d, but the rows start with row %d", first, got)
		}
		if len(rows) != cap(rows) {
			t.Errorf("rows[%d:] has spare capacity %d: an append would overwrite the caller's rows", first, cap(rows)-len(rows))
		}
		return f.insert(ctx, rows)
	}, all)
	if err != nil {
		t.Fatal(err)
	}
}
