package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ID is the id of put n of producer p: p<<32 | n. n must stay below 2^32.
func ID(p int, n uint64) uint64 { return uint64(p)<<32 | n&0xffffffff }

// SplitID returns the producer and counter of an id made by ID.
func SplitID(id uint64) (p int, n uint64) { return int(id >> 32), id & 0xffffffff }

// Result is how one put ended.
type Result uint8

const (
	// Acked: the server answered OK.
	Acked Result = iota + 1
	// Failed: the server (or the client library, for an endpoint it
	// cannot reach) answered an error; Outcome.Code says which.
	Failed
	// TimedOut: no answer came before the put's deadline.
	TimedOut
)

func (r Result) String() string {
	switch r {
	case Acked:
		return "acked"
	case Failed:
		return "failed"
	case TimedOut:
		return "timed out"
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// Outcome is how the put of one id ended. The puts of one transaction
// share their outcome and times.
type Outcome struct {
	ID       uint64
	Producer int
	Result   Result
	// Code is the gRPC code of a Failed put, DeadlineExceeded for a
	// TimedOut one, OK for an Acked one.
	Code codes.Code
	// Start is when the request was sent, End when its answer (or its
	// deadline) came.
	Start, End time.Time
}

// Refused reports whether the server said for certain that it did not
// take the put: InvalidArgument (a request it refuses) or
// ResourceExhausted (over a queue's byte cap). Such a put must never
// land.
func (o Outcome) Refused() bool {
	return o.Result == Failed && (o.Code == codes.InvalidArgument || o.Code == codes.ResourceExhausted)
}

// Log is the outcomes of a workload, in the order their answers came.
type Log []Outcome

// Count returns how many outcomes ended with r.
func (l Log) Count(r Result) int {
	n := 0
	for _, o := range l {
		if o.Result == r {
			n++
		}
	}
	return n
}

// Codes counts the Failed outcomes by gRPC code.
func (l Log) Codes() map[codes.Code]int {
	m := make(map[codes.Code]int)
	for _, o := range l {
		if o.Result == Failed {
			m[o.Code]++
		}
	}
	return m
}

// AckedIDs returns the ids of the Acked outcomes.
func (l Log) AckedIDs() []uint64 {
	var ids []uint64
	for _, o := range l {
		if o.Result == Acked {
			ids = append(ids, o.ID)
		}
	}
	return ids
}

// AckedOverlapping counts the Acked puts sent before to whose answer came
// at or after from: the puts a node may have acknowledged in [from, to].
func (l Log) AckedOverlapping(from, to time.Time) int {
	n := 0
	for _, o := range l {
		if o.Result == Acked && o.Start.Before(to) && !o.End.Before(from) {
			n++
		}
	}
	return n
}

// Between returns the outcomes of puts sent at or after from and before
// to.
func (l Log) Between(from, to time.Time) Log {
	var out Log
	for _, o := range l {
		if !o.Start.Before(from) && o.Start.Before(to) {
			out = append(out, o)
		}
	}
	return out
}

// classify turns a clientv3 error into a Result and gRPC code. clientv3
// turns the errors etcd names into rpctypes.EtcdError values and a call's
// own deadline into context.DeadlineExceeded.
func classify(err error) (Result, codes.Code) {
	var ee rpctypes.EtcdError
	switch {
	case err == nil:
		return Acked, codes.OK
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut, codes.DeadlineExceeded
	case errors.As(err, &ee):
		return Failed, ee.Code()
	}
	c := status.Code(err)
	if c == codes.DeadlineExceeded {
		return TimedOut, c
	}
	return Failed, c
}
