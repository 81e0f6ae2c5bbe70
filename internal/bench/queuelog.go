package bench

import (
	"context"
	"errors"
	"fmt"

	"chute/internal/nodeprobe"
)

// The counters of a chute node's queue log on its /metrics.
const (
	metricQueueLogFsyncs   = "chute_queue_log_fsyncs_total"
	metricQueueLogAppended = "chute_queue_log_appended_total"
)

// errQueueLog marks a node whose queue log counters are missing, or
// contradict how it was started: its figures would not be the cell's.
var errQueueLog = errors.New("bench: queue log counters")

// QueueLogCount is what a chute node's queue log did during a run's
// measured phase: the difference of its counters read from /metrics just
// before the phase and once its calls had all returned.
type QueueLogCount struct {
	// Fsyncs and Records are the fsyncs of the log and the records
	// appended to it (one per put the node kept).
	Fsyncs  int64 `json:"fsyncs"`
	Records int64 `json:"records"`
	// FsyncsPerSec is Fsyncs over the measured phase's wall time.
	FsyncsPerSec float64 `json:"fsyncs_per_sec"`
	// RecordsPerFsync is Records over Fsyncs, the puts one fsync covered;
	// zero without fsyncs.
	RecordsPerFsync float64 `json:"records_per_fsync"`
}

// queueLogCounters are the cumulative counters of a node's queue log.
type queueLogCounters struct {
	fsyncs, records int64
}

// parseQueueLog reads the queue log counters of m, a node's /metrics; a
// node without them (no --data-dir, or a chute without the metrics) is
// errQueueLog.
func parseQueueLog(m nodeprobe.Metrics) (queueLogCounters, error) {
	f, okF := m.Sum(metricQueueLogFsyncs)
	r, okR := m.Sum(metricQueueLogAppended)
	if !okF || !okR {
		return queueLogCounters{}, fmt.Errorf("%w: /metrics has no %s and %s", errQueueLog, metricQueueLogFsyncs, metricQueueLogAppended)
	}
	return queueLogCounters{fsyncs: int64(f), records: int64(r)}, nil
}

// readQueueLog reads the queue log counters of the node whose metrics
// listener is addr.
func readQueueLog(ctx context.Context, addr string) (queueLogCounters, error) {
	m, err := fetchMetrics(ctx, addr)
	if err != nil {
		return queueLogCounters{}, err
	}
	c, err := parseQueueLog(m)
	if err != nil {
		return c, fmt.Errorf("%w (node %s)", err, addr)
	}
	return c, nil
}

// queueLogCount is what the log did between the counters before and
// after a measured phase of r.Elapsed. It fails when the log fsynced
// although the node was started without fsync, or appended records
// without an fsync although it was started with: a node started otherwise
// than its cell says.
func queueLogCount(before, after queueLogCounters, r Result, noFsync bool) (*QueueLogCount, error) {
	q := &QueueLogCount{Fsyncs: after.fsyncs - before.fsyncs, Records: after.records - before.records}
	switch {
	case noFsync && q.Fsyncs > 0:
		return nil, fmt.Errorf("%w: %d fsyncs by a node started with --unsafe-no-fsync", errQueueLog, q.Fsyncs)
	case !noFsync && q.Records > 0 && q.Fsyncs == 0:
		return nil, fmt.Errorf("%w: %d records and no fsync by a node started to fsync", errQueueLog, q.Records)
	}
	if s := r.Elapsed.Seconds(); s > 0 {
		q.FsyncsPerSec = float64(q.Fsyncs) / s
	}
	if q.Fsyncs > 0 {
		q.RecordsPerFsync = float64(q.Records) / float64(q.Fsyncs)
	}
	return q, nil
}
