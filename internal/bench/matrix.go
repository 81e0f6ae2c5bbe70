package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"
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
)

// errNoSpans marks a traced node that exported nothing: its figures would
// be an untraced node's under the traced label.
var errNoSpans = errors.New("bench: traced node sent no spans")

// matrixConfig is the `--matrix` mode: which binary to start, how to load it.
type matrixConfig struct {
	// exe is the binary every child runs: chute itself.
	exe string
	// base is the run config; Endpoints, Clients and KeyPrefix are set per
	// run.
	base Config
	// clients are the client counts to run, each against every server.
	clients []int
	// nodeArgs are appended to the chute nodes' command lines.
	nodeArgs []string
	// readyTimeout bounds each child's wait until it answers a put.
	readyTimeout time.Duration
	// childOutput receives every child's stdout and stderr.
	childOutput io.Writer
	// trace adds a second chute node that samples every call and exports
	// its spans over OTLP/gRPC to a sink in this process; it is measured
	// after the untraced node at every client count. No child inherits
	// this process's OTEL_* variables, so the untraced node never traces.
	trace bool
	// clickhouseURL, when set, is given to the chute nodes, and after the
	// put runs the end-to-end runs go through them into ClickHouse; their
	// results are appended to endToEnd.
	clickhouseURL string
	endToEnd      *[]EndToEndResult
}

// target is one server of the matrix.
type target struct {
	name     string
	endpoint string   // what the clients dial
	argv     []string // the child's command line after the executable
	env      []string // the child's environment
	// sink receives the target's spans; nil: the target is not traced.
	sink *otlpSink
	proc *child
}

// runMatrix starts the no-op server and a chute node (and, with mc.trace,
// a traced chute node and its span sink) as children of mc.exe, waits
// until each answers a put, then runs mc.clients against every server in
// turn. The children, then the sink, are stopped and waited for before it
// returns. On error it returns the results measured so far.
func runMatrix(ctx context.Context, mc matrixConfig, logger *slog.Logger) (results []Result, err error) {
	ports, err := freePorts(9)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "chute-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: node directory: %w", err)
	}
	defer func() {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			logger.Warn("cannot remove node directory", "dir", dir, "err", rmErr)
		}
	}()
	var sink *otlpSink
	if mc.trace {
		if sink, err = startOTLPSink(); err != nil {
			return nil, err
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

	targets := matrixTargets(mc, ports, os.Environ(), sink)
	var started []*target
	defer func() { stopTargets(started, logger) }()
	for _, t := range targets {
		logger.Info("starting child", "server", t.name, "args", t.argv)
		proc, err := startChild(t.name, mc.exe, t.argv, t.env, dir, mc.childOutput)
		if err != nil {
			return nil, err
		}
		t.proc = proc
		started = append(started, t)
	}
	for _, t := range targets {
		if err := waitReady(ctx, t.proc, t.endpoint, mc.readyTimeout); err != nil {
			return nil, err
		}
		if t.sink != nil {
			// The readiness put's span, in before the first run; none
			// means this chute does not trace.
			if t.sink.settle(ctx, 0, 1, traceQuiet, traceSettleLimit) == 0 {
				return nil, fmt.Errorf("%w: %s exported no span of its readiness put within %v", errNoSpans, t.name, traceQuiet)
			}
		}
		logger.Info("child ready", "server", t.name, "endpoint", t.endpoint)
	}

	for _, n := range mc.clients {
		for _, t := range targets {
			r, err := runOne(ctx, mc.base, t, n, logger)
			if err != nil {
				return results, err
			}
			results = append(results, r)
		}
	}
	if mc.clickhouseURL != "" {
		// Unary puts, then txn batches of 128, both to a ch: queue, until
		// every row is in ClickHouse; the traced node repeats the unary
		// run.
		type e2eRun struct {
			t *target
			e EndToEnd
		}
		unary := EndToEnd{Rows: 20000, Clients: 16, Batch: 1}
		chute := targets[1] // see matrixTargets
		runs := []e2eRun{{chute, unary}}
		if len(targets) > 2 {
			runs = append(runs, e2eRun{targets[2], unary})
		}
		runs = append(runs, e2eRun{chute, EndToEnd{Rows: 200000, Clients: 8, Batch: 128}})
		for _, job := range runs {
			r, err := endToEndOn(ctx, job.t, job.e, mc.clickhouseURL, logger)
			if err != nil {
				return results, err
			}
			*mc.endToEnd = append(*mc.endToEnd, r)
		}
	}
	return results, nil
}

// matrixTargets are the servers of the matrix: the no-op server and the
// chute node, then the traced chute node when sink is set. ports holds
// nine free ports. Every child gets environ without its OTEL_* variables;
// the traced node also gets the variables that send all its spans to sink.
func matrixTargets(mc matrixConfig, ports []int, environ []string, sink *otlpSink) []*target {
	node := func(name string, ports []int) []string {
		argv := append(chuteCommand(name, ports), mc.nodeArgs...)
		if mc.clickhouseURL != "" {
			argv = append(argv, "--clickhouse-url", mc.clickhouseURL)
		}
		return argv
	}
	noopAddr := loopback(ports[4])
	env := childEnv(environ)
	targets := []*target{
		{name: ServerNoop, endpoint: noopAddr, argv: noopCommand(noopAddr), env: env},
		{name: ServerChute, endpoint: "http://" + loopback(ports[0]), argv: node("bench", ports[0:4]), env: env},
	}
	if sink != nil {
		targets = append(targets, &target{
			name:     ServerChuteTraced,
			endpoint: "http://" + loopback(ports[5]),
			argv:     node("bench-traced", ports[5:9]),
			env: childEnv(environ,
				"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
				"OTEL_EXPORTER_OTLP_ENDPOINT="+sink.endpoint(),
				"OTEL_TRACES_SAMPLER=always_on"),
			sink: sink,
		})
	}
	return targets
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

// runOne is one cell of the matrix.
func runOne(ctx context.Context, base Config, t *target, clients int, logger *slog.Logger) (Result, error) {
	select {
	case <-t.proc.done:
		return Result{}, fmt.Errorf("%w during the matrix: %s: %v", errChildExited, t.name, t.proc.exitErr())
	default:
	}
	cfg := base
	cfg.Endpoints = []string{t.endpoint}
	cfg.Clients = clients
	cfg.KeyPrefix = "bench/" + newRunID() + "/"
	var from int64
	if t.sink != nil {
		from = t.sink.received()
	}
	logger.Info("run starting", "server", t.name, "clients", cfg.Clients, "conns", cfg.conns(), "puts", cfg.Puts)
	r, err := Run(ctx, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("bench: %s at %d clients: %w", t.name, clients, err)
	}
	r.Server = t.name
	logger.Info("run finished", "server", t.name, "clients", r.Clients,
		"puts_per_sec", int64(r.PutsPerSec), "p50", r.P50, "p99", r.P99, "errors", r.Errors)
	if t.sink != nil {
		// One server span per call: the probes, the warmup, the measured
		// puts.
		calls := int64(cfg.conns()+cfg.Warmup) + r.Puts + r.Errors
		if r.Trace, err = settleSpans(ctx, t, from, calls, true, logger); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// endToEndOn is one end-to-end run through the chute node of t.
func endToEndOn(ctx context.Context, t *target, e EndToEnd, clickhouseURL string, logger *slog.Logger) (EndToEndResult, error) {
	e.Endpoint, e.ClickHouseURL = t.endpoint, clickhouseURL
	var from int64
	if t.sink != nil {
		from = t.sink.received()
	}
	logger.Info("end-to-end run starting", "server", t.name, "rows", e.Rows, "clients", e.Clients, "batch", e.Batch)
	r, err := runEndToEnd(ctx, e, logger)
	if err != nil {
		return EndToEndResult{}, fmt.Errorf("bench: %s end-to-end: %w", t.name, err)
	}
	r.Server = t.name
	if t.sink != nil {
		// The INSERT spans come on top of the calls' and may end after
		// the rows are counted.
		calls := int64((e.Rows + e.Batch - 1) / e.Batch)
		if r.Trace, err = settleSpans(ctx, t, from, calls, false, logger); err != nil {
			return EndToEndResult{}, err
		}
	}
	return r, nil
}

// settleSpans counts the spans t's sink received since from for a run of
// calls KV calls, once they are all in: one per call when oneEach says the
// calls make no other span, else when the sink has gone quiet. None is
// errNoSpans.
func settleSpans(ctx context.Context, t *target, from, calls int64, oneEach bool, logger *slog.Logger) (*TraceCount, error) {
	want := int64(0)
	if oneEach {
		want = calls
	}
	spans := t.sink.settle(ctx, from, want, traceQuiet, traceSettleLimit)
	logger.Info("spans received", "server", t.name, "spans", spans, "calls", calls)
	if spans == 0 {
		return nil, fmt.Errorf("%w: %s during a run", errNoSpans, t.name)
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

// noopCommand is the no-op server's command line (after the executable).
func noopCommand(addr string) []string {
	return []string{"bench", "noop-server", "--listen", addr}
}

func loopback(port int) string {
	return "127.0.0.1:" + strconv.Itoa(port)
}
