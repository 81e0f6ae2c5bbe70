package faults

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// KVOp is the kind of one operation of a register history.
type KVOp uint8

const (
	// Get reads a key (a linearizable Range of one key).
	Get KVOp = iota + 1
	// Put writes a value to a key.
	Put
	// CAS is a Txn that puts Value when the key's value equals Expect
	// (If Value(key) == Expect Then Put); a missing key fails the compare,
	// as in etcd.
	CAS
)

func (o KVOp) String() string {
	switch o {
	case Get:
		return "get"
	case Put:
		return "put"
	case CAS:
		return "cas"
	}
	return fmt.Sprintf("KVOp(%d)", uint8(o))
}

// KVInput is what a client asked.
type KVInput struct {
	Op     KVOp
	Key    string
	Value  string // Put and CAS: the value written
	Expect string // CAS: the value compared
}

// KVOutput is what the server answered. An operation without a definite
// answer (an error or no answer in time) has Unknown set and nothing
// else: it may or may not have taken effect.
type KVOutput struct {
	Unknown bool
	Found   bool   // Get: the key exists
	Value   string // Get: its value
	Swapped bool   // CAS: the compare held and the put was done
	// Revision is the answer's: the store's revision a get or a
	// compare-and-swap read at, or the one a put or a swap created
	// (0 when not recorded). The model ignores it; CheckRevisions and
	// CheckWatch use it.
	Revision int64
}

// kvState is one key's register: its value, if it exists.
type kvState struct {
	found bool
	value string
}

// KVModel is porcupine's model of a key space of independent registers,
// partitioned by key: every key is checked on its own, which keeps the
// search small. An operation of unknown outcome is recorded with a
// return time after every other (see History.Add), so the checker may
// place it anywhere after its call, including after everything, where
// it changes nothing: "may or may not have happened".
func KVModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() any { return kvState{} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(kvState), input.(KVInput), output.(KVOutput)
			switch in.Op {
			case Get:
				if out.Unknown {
					return true, s
				}
				return out.Found == s.found && (!s.found || out.Value == s.value), s
			case Put:
				return true, kvState{found: true, value: in.Value}
			case CAS:
				holds := s.found && s.value == in.Expect
				if out.Unknown {
					if holds {
						return true, kvState{found: true, value: in.Value}
					}
					return true, s
				}
				if out.Swapped != holds {
					return false, s
				}
				if holds {
					return true, kvState{found: true, value: in.Value}
				}
				return true, s
			}
			return false, s
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(KVInput), output.(KVOutput)
			res := "?"
			switch {
			case out.Unknown:
			case in.Op == Get && out.Found:
				res = fmt.Sprintf("%q", out.Value)
			case in.Op == Get:
				res = "none"
			case in.Op == Put:
				res = "ok"
			case out.Swapped:
				res = "swapped"
			default:
				res = "not swapped"
			}
			switch in.Op {
			case Put:
				return fmt.Sprintf("put(%s, %q) -> %s", in.Key, in.Value, res)
			case CAS:
				return fmt.Sprintf("cas(%s, %q -> %q) -> %s", in.Key, in.Expect, in.Value, res)
			}
			return fmt.Sprintf("get(%s) -> %s", in.Key, res)
		},
		DescribeState: func(state any) string {
			s := state.(kvState)
			if !s.found {
				return "none"
			}
			return fmt.Sprintf("%q", s.value)
		},
	}
}

// partitionByKey splits a history into one history per key, in key
// order.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := make(map[string][]porcupine.Operation)
	for _, op := range history {
		k := op.Input.(KVInput).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// unknownReturn is the return time of an operation of unknown outcome:
// after every other operation of any history.
const unknownReturn = math.MaxInt64

// History records the operations of concurrent clients for the checker.
// Its methods may be called from any goroutine.
type History struct {
	start time.Time

	mu  sync.Mutex // guards ops
	ops []porcupine.Operation
}

// NewHistory returns an empty history whose times count from now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the time to give Add as an operation's call or return: the
// monotonic clock since the history began.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records one operation of client (numbered from 0), called at call
// and answered at ret (both from Now). A Get of unknown outcome is left
// out, as a read that never answered constrains nothing; any other
// operation of unknown outcome returns, for the checker, after
// everything else.
func (h *History) Add(client int, in KVInput, call, ret int64, out KVOutput) {
	if out.Unknown {
		if in.Op == Get {
			return
		}
		ret = unknownReturn
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// Operations returns a copy of the operations recorded so far.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// ErrNotLinearizable is CheckKV's error for a history no order of the
// operations explains.
var ErrNotLinearizable = errors.New("faults: history is not linearizable")

// ErrCheckTimeout is CheckKV's error when the checker gave up: the
// history is neither proven linearizable nor proven not.
var ErrCheckTimeout = errors.New("faults: linearizability check timed out")

// CheckKV checks ops against KVModel within timeout (zero: no bound).
// It returns nil when the history is linearizable, ErrNotLinearizable
// or ErrCheckTimeout otherwise. When vizPath is not empty and the check
// did not pass, it writes porcupine's visualization (HTML) there.
func CheckKV(ops []porcupine.Operation, timeout time.Duration, vizPath string) error {
	model := KVModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	var err error
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		err = ErrNotLinearizable
	default:
		err = ErrCheckTimeout
	}
	if vizPath != "" {
		if verr := porcupine.VisualizePath(model, info, vizPath); verr != nil {
			return errors.Join(err, fmt.Errorf("faults: visualization: %w", verr))
		}
	}
	return err
}
