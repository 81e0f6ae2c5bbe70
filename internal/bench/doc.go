// Package bench owns the benchmark behind chute-bench: a load loop that
// drives any etcd-API server or cluster with the real clientv3 (N putters
// sharing C client connections round-robin, each call a unary put or a txn
// of K puts, paced or not) and reports puts/s and p50/p99/p99.9 call
// latency; with ClickHouse tables, puts become rows of ch: queues and the
// run waits until every row is counted in ClickHouse, reporting rows/s and
// put-to-row latency; a no-op etcd KV gRPC server that answers Put and Txn
// without doing anything (the floor of the API path); raw JSONEachRow
// inserts of the same rows straight to ClickHouse, unpaced (the ceiling of
// the sink) and paced at a chute run's rate in large batches (the
// ClickHouse floor of that run); the memory a queued row costs a node
// that cannot reach ClickHouse; the fsyncs of a node's queue log and the
// puts each covered, read from its /metrics around the measured phase,
// next to a node started with --unsafe-no-fsync; and the matrix mode
// behind `make bench`, which starts chute nodes (the chute binary) and
// the no-op server (chute-bench itself, so chute does not link the
// benchmark) as child processes, samples their resident memory and the
// CPU time of every process a run involves (each node, the ClickHouse
// server, the bench itself), checks the targets (targets.go) and writes a
// markdown report.
//
// The targets are CPU per row of each process as ratios to floors
// measured in the same bench, so that what the shared machine does
// meanwhile weighs on both sides. Targets 1 to 3 read the default node,
// which fsyncs its queue log, as users run it; the --unsafe-no-fsync
// node is only the other side of target 5. The ClickHouse process is
// the one --clickhouse-pid names, else the one that listens on the
// URL's port (chproc.go); the client's CPU is the whole bench process,
// as goroutines are not bound to threads: what else it serves during a
// run (row counts, proxies, the span sink) is in it. With --trace the matrix adds a chute node that samples every
// call and exports its spans over OTLP/gRPC to a sink in the bench
// process that counts and discards them, so one run measures what
// tracing costs and shows that spans really flowed. Its compression
// cells run the one-node txn cell on nodes started with each
// --clickhouse-compression value, each inserting through a TCP proxy in
// the bench process that counts the bytes it forwards: bytes on the wire
// to ClickHouse per row next to the CPU the node and ClickHouse spent.
//
// Files: config.go (Config), run.go (Run: dial, claim, probe, warmup,
// measured phase), load.go (the putters), payload.go (keys and rows),
// landing.go (counting rows in ClickHouse, put-to-row latency),
// clickhouse.go (its HTTP interface), rawinsert.go, floor.go (the
// ClickHouse floors), memory.go, rss.go, cpu.go, chproc.go (the
// processes metered besides the nodes), repeat.go (the median of a cell's runs), queuelog.go (a
// node's queue log counters), etcd.go and kvgroup.go (plain keys to
// chute and to etcd 3.4, three members each), status.go (a node's
// /status and /metrics), progress.go, matrix.go (the children and the
// plans), cluster.go (data directories, a three-node group and its
// readiness), compression.go (the compression group) and wireproxy.go
// (its counting proxy), targets.go, report.go and reportdoc.go,
// machine.go, noop.go, otlpsink.go, flags.go and main.go.
//
// Invariants:
//   - Every run is bounded: by its put count, by Config.Duration when set, by
//     a hard cap of MaxRunDuration, every single call by Config.PutTimeout,
//     and the wait for its rows by Config.LandTimeout. A floor is bounded
//     by its row count and MaxRunDuration.
//   - A floor posts as many rows as its chute run landed, at that run's
//     rows/s, with the same schema and values, its rows counted as a watched
//     run, so that the two differ in how the rows reach ClickHouse alone.
//   - Run owns its goroutines (one per putter, the row watch, the progress
//     line) and its clientv3 clients; all have ended and been closed when
//     Run returns, and the tables it created have been dropped.
//   - Latencies and acknowledgements are recorded per putter into slices
//     only that putter writes, and merged after the putters have stopped:
//     no shared state on the hot path but one atomic counter.
//   - A watched run's rows are counted from the start of its measured
//     phase, after the warmup's rows (and the claims') are all in; rows of
//     a table are taken to land in the order their calls were answered.
//   - The matrix owns its child processes: they are stopped (SIGTERM, then
//     SIGKILL) and waited for on every return path, including errors and
//     signals, and each group's before the next group starts. It owns the
//     span sink too, and stops it after the children, which flush their
//     spans as they stop.
//   - The compression group owns its wire proxies: they are stopped,
//     and their connections closed and goroutines ended, on every
//     return path, after the group's nodes, which may still be
//     inserting through them. The bench's own ClickHouse queries never
//     go through a proxy, so a proxy counts only what its node sent.
//   - Every chute child keeps its raft log and snapshots in its own
//     --data-dir, in a fresh directory per group under the matrix's
//     temporary directory; a group's directory is removed once its
//     children are gone, the temporary directory when the matrix ends.
//   - A three-node group is measured only once every node is ready
//     (/readyz 200: it knows the raft leader and applied the log), not
//     merely once gossip shows the three alive.
//   - No child inherits the bench's OTEL_* variables: only the traced node
//     traces, and only to the sink.
//   - A traced run's spans are counted once all are in (one per KV call) or
//     the sink has been quiet for longer than the exporter's batch delay;
//     a traced node that sends none fails the matrix.
//   - A three-node run whose claiming node does not dispatch every queue
//     afterwards fails the matrix: its puts were not all forwarded.
//   - A one-node run that reads its node's queue log fails the matrix
//     when the counters are missing from /metrics or contradict the
//     node's flags: fsyncs by the --unsafe-no-fsync node, or records
//     and no fsync by the other.
//   - Progress lines go only to Config.Progress, which Main sets when
//     stderr is a terminal or --progress is given: tests print nothing.
package bench
