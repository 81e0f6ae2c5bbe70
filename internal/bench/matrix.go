package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"chute/internal/nodeprobe"
)

const (
	// childStopGrace is how long a matrix child has to exit after SIGTERM
	// before it is killed.
	childStopGrace = 5 * time.Second
	// traceQuiet is how long the sink must receive no span before a traced
	// run's spans count as all exported: longer than the 5 s schedule
	// delay of the batch span processor, which the traced node keeps.
	traceQuiet = 6 * time.Second
	// traceSettleLimit bounds the wait for a traced run's spans.
	traceSettleLimit = 30 * time.Second
	// defaultMatrixTxn is the txn size of the ClickHouse plan's txn cells
	// when none is asked for: chute's --max-txn-ops.
	defaultMatrixTxn = 128
)

// errNoSpans marks a traced node that exported nothing: its figures would
// be an untraced node's under the traced label.
var errNoSpans = errors.New("bench: traced node sent no spans")

// errNotDispatcher marks a three-node run whose queues were not all
// dispatched by the node that claimed them: its producers' puts were not
// all forwarded, so its figures are not those of the cell.
var errNotDispatcher = errors.New("bench: the claiming node does not dispatch every queue")

// matrixConfig is the `--matrix` mode: which binary to start, how to load it.
type matrixConfig struct {
	// chute is the chute binary the nodes run.
	chute string
	// self is the binary the no-op server runs (as `noop-server`): this
	// benchmark's own, which links the no-op server and chute does not.
	self string
	// base is the run config; Endpoints, Tables, KeyPrefix and the call
	// shape are set per run, and Clients in the plan without ClickHouse.
	base Config
	// clients are the client counts of the plan without ClickHouse, each
	// run against every server.
	clients []int
	// nodeArgs are appended to the chute nodes' command lines.
	nodeArgs []string
	// readyTimeout bounds each child's wait until it answers a put, and a
	// cluster's until every node sees the others alive.
	readyTimeout time.Duration
	// childOutput receives every child's stdout and stderr.
	childOutput io.Writer
	// trace adds a chute node that samples every call and exports its
	// spans over OTLP/gRPC to a sink in this process; it is measured after
	// the untraced node. No child inherits this process's OTEL_*
	// variables, so no other node traces.
	trace bool
	// clickhouseURL, when set, selects the ClickHouse plan (see
	// runClickHouseMatrix) and is given to the chute nodes that insert.
	clickhouseURL string
	// clickhousePID is the process of the ClickHouse at clickhouseURL,
	// whose CPU the ClickHouse plan meters; zero: the process listening
	// on the URL's port, found through /proc (clickHousePID), and none
	// when that fails.
	clickhousePID int
	// queues is the number of queues (tables) of each run of the
	// ClickHouse plan; zero means one.
	queues int
	// txn is the puts per txn of the ClickHouse plan's txn cells; zero
	// means 128.
	txn int
	// rawPosters is the number of concurrent posters of the raw inserts;
	// zero means 2.
	rawPosters int
	// memRows caps the rows the memory cell queues; zero means 100000.
	memRows int
	// countSpan is how long the ClickHouse plan counts an empty table to
	// see what the counts cost ClickHouse; zero means countCostSpan.
	countSpan time.Duration
	// etcd, in the ClickHouse plan, is the etcd binary whose three-member
	// cluster is the KV group's floor. Empty: no KV group.
	etcd string
	// compression are the --clickhouse-compression values of the
	// compression cells of the ClickHouse plan, one cell each, in this
	// order; empty: no compression cells.
	compression []string
	// repeat is how many times the compared cells run, each reported
	// as the median of its runs: every cell of the plan without
	// ClickHouse; in the ClickHouse plan the untraced unary and txn cells
	// of one node (with fsync and without) and of three nodes, their
	// no-op and ClickHouse floors, the KV cells and the memory cell.
	// Zero or one: once.
	repeat int
}

// matrixOutcome is what a matrix measured.
type matrixOutcome struct {
	results []Result
	raw     *RawResult
	floors  []RawResult
	count   *CountCost
	memory  *MemoryResult
}

// target is one server of the matrix.
type target struct {
	name     string
	endpoint string   // what the clients dial
	metrics  string   // a chute node's metrics listener; empty for the no-op server
	exe      string   // the child's executable
	argv     []string // the child's command line after the executable
	env      []string // the child's environment
	// sink receives the target's spans; nil: the target is not traced.
	sink *otlpSink
	proc *child
}

// runMatrix runs the matrix mc asks for: without a ClickHouse URL, the
// no-op server and a chute node (and, with mc.trace, a traced node) at
// every client count of mc.clients; with one, the ClickHouse plan. Every
// child is stopped and waited for before it returns, and the span sink
// after them. On error it returns what was measured so far.
func runMatrix(ctx context.Context, mc matrixConfig, logger *slog.Logger) (out matrixOutcome, err error) {
	dir, err := os.MkdirTemp("", "chute-bench-")
	if err != nil {
		return out, fmt.Errorf("bench: node directory: %w", err)
	}
	defer func() {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			logger.Warn("cannot remove node directory", "dir", dir, "err", rmErr)
		}
	}()
	var sink *otlpSink
	if mc.trace {
		if sink, err = startOTLPSink(); err != nil {
			return out, err
		}
		// Deferred before the children's stop, so it runs after it: a
		// node flushes its spans when it stops.
		defer func() {
			if err := sink.stop(childStopGrace); err != nil {
				logger.Warn("otlp sink did not stop cleanly", "err", err)
			}
		}()
		logger.Info("otlp sink serving", "endpoint", sink.endpoint())
	}
	if mc.clickhouseURL == "" {
		return runPlainMatrix(ctx, mc, dir, sink, logger)
	}
	return runClickHouseMatrix(ctx, mc, dir, sink, logger)
}

// runPlainMatrix starts the no-op server and a chute node (and the traced
// node with sink), then runs mc.clients against every server in turn.
func runPlainMatrix(ctx context.Context, mc matrixConfig, dir string, sink *otlpSink, logger *slog.Logger) (out matrixOutcome, err error) {
	ports, err := freePorts(9)
	if err != nil {
		return out, err
	}
	data, err := groupDir(dir, "one-node", logger)
	if err != nil {
		return out, err
	}
	defer data.remove()
	targets := matrixTargets(mc, ports, data.path, os.Environ(), sink)
	started, err := startTargets(ctx, mc, dir, targets, logger)
	defer stopTargets(started, logger)
	if err != nil {
		return out, err
	}
	for _, n := range mc.clients {
		for _, t := range targets {
			mk := func() cell {
				cfg := mc.base
				cfg.Endpoints = []string{t.endpoint}
				cfg.Clients = n
				cfg.KeyPrefix = "bench/" + newRunID() + "/"
				cfg.Label = t.name
				return cell{server: t.name, cfg: cfg, procs: []*target{t}, sink: t.sink, side: sideProcs(0)}
			}
			rs, err := runRounds(mc.repeat, []roundCell{{mk: mk}}, func(c cell) (Result, error) { return runCell(ctx, c, logger) })
			if err != nil {
				return out, err
			}
			out.results = append(out.results, rs[0])
		}
	}
	return out, nil
}

// runClickHouseMatrix is the ClickHouse plan, each run at mc.base.Clients
// putting rows to mc.queues ch: queues, bounded by mc.base.Duration, the
// CPU of the nodes, of the ClickHouse process and of this process metered
// over every run:
//
//  1. The no-op server, a chute node inserting into mc.clickhouseURL, the
//     same started with --unsafe-no-fsync (and the traced node), and
//     three chute nodes joined by gossip, of which the first claims
//     every queue while the producers put only to the other two (it must
//     still dispatch every queue after each run), all up for the whole
//     group: mc.repeat rounds (runRounds) of no-op unary, chute unary,
//     no-fsync unary and three nodes unary, then as many of the same txn,
//     so that the cells the targets compare meet the machine's spells
//     alike; then the no-op at chute's latency (ServerNoopAtLatency),
//     the no-fsync node unary and txn paced at the chute unary and txn
//     runs' puts/s (ServerChuteNoFsyncAtRate), and the traced node
//     unary; the txn runs come after the unary ones as they leave the
//     nodes the largest. Chute runs wait for their rows; the one-node
//     untraced ones read the node's queue log counters around their
//     measured phase.
//  2. The ClickHouse floors (runFloor), with no chute node up: the rows
//     of the median chute unary run, then of the median txn run, posted
//     straight to ClickHouse in batches of floorBatchRows at that run's
//     rows/s, counted as a watched run counts them; before them, what
//     the counts alone cost ClickHouse (measureCountCost).
//  3. With mc.compression, the compression group (runCompressionGroup):
//     the one-node txn run once on a node per --clickhouse-compression
//     value, each node inserting through a proxy that counts the bytes.
//  4. The no-op at the three nodes' latency with half the clients
//     (ServerNoopAtClusterLatency), unary and txn.
//  5. With mc.etcd, the KV group (runKVGroup): plain keys to three chute
//     nodes and to three etcd members, in alternate runs.
//  6. The raw inserts: the same rows posted straight to ClickHouse in
//     batches the size of the one-node txn run's inserts, unpaced.
//  7. A chute node whose ClickHouse is a closed port queues rows; their
//     cost in memory.
//
// Each group's children are stopped before the next group starts.
func runClickHouseMatrix(ctx context.Context, mc matrixConfig, dir string, sink *otlpSink, logger *slog.Logger) (out matrixOutcome, err error) {
	txn := mc.txn
	if txn == 0 {
		txn = defaultMatrixTxn
	}
	queues := max(mc.queues, 1)
	chPID, pidErr := clickHousePID(mc.clickhousePID, mc.clickhouseURL)
	if pidErr != nil {
		logger.Warn("clickhouse cpu not metered", "err", pidErr)
	} else {
		logger.Info("clickhouse cpu metered", "pid", chPID)
	}
	// queueCell is a run of the plan against t's endpoints.
	queueCell := func(server string, nodes int, procs []*target, endpoints []string, claim string, txn int, watch bool) cell {
		cfg := mc.base
		cfg.Endpoints = endpoints
		cfg.Txn = txn
		cfg.Tables = runTables(newRunID(), queues)
		cfg.KeyPrefix = "bench/" + newRunID() + "/"
		cfg.Claim = claim
		if watch {
			cfg.ClickHouseURL = mc.clickhouseURL
		}
		cfg.Label = server + " " + callShape(Result{Txn: cfg.Txn})
		side := sideProcs(0)
		if watch {
			side = sideProcs(chPID)
		}
		return cell{server: server, nodes: nodes, cfg: cfg, procs: procs, sink: procs[0].sink, side: side}
	}
	run := func(c cell) (Result, error) { return runCell(ctx, c, logger) }
	// rounds runs n rounds of cells (runRounds), each run with fresh
	// tables, and keeps each cell's median.
	rounds := func(n int, cells ...roundCell) ([]Result, error) {
		rs, err := runRounds(n, cells, run)
		if err == nil {
			out.results = append(out.results, rs...)
		}
		return rs, err
	}
	// measure runs the cell mk makes n times and keeps their median.
	measure := func(n int, mk func() cell) (Result, error) {
		rs, err := rounds(n, roundCell{mk: mk})
		if err != nil {
			return Result{}, err
		}
		return rs[0], nil
	}
	once := func(c cell) (Result, error) {
		return measure(1, func() cell { return c })
	}
	rep := max(mc.repeat, 1)
	// latencyNoop starts the no-op server called name on port, holding
	// calls for d, and measures it unary and txn with clients putters.
	latencyNoop := func(name string, port int, d NoopDelays, clients int) error {
		late := latencyNoopTarget(mc, name, port, d, os.Environ())
		started, err := startTargets(ctx, mc, dir, []*target{late}, logger)
		defer stopTargets(started, logger)
		if err != nil {
			return err
		}
		for _, k := range []int{0, txn} {
			mk := func() cell {
				c := queueCell(name, 0, []*target{late}, []string{late.endpoint}, "", k, false)
				c.cfg.Clients = clients
				return c
			}
			if _, err := measure(rep, mk); err != nil {
				return err
			}
		}
		return nil
	}

	// 1. One node and three, their cells compared in rounds.
	var unary, batched, noopUnary, noopTxn Result
	var three [2]Result // unary, txn
	err = func() error {
		ports, err := freePorts(14)
		if err != nil {
			return err
		}
		data, err := groupDir(dir, "one-node", logger)
		if err != nil {
			return err
		}
		defer data.remove()
		targets := matrixTargets(mc, ports[:9], data.path, os.Environ(), sink)
		noFsync := noFsyncTarget(mc, ports[9:13], data.path, os.Environ())
		started, err := startTargets(ctx, mc, dir, append(slices.Clip(targets), noFsync), logger)
		defer stopTargets(started, logger)
		if err != nil {
			return err
		}
		nodes, stopCluster, err := startCluster(ctx, mc, dir, "three-nodes", logger)
		defer stopCluster()
		if err != nil {
			return err
		}
		noop, node := targets[0], targets[1]
		noopCell := func(txn int) func() cell {
			return func() cell {
				return queueCell(ServerNoop, 0, []*target{noop}, []string{noop.endpoint}, "", txn, false)
			}
		}
		// logCell is an unpaced run of t that reads its queue log.
		logCell := func(t *target, txn int) func() cell {
			return func() cell {
				c := queueCell(t.name, 1, []*target{t}, []string{t.endpoint}, "", txn, true)
				c.queueLog, c.noFsync = t, t == noFsync
				return c
			}
		}
		// clusterCell is a run of the three nodes, the first claiming
		// every queue, the clients putting to the other two.
		producers := []string{nodes[1].endpoint, nodes[2].endpoint}
		clusterCell := func(txn int) roundCell {
			return roundCell{
				mk:    func() cell { return queueCell(ServerChute3, 3, nodes, producers, nodes[0].endpoint, txn, true) },
				check: func(c cell) error { return checkDispatcher(ctx, nodes[0], c.cfg.Tables) },
			}
		}
		// The cells a target compares run in one round, unary then txn.
		for _, k := range []int{0, txn} {
			rs, err := rounds(rep, roundCell{mk: noopCell(k)}, roundCell{mk: logCell(node, k)},
				roundCell{mk: logCell(noFsync, k)}, clusterCell(k))
			if err != nil {
				return err
			}
			if k == 0 {
				noopUnary, unary, three[0] = rs[0], rs[1], rs[3]
			} else {
				noopTxn, batched, three[1] = rs[0], rs[1], rs[3]
			}
		}
		// The no-op again, holding each call for what chute's answers
		// took longer than its own (medians): the gRPC floor of a server
		// that answers when chute does.
		if err := latencyNoop(ServerNoopAtLatency, ports[13], NoopDelays{
			Put: max(0, unary.P50-noopUnary.P50), Txn: max(0, batched.P50-noopTxn.P50),
		}, mc.base.Clients); err != nil {
			return err
		}
		// The node without fsync again, unary and txn, each paced at
		// the puts/s the node with fsync took: the two at one call rate.
		for _, f := range []struct {
			run Result
			txn int
		}{{unary, 0}, {batched, txn}} {
			if f.run.PutsPerSec <= 0 {
				continue
			}
			atRate := func() cell {
				c := logCell(noFsync, f.txn)()
				c.server, c.cfg.Rate = ServerChuteNoFsyncAtRate, f.run.PutsPerSec
				return c
			}
			if _, err := measure(rep, atRate); err != nil {
				return err
			}
		}
		if len(targets) > 2 {
			traced := targets[2]
			if _, err := once(queueCell(ServerChuteTraced, 1, []*target{traced}, []string{traced.endpoint}, "", 0, true)); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return out, err
	}

	// 2. The ClickHouse floors, and what their counts cost.
	if chPID > 0 {
		span := mc.countSpan
		if span <= 0 {
			span = countCostSpan
		}
		cc, err := measureCountCost(ctx, mc.clickhouseURL, chPID, span)
		if err != nil {
			return out, err
		}
		out.count = &cc
		logger.Info("count cost measured", "counts", cc.Counts, "clickhouse_cpu_ms_per_sec", cc.MillisPerSec)
	}
	for _, r := range []Result{unary, batched} {
		f, err := runFloor(ctx, mc, r, rep, chPID, logger)
		if err != nil {
			return out, err
		}
		out.floors = append(out.floors, f)
	}

	// 3. Compression.
	if len(mc.compression) > 0 {
		mk := func(t *target) cell {
			return queueCell(t.name, 1, []*target{t}, []string{t.endpoint}, "", txn, true)
		}
		if err := runCompressionGroup(ctx, mc, dir, mk, once, logger); err != nil {
			return out, err
		}
	}

	// 4. The no-op once more, at the three nodes' latency, driven by the
	// clients of one forwarding node: what receiving its puts costs a
	// node that answers when the cluster does, the part of a three-node
	// row's cost that one node's has no counterpart of.
	ports, err := freePorts(1)
	if err != nil {
		return out, err
	}
	if err := latencyNoop(ServerNoopAtClusterLatency, ports[0], NoopDelays{
		Put: max(0, three[0].P50-noopUnary.P50), Txn: max(0, three[1].P50-noopTxn.P50),
	}, max(1, mc.base.Clients/2)); err != nil { // two forwarding nodes share the clients
		return out, err
	}

	// 5. Plain keys, chute next to etcd.
	if mc.etcd != "" {
		add := func(r Result) { out.results = append(out.results, r) }
		if err := runKVGroup(ctx, mc, dir, run, add, logger); err != nil {
			return out, err
		}
	}

	// 6. The sink's ceiling.
	batch := rawDefaultBatchRows
	if batched.Rows != nil && batched.Rows.RowsPerInsert >= 1 {
		batch = int(math.Round(batched.Rows.RowsPerInsert))
	}
	posters := mc.rawPosters
	if posters == 0 {
		posters = 2
	}
	logger.Info("raw inserts starting", "posters", posters, "batch_rows", batch)
	raw, err := meterRaw(ctx, rawInsert{
		url: mc.clickhouseURL, rows: int64(mc.base.Puts), duration: mc.base.Duration,
		posters: posters, batchRows: batch, valSize: mc.base.ValSize, progress: mc.base.Progress,
	}, chPID)
	if err != nil {
		return out, err
	}
	out.raw = &raw
	logger.Info("raw inserts finished", "rows_per_sec", int64(raw.RowsPerSec), "inserts", raw.Inserts)

	// 7. Memory, a fresh node each run.
	runs := make([]MemoryResult, 0, rep)
	for range rep {
		m, err := runMemoryCell(ctx, mc, dir, logger)
		if err != nil {
			return out, err
		}
		runs = append(runs, m)
	}
	m := medianMemory(runs)
	out.memory = &m
	return out, nil
}

// runMemoryCell starts a chute node whose ClickHouse is a closed port,
// queues rows on it (measureRowMemory) and stops it.
func runMemoryCell(ctx context.Context, mc matrixConfig, dir string, logger *slog.Logger) (MemoryResult, error) {
	ports, err := freePorts(5)
	if err != nil {
		return MemoryResult{}, err
	}
	data, err := groupDir(dir, "memory", logger)
	if err != nil {
		return MemoryResult{}, err
	}
	defer data.remove()
	// Nothing listens on the fifth port: every insert is refused.
	t := memoryTarget(mc, ports[:4], data.path, os.Environ(), "http://"+loopback(ports[4]))
	started, err := startTargets(ctx, mc, dir, []*target{t}, logger)
	defer stopTargets(started, logger)
	if err != nil {
		return MemoryResult{}, err
	}
	limit := mc.memRows
	if limit == 0 {
		limit = memoryRows
	}
	rows := memoryRowsFor(mc.base.ValSize, mc.base.KeySize, limit)
	logger.Info("memory cell starting", "server", t.name, "rows", rows)
	m, err := measureRowMemory(ctx, t, mc.base, rows)
	if err != nil {
		return MemoryResult{}, err
	}
	logger.Info("memory cell finished", "rss_per_row", int64(m.RSSPerRow), "heap_per_row", int64(m.HeapPerRow))
	return m, nil
}

// matrixTargets are the servers of the one-node group: the no-op server
// and the chute node, then the traced chute node when sink is set. ports
// holds nine free ports; each node keeps its data in its own directory
// under data. Every child gets environ without its OTEL_*
// variables; the traced node also gets the variables that send all its
// spans to sink.
func matrixTargets(mc matrixConfig, ports []int, data string, environ []string, sink *otlpSink) []*target {
	noopAddr := loopback(ports[4])
	env := childEnv(environ)
	targets := []*target{
		{name: ServerNoop, endpoint: noopAddr, exe: mc.self, argv: noopCommand(noopAddr), env: env},
		chuteTarget(mc, "bench", ports[0:4], data, env, mc.clickhouseURL),
	}
	if sink != nil {
		t := chuteTarget(mc, "bench-traced", ports[5:9], data, childEnv(environ,
			"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
			"OTEL_EXPORTER_OTLP_ENDPOINT="+sink.endpoint(),
			"OTEL_TRACES_SAMPLER=always_on"), mc.clickhouseURL)
		t.name, t.sink = ServerChuteTraced, sink
		targets = append(targets, t)
	}
	targets[1].name = ServerChute
	return targets
}

// latencyNoopTarget is the no-op server called name on port, holding
// each put and txn for d: ServerNoopAtLatency or
// ServerNoopAtClusterLatency.
func latencyNoopTarget(mc matrixConfig, name string, port int, d NoopDelays, environ []string) *target {
	addr := loopback(port)
	argv := append(noopCommand(addr), "--put-delay", d.Put.String(), "--txn-delay", d.Txn.String())
	return &target{name: name, endpoint: addr, exe: mc.self, argv: argv, env: childEnv(environ)}
}

// noFsyncTarget is the one-node group's chute node started with
// --unsafe-no-fsync, on four free ports, keeping its data under data and
// inserting into mc.clickhouseURL: the rate the node that fsyncs its
// queue log is held against.
func noFsyncTarget(mc matrixConfig, ports []int, data string, environ []string) *target {
	t := chuteTarget(mc, "bench-nofsync", ports, data, childEnv(environ), mc.clickhouseURL)
	t.argv = append(t.argv, "--unsafe-no-fsync")
	t.name = ServerChuteNoFsync
	return t
}

// clusterTargets are three chute nodes, bench-1 to bench-3, on twelve free
// ports, each keeping its data in its own directory under data; the second
// and the third join the first by gossip, and all three expect the other
// two before they bootstrap raft, so the cluster starts with three voters.
// They run the default gossip profile, lan, as users do: the fast one,
// for tests, gossips every 20ms and syncs raft every 20ms, about a quarter
// of a core for an idle cluster here against 7% for lan, which the bench
// would charge to the rows.
func clusterTargets(mc matrixConfig, ports []int, data string, environ []string) []*target {
	env := childEnv(environ)
	nodes := make([]*target, 3)
	for i := range nodes {
		t := chuteTarget(mc, "bench-"+strconv.Itoa(i+1), ports[4*i:4*i+4], data, env, mc.clickhouseURL)
		t.argv = append(t.argv, "--bootstrap-expect", "3")
		if i > 0 {
			t.argv = append(t.argv, "--join", loopback(ports[2]))
		}
		nodes[i] = t
	}
	return nodes
}

// memoryGOGC is the memory cell node's GOGC: Go's default, which turns
// chute's heap floor off (see internal/gcfloor). Under the floor the
// heap grows and shrinks by about the floor between collections whatever
// the queue holds, and the resident memory with it, which would bury
// what 100,000 queued rows add, and a row costs at most what it costs
// at GOGC 100.
const memoryGOGC = "GOGC=100"

// memoryTarget is a chute node on four free ports, keeping its data
// under data, whose ClickHouse is unreachable, a closed port at
// clickhouseURL: its queues keep every row while it retries. It runs at
// memoryGOGC.
func memoryTarget(mc matrixConfig, ports []int, data string, environ []string, clickhouseURL string) *target {
	return chuteTarget(mc, "bench-mem", ports, data, childEnv(environ, memoryGOGC), clickhouseURL)
}

// chuteTarget is the chute node called name on four ports, its data in
// data/<name>.chute, inserting into clickhouseURL when set; name is also
// its label until the caller names it.
func chuteTarget(mc matrixConfig, name string, ports []int, data string, env []string, clickhouseURL string) *target {
	argv := append(chuteCommand(name, ports), "--data-dir", filepath.Join(data, name+".chute"))
	argv = append(argv, mc.nodeArgs...)
	if clickhouseURL != "" {
		argv = append(argv, "--clickhouse-url", clickhouseURL)
	}
	return &target{
		name:     name,
		endpoint: "http://" + loopback(ports[0]),
		metrics:  loopback(ports[3]),
		exe:      mc.chute,
		argv:     argv,
		env:      env,
	}
}

// startTargets starts targets as children in dir, then waits
// until each answers a put, is ready when it is a chute node (/readyz)
// and, when traced, has exported that put's span. It returns the targets it started, to be stopped, with or without
// an error.
func startTargets(ctx context.Context, mc matrixConfig, dir string, targets []*target, logger *slog.Logger) ([]*target, error) {
	var started []*target
	for _, t := range targets {
		logger.Info("starting child", "server", t.name, "args", t.argv)
		proc, err := startChild(t.name, t.exe, t.argv, t.env, dir, mc.childOutput)
		if err != nil {
			return started, err
		}
		t.proc = proc
		started = append(started, t)
	}
	for _, t := range targets {
		if err := waitReady(ctx, t.proc, t.endpoint, mc.readyTimeout); err != nil {
			return started, err
		}
		// A chute node answers a key put once raft has a leader, and a
		// queue put once its key space caught up (/readyz).
		if t.metrics != "" {
			if err := waitReadyz(ctx, []*target{t}, mc.readyTimeout); err != nil {
				return started, err
			}
		}
		if t.sink != nil {
			// The readiness put's span, in before the first run; none
			// means this chute does not trace.
			if t.sink.settle(ctx, 0, 1, traceQuiet, traceSettleLimit) == 0 {
				return started, fmt.Errorf("%w: %s exported no span of its readiness put within %v", errNoSpans, t.name, traceQuiet)
			}
		}
		logger.Info("child ready", "server", t.name, "endpoint", t.endpoint)
	}
	return started, nil
}

// waitMembers polls the /status of every node until each sees all of them
// alive, within timeout.
func waitMembers(ctx context.Context, nodes []*target, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, t := range nodes {
		for {
			st, err := fetchStatus(wctx, t.metrics)
			if err == nil && nodeprobe.Alive(st) >= len(nodes) {
				break
			}
			if !sleepUntil(wctx, time.Now().Add(readyPoll)) {
				return fmt.Errorf("bench: %s does not see %d members alive within %v (last: %d, %v)", t.name, len(nodes), timeout, nodeprobe.Alive(st), err)
			}
		}
	}
	return nil
}

// checkDispatcher fails unless node dispatches the queue of every table.
func checkDispatcher(ctx context.Context, node *target, tables []string) error {
	st, err := fetchStatus(ctx, node.metrics)
	if err != nil {
		return err
	}
	for _, t := range tables {
		q, ok := nodeprobe.Queue(st, queueName(t))
		if !ok || q.Dispatcher != st.Member {
			return fmt.Errorf("%w: %s (member %s) shows %s dispatched by %q", errNotDispatcher, node.name, st.Member, queueName(t), q.Dispatcher)
		}
	}
	return nil
}

// stopTargets stops the children of targets, last started first.
func stopTargets(targets []*target, logger *slog.Logger) {
	for i := len(targets) - 1; i >= 0; i-- {
		t := targets[i]
		if err := t.proc.stop(childStopGrace); err != nil {
			logger.Warn("child did not stop cleanly", "server", t.name, "err", err)
		}
	}
}

// roundCell is a cell runRounds runs once a round: mk makes a fresh one
// for each run, and check, when set, is called after each.
type roundCell struct {
	mk    func() cell
	check func(cell) error
}

// runRounds runs n rounds (one when n < 2), each running every cell of
// cells once with run, in order, a fresh cell each time so that no run
// reuses another's keys or tables, calls a cell's check after each of its
// runs, and returns each cell's median (medianResult), in the order of
// cells.
// Cells a target compares go in one round rather than each n times in a
// row: the machine's slow and fast spells last minutes, so a cell run
// apart from its floor could land in a spell of its own.
func runRounds(n int, cells []roundCell, run func(cell) (Result, error)) ([]Result, error) {
	runs := make([][]Result, len(cells))
	for range max(n, 1) {
		for i, rc := range cells {
			c := rc.mk()
			r, err := run(c)
			if err != nil {
				return nil, err
			}
			if rc.check != nil {
				if err := rc.check(c); err != nil {
					return nil, err
				}
			}
			runs[i] = append(runs[i], r)
		}
	}
	med := make([]Result, len(cells))
	for i, rs := range runs {
		med[i] = medianResult(rs)
	}
	return med, nil
}

// cell is one run of the matrix.
type cell struct {
	server string
	nodes  int
	cfg    Config
	// procs are the children the run depends on: each must be alive, and
	// its memory is sampled.
	procs []*target
	// sink receives the spans of a traced server; nil: not traced.
	sink *otlpSink
	// queueLog is the node whose queue log counters the run reads just
	// before and just after its measured phase; nil: none. noFsync says
	// it was started with --unsafe-no-fsync, so it must not fsync.
	queueLog *target
	noFsync  bool
	// side are the processes whose CPU the run meters besides its
	// nodes': the client, and ClickHouse when the run inserts rows
	// (sideProcs).
	side []proc
	// wire is the proxy between the node and ClickHouse whose counts the
	// run reads just before and just after it, and codec the node's
	// --clickhouse-compression; nil: none.
	wire  *wireProxy
	codec string
}

// runCell checks that the cell's children are alive, runs it while
// sampling their memory, with a sink counts the spans of the run, and
// with a queue log node what its log did in the measured phase.
func runCell(ctx context.Context, c cell, logger *slog.Logger) (Result, error) {
	ps := make([]proc, 0, len(c.procs))
	for _, t := range c.procs {
		select {
		case <-t.proc.done:
			return Result{}, fmt.Errorf("%w during the matrix: %s: %v", errChildExited, t.name, t.proc.exitErr())
		default:
		}
		ps = append(ps, proc{name: t.name, pid: t.proc.cmd.Process.Pid})
	}
	cfg := c.cfg
	var from int64
	if c.sink != nil {
		from = c.sink.received()
	}
	var logBefore, logAfter queueLogCounters
	if c.queueLog != nil {
		addr := c.queueLog.metrics
		cfg.measureHook = func(ctx context.Context, start bool) error {
			n, err := readQueueLog(ctx, addr)
			if start {
				logBefore = n
			} else {
				logAfter = n
			}
			return err
		}
	}
	var wire *wireMeter
	if c.wire != nil {
		wire = startWire(ctx, c.wire, c.codec, cfg.ClickHouseURL)
	}
	logger.Info("run starting", "server", c.server, "calls", callShape(Result{Txn: cfg.Txn, Rate: cfg.Rate}),
		"clients", cfg.Clients, "conns", cfg.conns(), "queues", len(cfg.Tables), "puts", cfg.Puts, "duration", cfg.Duration)
	rss := sampleRSS(ps, rssPeriod)
	cpu := startCPU(append(slices.Clip(ps), c.side...))
	r, err := Run(ctx, cfg)
	peaks := rss.stop()
	if err != nil {
		return Result{}, fmt.Errorf("bench: %s, %s, %d clients: %w", c.server, callShape(Result{Txn: cfg.Txn, Rate: cfg.Rate}), cfg.Clients, err)
	}
	r.Server, r.Nodes, r.PeakRSS = c.server, c.nodes, peaks
	r.CPU = cpu.stop(r.Puts+int64(cfg.Warmup), landedRows(r, cfg.Warmup))
	r.ClickHouseCPU = takeCPU(&r.CPU, procClickHouse)
	r.ClientCPU = takeCPU(&r.CPU, procClient)
	if wire != nil {
		r.Wire = wire.stop(ctx, r, cfg.Warmup, logger)
	}
	if c.queueLog != nil {
		if r.QueueLog, err = queueLogCount(logBefore, logAfter, r, c.noFsync); err != nil {
			return Result{}, fmt.Errorf("bench: %s, %s: %w", c.server, callShape(r), err)
		}
	}
	attrs := []any{"server", r.Server, "calls", callShape(r), "clients", r.Clients,
		"puts_per_sec", int64(r.PutsPerSec), "p50", r.P50, "p99", r.P99, "p999", r.P999, "errors", r.Errors}
	if r.Rows != nil {
		attrs = append(attrs, "rows_per_sec", int64(r.Rows.RowsPerSec), "put_to_row_p99", r.Rows.P99, "rows_per_insert", int64(r.Rows.RowsPerInsert))
	}
	if len(r.CPU) > 0 {
		// Each run's figures, for reading the spread of a repeated cell:
		// per put of the first node (a cluster's dispatcher), per row of
		// each node and their sum.
		attrs = append(attrs, "cpu_us_per_put", r.CPU[0].MicrosPerPut, "cpu_us_per_row", perRowSum(r.CPU),
			"syscalls_per_row", nodeSum(r.CPU, "%.3g", func(n NodeCPU) float64 { return n.SyscallsPerRow }),
			"switches_per_row", nodeSum(r.CPU, "%.3g", func(n NodeCPU) float64 { return n.SwitchesPerRow }))
	}
	if w := r.Wire; w != nil {
		attrs = append(attrs, "compression", w.Compression, "wire_bytes_per_row", w.BytesPerRow, "node_cpu_us_per_row", w.NodeMicrosPerRow)
	}
	if q := r.QueueLog; q != nil {
		attrs = append(attrs, "fsyncs_per_sec", int64(q.FsyncsPerSec), "records_per_fsync", q.RecordsPerFsync)
	}
	logger.Info("run finished", attrs...)
	if c.sink != nil {
		// One server span per call: the probes, the warmup, the measured
		// calls; with rows, the INSERT spans come on top and may end after
		// the rows are counted.
		per := int64(cfg.perCall())
		calls := int64(cfg.conns()) + cfg.calls(cfg.Warmup) + r.Calls + (r.Errors+per-1)/per
		if r.Trace, err = settleSpans(ctx, c.sink, c.server, from, calls, r.Rows == nil, logger); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// settleSpans counts the spans sink received since from for a run of
// calls KV calls, once they are all in: one per call when oneEach says the
// calls make no other span, else when the sink has gone quiet. None is
// errNoSpans.
func settleSpans(ctx context.Context, sink *otlpSink, server string, from, calls int64, oneEach bool, logger *slog.Logger) (*TraceCount, error) {
	want := int64(0)
	if oneEach {
		want = calls
	}
	spans := sink.settle(ctx, from, want, traceQuiet, traceSettleLimit)
	logger.Info("spans received", "server", server, "spans", spans, "calls", calls)
	if spans == 0 {
		return nil, fmt.Errorf("%w: %s during a run", errNoSpans, server)
	}
	return &TraceCount{Spans: spans, Calls: calls}, nil
}

// chuteCommand is the command line (after the executable) of the chute
// node called name, its four listeners on ports of the loopback address.
func chuteCommand(name string, ports []int) []string {
	return []string{
		"--name", name,
		"--listen-client-urls", "http://" + loopback(ports[0]),
		"--listen-peer-urls", "http://" + loopback(ports[1]),
		"--gossip-listen", loopback(ports[2]),
		"--metrics-listen", loopback(ports[3]),
		"--log-level", "warn",
	}
}

// NoopServerCommand is chute-bench's subcommand that runs the no-op
// server, as the matrix starts it.
const NoopServerCommand = "noop-server"

// noopCommand is the no-op server's command line (after the executable).
func noopCommand(addr string) []string {
	return []string{NoopServerCommand, "--listen", addr}
}

func loopback(port int) string {
	return "127.0.0.1:" + strconv.Itoa(port)
}
