package bench

import (
	"math"
	"slices"
	"time"
)

// Result is the outcome of one measured run. Durations marshal to JSON as
// integer nanoseconds.
type Result struct {
	// Server labels the server measured, e.g. ServerChute or ServerNoop.
	Server  string `json:"server"`
	Clients int    `json:"clients"`
	// Conns is the number of connections actually opened (at most Clients).
	Conns   int `json:"conns"`
	KeySize int `json:"key_size"`
	ValSize int `json:"val_size"`

	// Puts is the number of measured puts that succeeded.
	Puts int64 `json:"puts"`
	// Errors is the number of measured puts that failed.
	Errors int64 `json:"errors"`
	// FirstError is the text of one failure (the first seen by the first
	// putter that failed), empty when none.
	FirstError string `json:"first_error,omitempty"`

	// Elapsed is the wall time of the measured phase.
	Elapsed time.Duration `json:"elapsed_ns"`
	// PutsPerSec is Puts divided by Elapsed.
	PutsPerSec float64 `json:"puts_per_sec"`
	// P50 and P99 are nearest-rank percentiles of successful put latencies.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`

	// Trace is set on a run against a traced server. Nil: not traced.
	Trace *TraceCount `json:"trace,omitempty"`
}

// TraceCount shows that a traced run was traced: the spans the bench's OTLP
// sink received for it, next to the KV calls it made.
type TraceCount struct {
	// Spans is what the sink received from the run's start until the
	// server had exported all of them, or sent none for a while.
	Spans int64 `json:"spans"`
	// Calls is the KV calls the run made: connection probes, warmup and
	// measured puts. At 100% sampling each has one server span, so Spans
	// below Calls means the server's exporter dropped spans.
	Calls int64 `json:"calls"`
}

// percentiles sorts lat in place and returns its nearest-rank p50 and p99;
// zeros when lat is empty.
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return nearestRank(lat, 0.50), nearestRank(lat, 0.99)
}

// nearestRank returns the q-quantile of sorted, which must not be empty.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
