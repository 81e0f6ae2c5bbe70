// Package bench owns the put benchmark behind `chute bench`: a load loop that
// drives any etcd-API server with the real clientv3 (N putters sharing C
// client connections round-robin) and reports puts/s and p50/p99 latency; a
// no-op etcd KV gRPC server that answers Put without doing anything (the
// ceiling of the machine); and the matrix mode behind `make bench`, which
// starts chute and the no-op server as child processes of the same binary and
// benchmarks both in one run. With --trace the matrix adds a second chute
// node that samples every call and exports its spans over OTLP/gRPC to a
// sink in the bench process that counts and discards them, so one run
// measures what tracing costs and shows that spans really flowed.
//
// Invariants:
//   - Every run is bounded: by its put count, by Config.Duration when set, by
//     a hard cap of MaxRunDuration, and every single put by Config.PutTimeout.
//   - Run owns its goroutines (one per putter) and its clientv3 clients; all
//     have ended and been closed when Run returns.
//   - Latencies are recorded per putter into a slice only that putter writes,
//     and merged after the putters have stopped: no shared state on the hot
//     path but one atomic counter.
//   - The matrix owns its child processes: they are stopped (SIGTERM, then
//     SIGKILL) and waited for on every return path, including errors and
//     signals. It owns the span sink too, and stops it after the children,
//     which flush their spans as they stop.
//   - No child inherits the bench's OTEL_* variables: only the traced node
//     traces, and only to the sink.
//   - A traced run's spans are counted once all are in (one per KV call) or
//     the sink has been quiet for longer than the exporter's batch delay;
//     a traced node that sends none fails the matrix.
package bench
