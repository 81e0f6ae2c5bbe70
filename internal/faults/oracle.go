package faults

import (
	"errors"
	"fmt"
	"slices"
)

// Verdict is what Judge found comparing a workload's outcomes with the
// ids a table holds. Id lists are sorted.
type Verdict struct {
	Puts, Acked, Failed, TimedOut int
	// Rows is how many rows of the workload's ids the table holds; IDs how
	// many distinct ids.
	Rows, IDs int
	// Lost are acknowledged ids absent from the table.
	Lost []uint64
	// Duplicated are ids the table holds more than once; Extra counts the
	// rows beyond the first of each.
	Duplicated []uint64
	Extra      int
	// Indeterminate counts failed or timed-out puts whose row landed.
	Indeterminate int
	// RefusedLanded are ids whose put was refused with a definite code
	// (Outcome.Refused) yet landed.
	RefusedLanded []uint64
	// Unknown are ids in the table that no put of the log carried.
	Unknown []uint64
}

// Judge compares the outcomes of log with found, the number of rows of
// each id in the table (ids absent or with 0 rows were not inserted). An
// id put more than once in log counts by its last outcome.
func Judge(log Log, found map[uint64]int) Verdict {
	last := make(map[uint64]Outcome, len(log))
	for _, o := range log {
		last[o.ID] = o
	}
	var v Verdict
	for id, o := range last {
		v.Puts++
		n := found[id]
		switch o.Result {
		case Acked:
			v.Acked++
			if n == 0 {
				v.Lost = append(v.Lost, id)
			}
		case Failed:
			v.Failed++
		case TimedOut:
			v.TimedOut++
		}
		if o.Result != Acked && n > 0 {
			v.Indeterminate++
			if o.Refused() {
				v.RefusedLanded = append(v.RefusedLanded, id)
			}
		}
	}
	for id, n := range found {
		if n <= 0 {
			continue
		}
		if _, ok := last[id]; !ok {
			v.Unknown = append(v.Unknown, id)
			continue
		}
		v.Rows += n
		v.IDs++
		if n > 1 {
			v.Duplicated = append(v.Duplicated, id)
			v.Extra += n - 1
		}
	}
	slices.Sort(v.Lost)
	slices.Sort(v.Duplicated)
	slices.Sort(v.RefusedLanded)
	slices.Sort(v.Unknown)
	return v
}

// JudgeReceipts is Judge for a plain queue: an acknowledged put is
// satisfied once a consumer received its message and a node answered OK
// to its acknowledgement, and the deliveries of an id beyond the first
// are its extra copies (Receipts.Found).
func JudgeReceipts(log Log, r Receipts) Verdict { return Judge(log, r.Found()) }

// Check fails when more than maxLost acknowledged ids are lost, more than
// maxDuplicates extra copies landed, or any refused put landed or unknown
// id appeared. A negative bound is no bound.
func (v Verdict) Check(maxLost, maxDuplicates int) error {
	var errs []error
	if maxLost >= 0 && len(v.Lost) > maxLost {
		errs = append(errs, fmt.Errorf("lost %d acknowledged ids, want at most %d: %s", len(v.Lost), maxLost, showIDs(v.Lost)))
	}
	if maxDuplicates >= 0 && v.Extra > maxDuplicates {
		errs = append(errs, fmt.Errorf("%d extra copies of %d ids, want at most %d: %s", v.Extra, len(v.Duplicated), maxDuplicates, showIDs(v.Duplicated)))
	}
	if len(v.RefusedLanded) > 0 {
		errs = append(errs, fmt.Errorf("%d puts refused with InvalidArgument or ResourceExhausted landed anyway: %s", len(v.RefusedLanded), showIDs(v.RefusedLanded)))
	}
	if len(v.Unknown) > 0 {
		errs = append(errs, fmt.Errorf("%d ids in the table were never put: %s", len(v.Unknown), showIDs(v.Unknown)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("faults: %v: %w", v, err)
	}
	return nil
}

func (v Verdict) String() string {
	return fmt.Sprintf("puts %d (acked %d, failed %d, timed out %d); table %d rows of %d ids; lost %d, extra copies %d of %d ids, indeterminate %d, refused landed %d, unknown %d",
		v.Puts, v.Acked, v.Failed, v.TimedOut, v.Rows, v.IDs, len(v.Lost), v.Extra, len(v.Duplicated), v.Indeterminate, len(v.RefusedLanded), len(v.Unknown))
}

// showIDs names the first few ids as producer-n.
func showIDs(ids []uint64) string {
	const show = 8
	s := "["
	for i, id := range ids[:min(show, len(ids))] {
		if i > 0 {
			s += " "
		}
		p, n := SplitID(id)
		s += fmt.Sprintf("%d-%d", p, n)
	}
	if len(ids) > show {
		s += fmt.Sprintf(" and %d more", len(ids)-show)
	}
	return s + "]"
}
