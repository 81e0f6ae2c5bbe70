package faults

import (
	"errors"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// at returns out answered at revision rev.
func at(rev int64, out KVOutput) KVOutput {
	out.Revision = rev
	return out
}

// ev is the event of a put of v to k at rev, the key's version-th.
func ev(k, v string, rev, created, version int64) WatchEvent {
	return WatchEvent{Key: k, Value: v, ModRevision: rev, CreateRevision: created, Version: version}
}

// watchHistory is a history of three writes (a swap that failed in
// between) and the stream that reports it.
func watchHistory() ([]porcupine.Operation, []WatchEvent) {
	ops := historyOf(
		op{0, put("a", "1"), 0, 1, at(2, KVOutput{})},
		op{1, put("b", "2"), 0, 1, at(3, KVOutput{})},
		op{0, cas("a", "x", "3"), 2, 3, at(3, swapped(false))},
		op{1, cas("a", "1", "4"), 4, 5, at(4, swapped(true))},
		op{2, put("b", "5"), 6, 7, unknown()},
	).Operations()
	s := []WatchEvent{ev("a", "1", 2, 2, 1), ev("b", "2", 3, 3, 1), ev("a", "4", 4, 2, 2), ev("b", "5", 5, 3, 2)}
	return ops, s
}

func TestCheckWatch(t *testing.T) {
	ops, good := watchHistory()
	edit := func(f func(s []WatchEvent) []WatchEvent) []WatchEvent {
		return f(append([]WatchEvent(nil), good...))
	}
	for _, tc := range []struct {
		name    string
		streams [][]WatchEvent
		last    int64
		want    string // a finding's text; empty: passes
	}{
		{"the same events on every stream", [][]WatchEvent{good, good, good}, 5, ""},
		{"no streams", nil, 5, "no streams"},
		{"a stream with nothing", [][]WatchEvent{good, nil}, 5, "stream 1: no events"},
		{"ends early", [][]WatchEvent{good, good[:3]}, 5, "stream 1: ends at revision 4, want 5"},
		{"a gap", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent { return append(s[:1], s[2:]...) })}, 5,
			"stream 0: revisions 3 to 3 missing"},
		{"an event twice", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent { return append(s[:2], s[1:]...) })}, 5,
			"stream 0: event 2 has revision 3 after 3"},
		{"out of order", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent { s[1], s[2] = s[2], s[1]; return s })}, 5,
			"stream 0: event 2 has revision 3 after 4"},
		{"streams differ", [][]WatchEvent{good, edit(func(s []WatchEvent) []WatchEvent { s[3].Version = 3; return s })}, 5,
			"stream 1: revision 5 gives b version 3, want 2"},
		{"a value no one wrote", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent { s[3].Value = "9"; return s })}, 5,
			`puts "9" to b, which no operation wrote`},
		{"a swap that answered not swapped", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent {
			s[3].Key, s[3].Value = "a", "3"
			s[3].CreateRevision = 2
			s[3].Version = 3
			return s
		})}, 5,
			"whose compare-and-swap answered not swapped"},
		{"an acknowledged write missing", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent {
			s[2].Value = "5"
			s[2].Key = "b"
			s[2].CreateRevision = 3
			s[3].Value = "x"
			return s[:3]
		})}, 4,
			`acknowledged write of "4" to a (revision 4) is in no event`},
		{"an acknowledged write at another revision", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent {
			s[0], s[1] = ev("b", "2", 2, 2, 1), ev("a", "1", 3, 3, 1)
			s[2].CreateRevision, s[3].CreateRevision = 3, 2
			return s
		})}, 5, `acknowledged write of "1" to a answered revision 2, its event has 3`},
		{"a creation revision changed", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent { s[2].CreateRevision = 4; return s })}, 5,
			"revision 4 gives a creation revision 4, want 2"},
		{"a delete", [][]WatchEvent{edit(func(s []WatchEvent) []WatchEvent { s[3] = WatchEvent{Key: "b", Delete: true, ModRevision: 5}; return s })}, 5,
			"revision 5 deletes b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFinding(t, "CheckWatch", CheckWatch(tc.streams, ops, tc.last), ErrWatchBroken, tc.want)
		})
	}
}

func TestCheckWatch_boundsFindings(t *testing.T) {
	ops, _ := watchHistory()
	var s []WatchEvent
	for i := range 30 {
		s = append(s, ev("z", "nobody", int64(2*i+2), 2, int64(i+1)))
	}
	err := CheckWatch([][]WatchEvent{s}, ops, s[len(s)-1].ModRevision)
	if err == nil || !strings.Contains(err.Error(), "more") || strings.Count(err.Error(), "\n") != maxFindings+1 {
		t.Fatalf("CheckWatch: %v, want %d findings and how many more", err, maxFindings)
	}
}

func TestCheckRevisions(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []op
		want string
	}{
		{"in order", []op{
			{0, put("a", "1"), 0, 1, at(2, KVOutput{})},
			{1, get("a"), 2, 3, at(2, found("1"))},
			{0, cas("a", "1", "2"), 4, 5, at(3, swapped(true))},
			{1, cas("a", "1", "3"), 6, 7, at(3, swapped(false))},
		}, ""},
		{"concurrent operations in either order", []op{
			{0, put("a", "1"), 0, 10, at(3, KVOutput{})},
			{1, put("b", "1"), 1, 2, at(2, KVOutput{})},
			{2, get("b"), 3, 4, at(2, found("1"))},
		}, ""},
		{"unknown outcomes are left out", []op{
			{0, put("a", "1"), 0, 1, at(5, KVOutput{})},
			{1, put("a", "2"), 2, 3, unknown()},
		}, ""},
		{"a get behind a write", []op{
			{0, put("a", "1"), 0, 1, at(5, KVOutput{})},
			{1, get("b"), 2, 3, at(4, KVOutput{})},
		}, `get(b) -> none at revision 4 began after put(a, "1") -> ok at revision 5 returned`},
		{"a write at the revision of an earlier read", []op{
			{1, get("b"), 0, 1, at(4, KVOutput{})},
			{0, put("a", "1"), 2, 3, at(4, KVOutput{})},
		}, `put(a, "1") -> ok at revision 4 began after get(b) -> none at revision 4 returned`},
		{"the highest earlier revision counts", []op{
			{0, put("a", "1"), 0, 1, at(7, KVOutput{})},
			{1, put("a", "2"), 0, 2, at(6, KVOutput{})},
			{2, cas("a", "2", "3"), 3, 4, at(6, swapped(false))},
		}, "at revision 6 began after put(a, \"1\") -> ok at revision 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFinding(t, "CheckRevisions", CheckRevisions(historyOf(tc.ops...).Operations()), ErrRevisionOrder, tc.want)
		})
	}
}

// wantFinding fails the test unless err, check's result, is nil when
// want is empty, or sentinel saying want.
func wantFinding(t *testing.T, check string, err, sentinel error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("%s: %v, want nil", check, err)
		}
		return
	}
	if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %v, want %v saying %q", check, err, sentinel, want)
	}
}
