package faults

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// op is one operation of a test history, at integer times.
type op struct {
	client    int
	in        KVInput
	call, ret int64
	out       KVOutput
}

func historyOf(ops ...op) *History {
	h := NewHistory()
	for _, o := range ops {
		h.Add(o.client, o.in, o.call, o.ret, o.out)
	}
	return h
}

func get(k string) KVInput       { return KVInput{Op: Get, Key: k} }
func put(k, v string) KVInput    { return KVInput{Op: Put, Key: k, Value: v} }
func cas(k, x, v string) KVInput { return KVInput{Op: CAS, Key: k, Expect: x, Value: v} }
func found(v string) KVOutput    { return KVOutput{Found: true, Value: v} }
func swapped(ok bool) KVOutput   { return KVOutput{Swapped: ok} }
func unknown() KVOutput          { return KVOutput{Unknown: true} }

func TestCheckKV(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []op
		want error
	}{
		{"empty", nil, nil},
		{"sequential", []op{
			{0, put("a", "1"), 0, 1, KVOutput{}},
			{1, get("a"), 2, 3, found("1")},
			{0, cas("a", "1", "2"), 4, 5, swapped(true)},
			{1, cas("a", "1", "3"), 6, 7, swapped(false)},
			{1, get("a"), 8, 9, found("2")},
		}, nil},
		{"concurrent reads either side of a put", []op{
			{0, put("a", "1"), 0, 10, KVOutput{}},
			{1, get("a"), 1, 2, KVOutput{}},
			{2, get("a"), 3, 4, found("1")},
		}, nil},
		{"stale read", []op{
			{0, put("a", "1"), 0, 1, KVOutput{}},
			{0, put("a", "2"), 2, 3, KVOutput{}},
			{1, get("a"), 4, 5, found("1")},
		}, ErrNotLinearizable},
		{"read of a value never written", []op{
			{1, get("a"), 0, 1, found("x")},
		}, ErrNotLinearizable},
		{"read goes back in time", []op{
			{0, put("a", "1"), 0, 10, KVOutput{}},
			{1, get("a"), 1, 2, found("1")},
			{2, get("a"), 3, 4, KVOutput{}},
		}, ErrNotLinearizable},
		{"two CAS from one value both swap", []op{
			{0, put("a", "1"), 0, 1, KVOutput{}},
			{1, cas("a", "1", "2"), 2, 5, swapped(true)},
			{2, cas("a", "1", "3"), 2, 5, swapped(true)},
		}, ErrNotLinearizable},
		{"CAS on a missing key swaps", []op{
			{1, cas("a", "", "2"), 0, 1, swapped(true)},
		}, ErrNotLinearizable},
		{"unknown put seen later", []op{
			{0, put("a", "1"), 0, 1, unknown()},
			{1, get("a"), 5, 6, found("1")},
		}, nil},
		{"unknown put never seen", []op{
			{0, put("a", "1"), 0, 1, unknown()},
			{1, get("a"), 5, 6, KVOutput{}},
		}, nil},
		{"unknown put seen then unseen", []op{
			{0, put("a", "1"), 0, 1, unknown()},
			{1, get("a"), 5, 6, found("1")},
			{1, get("a"), 7, 8, KVOutput{}},
		}, ErrNotLinearizable},
		{"unknown CAS applied", []op{
			{0, put("a", "1"), 0, 1, KVOutput{}},
			{0, cas("a", "1", "2"), 2, 3, unknown()},
			{1, get("a"), 5, 6, found("2")},
		}, nil},
		{"unknown get is left out", []op{
			{0, put("a", "1"), 0, 1, KVOutput{}},
			{1, get("a"), 2, 3, unknown()},
		}, nil},
		{"keys are independent", []op{
			{0, put("a", "1"), 0, 1, KVOutput{}},
			{1, put("b", "2"), 0, 1, KVOutput{}},
			{2, get("b"), 2, 3, found("2")},
			{2, get("a"), 4, 5, found("2")},
		}, ErrNotLinearizable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			viz := filepath.Join(t.TempDir(), "history.html")
			h := historyOf(tc.ops...)
			err := CheckKV(h.Operations(), 0, viz)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("CheckKV: got %v, want %v", err, tc.want)
			}
			_, statErr := os.Stat(viz)
			if wantViz := tc.want != nil; wantViz != (statErr == nil) {
				t.Errorf("visualization written: got %v, want %v", statErr == nil, wantViz)
			}
		})
	}
}

func TestHistory_Add_unknownReturnsLast(t *testing.T) {
	h := NewHistory()
	h.Add(0, put("a", "1"), 5, 6, unknown())
	ops := h.Operations()
	if len(ops) != 1 || ops[0].Return != unknownReturn {
		t.Fatalf("got %+v, want one operation returning at %d", ops, int64(unknownReturn))
	}
}

func TestKVModel_DescribeOperation(t *testing.T) {
	m := KVModel()
	for _, tc := range []struct {
		in   KVInput
		out  KVOutput
		want string
	}{
		{get("a"), found("1"), `get(a) -> "1"`},
		{get("a"), KVOutput{}, `get(a) -> none`},
		{put("a", "1"), unknown(), `put(a, "1") -> ?`},
		{cas("a", "1", "2"), swapped(false), `cas(a, "1" -> "2") -> not swapped`},
	} {
		if got := m.DescribeOperation(tc.in, tc.out); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
