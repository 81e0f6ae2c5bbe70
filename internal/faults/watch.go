package faults

import (
	"errors"
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// WatchEvent is one event a watcher of the register history's keys
// received, in the order it came.
type WatchEvent struct {
	Key, Value     string
	Delete         bool
	ModRevision    int64
	CreateRevision int64
	Version        int64
}

// ErrWatchBroken is CheckWatch's error for streams that break one of
// etcd's watch guarantees or disagree with the history.
var ErrWatchBroken = errors.New("faults: watch streams break a guarantee")

// ErrRevisionOrder is CheckRevisions' error for answers whose revisions
// go against real time.
var ErrRevisionOrder = errors.New("faults: revisions go against real time")

// maxFindings bounds the findings a check reports.
const maxFindings = 10

// findings collects what a check found, up to maxFindings.
type findings struct {
	errs []error
	more int
}

func (f *findings) add(format string, args ...any) {
	if len(f.errs) == maxFindings {
		f.more++
		return
	}
	f.errs = append(f.errs, fmt.Errorf(format, args...))
}

func (f *findings) err(sentinel error) error {
	if len(f.errs) == 0 {
		return nil
	}
	errs := append([]error{sentinel}, f.errs...)
	if f.more > 0 {
		errs = append(errs, fmt.Errorf("and %d more", f.more))
	}
	return errors.Join(errs...)
}

// CheckWatch checks streams, each what one watcher of every key of ops
// received from revision 1 until it saw last (the store's revision once
// the history ended), against etcd's watch guarantees and against ops, a
// register history (History) whose writes are the store's only ones and
// write distinct values:
//
//   - ordered and unique: revisions strictly increase along a stream;
//   - reliable: a stream has every revision from its first to last (each
//     write is one key and one revision), and every stream has the same
//     events;
//   - true to the key space: a key's versions count up from one from its
//     creation revision, an event's value is one some write wrote (never
//     that of a compare-and-swap that answered not swapped), at most once,
//     and every acknowledged write is there at the revision its answer
//     gave (KVOutput.Revision).
//
// It returns nil, or ErrWatchBroken joined with what it found.
func CheckWatch(streams [][]WatchEvent, ops []porcupine.Operation, last int64) error {
	var f findings
	if len(streams) == 0 {
		f.add("no streams")
		return f.err(ErrWatchBroken)
	}
	writes := make(map[[2]string]porcupine.Operation)
	for _, op := range ops {
		in := op.Input.(KVInput)
		if in.Op != Get {
			writes[[2]string{in.Key, in.Value}] = op
		}
	}
	for i, s := range streams {
		checkStream(&f, i, s, last, writes)
		if i > 0 {
			compareStreams(&f, i, s, streams[0])
		}
	}
	// Every acknowledged write is in the (first) stream at its revision.
	at := make(map[[2]string]int64, len(streams[0]))
	for _, ev := range streams[0] {
		at[[2]string{ev.Key, ev.Value}] = ev.ModRevision
	}
	for kv, op := range writes {
		out := op.Output.(KVOutput)
		if out.Unknown || (op.Input.(KVInput).Op == CAS && !out.Swapped) {
			continue
		}
		rev, ok := at[kv]
		switch {
		case !ok:
			f.add("acknowledged write of %q to %s (revision %d) is in no event", kv[1], kv[0], out.Revision)
		case rev != out.Revision:
			f.add("acknowledged write of %q to %s answered revision %d, its event has %d", kv[1], kv[0], out.Revision, rev)
		}
	}
	return f.err(ErrWatchBroken)
}

// checkStream checks one stream on its own.
func checkStream(f *findings, i int, s []WatchEvent, last int64, writes map[[2]string]porcupine.Operation) {
	if len(s) == 0 {
		f.add("stream %d: no events", i)
		return
	}
	if end := s[len(s)-1].ModRevision; end != last {
		f.add("stream %d: ends at revision %d, want %d", i, end, last)
	}
	version := make(map[string]int64)
	created := make(map[string]int64)
	for j, ev := range s {
		if j > 0 {
			prev := s[j-1].ModRevision
			switch {
			case ev.ModRevision <= prev:
				f.add("stream %d: event %d has revision %d after %d", i, j, ev.ModRevision, prev)
			case ev.ModRevision != prev+1:
				f.add("stream %d: revisions %d to %d missing", i, prev+1, ev.ModRevision-1)
			}
		}
		if ev.Delete {
			f.add("stream %d: revision %d deletes %s, which no operation does", i, ev.ModRevision, ev.Key)
			continue
		}
		if want := version[ev.Key] + 1; ev.Version != want && version[ev.Key] > 0 {
			f.add("stream %d: revision %d gives %s version %d, want %d", i, ev.ModRevision, ev.Key, ev.Version, want)
		}
		if ev.Version == 1 {
			created[ev.Key] = ev.ModRevision
			if ev.CreateRevision != ev.ModRevision {
				f.add("stream %d: revision %d creates %s with creation revision %d", i, ev.ModRevision, ev.Key, ev.CreateRevision)
			}
		} else if c, ok := created[ev.Key]; ok && ev.CreateRevision != c {
			f.add("stream %d: revision %d gives %s creation revision %d, want %d", i, ev.ModRevision, ev.Key, ev.CreateRevision, c)
		}
		version[ev.Key] = ev.Version
		op, ok := writes[[2]string{ev.Key, ev.Value}]
		switch {
		case !ok:
			f.add("stream %d: revision %d puts %q to %s, which no operation wrote", i, ev.ModRevision, ev.Value, ev.Key)
		case op.Input.(KVInput).Op == CAS && !op.Output.(KVOutput).Unknown && !op.Output.(KVOutput).Swapped:
			f.add("stream %d: revision %d puts %q to %s, whose compare-and-swap answered not swapped", i, ev.ModRevision, ev.Value, ev.Key)
		}
	}
}

// compareStreams reports the first event where s differs from ref.
func compareStreams(f *findings, i int, s, ref []WatchEvent) {
	for j := range min(len(s), len(ref)) {
		if s[j] != ref[j] {
			f.add("stream %d: event %d is %+v, stream 0 has %+v", i, j, s[j], ref[j])
			return
		}
	}
	if len(s) != len(ref) {
		f.add("stream %d: %d events, stream 0 has %d", i, len(s), len(ref))
	}
}

// CheckRevisions checks that the revisions of answered operations follow
// real time, as etcd's do: an operation that began after another
// returned answers a revision at least as high, and higher when it
// wrote. A get's or a compare-and-swap's revision (KVOutput.Revision) is
// the one the key space was read at, a put's the one it created;
// operations of unknown outcome are left out. It returns nil, or
// ErrRevisionOrder joined with what it found.
func CheckRevisions(ops []porcupine.Operation) error {
	var answered []porcupine.Operation
	for _, op := range ops {
		if !op.Output.(KVOutput).Unknown {
			answered = append(answered, op)
		}
	}
	byReturn := append([]porcupine.Operation(nil), answered...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].Return < byReturn[j].Return })
	sort.Slice(answered, func(i, j int) bool { return answered[i].Call < answered[j].Call })
	var f findings
	var done int // byReturn[:done] returned before the current call
	var high *porcupine.Operation
	for _, op := range answered {
		for ; done < len(byReturn) && byReturn[done].Return < op.Call; done++ {
			if high == nil || revisionOf(byReturn[done]) > revisionOf(*high) {
				high = &byReturn[done]
			}
		}
		if high == nil {
			continue
		}
		rev, before := revisionOf(op), revisionOf(*high)
		if rev < before || (rev == before && wrote(op)) {
			f.add("%s at revision %d began after %s at revision %d returned",
				describe(op), rev, describe(*high), before)
		}
	}
	return f.err(ErrRevisionOrder)
}

func revisionOf(op porcupine.Operation) int64 { return op.Output.(KVOutput).Revision }

// wrote reports whether an answered operation changed the key space.
func wrote(op porcupine.Operation) bool {
	switch op.Input.(KVInput).Op {
	case Put:
		return true
	case CAS:
		return op.Output.(KVOutput).Swapped
	}
	return false
}

// describe names an operation as the visualization does.
func describe(op porcupine.Operation) string {
	return KVModel().DescribeOperation(op.Input, op.Output)
}
