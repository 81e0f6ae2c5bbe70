package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// childStopGrace is how long a matrix child has to exit after SIGTERM before
// it is killed.
const childStopGrace = 5 * time.Second

// matrixConfig is the `--matrix` mode: which binary to start, how to load it.
type matrixConfig struct {
	// exe is the binary both children run: chute itself.
	exe string
	// base is the run config; Endpoints, Clients and KeyPrefix are set per
	// run.
	base Config
	// clients are the client counts to run, each against both servers.
	clients []int
	// nodeArgs are appended to the chute node's command line.
	nodeArgs []string
	// readyTimeout bounds each child's wait until it answers a put.
	readyTimeout time.Duration
	// childOutput receives both children's stdout and stderr.
	childOutput io.Writer
	// clickhouseURL, when set, is given to the chute node, and after the
	// put runs the end-to-end runs go through it into ClickHouse; their
	// results are appended to endToEnd.
	clickhouseURL string
	endToEnd      *[]EndToEndResult
}

// target is one server of the matrix.
type target struct {
	name     string
	endpoint string
	proc     *child
}

// runMatrix starts the no-op server and a chute node as children of
// mc.exe, waits until both answer a put, then runs mc.clients against the
// no-op server and chute in turn. The children are stopped and waited for
// before it returns. On error it returns the results measured so far.
func runMatrix(ctx context.Context, mc matrixConfig, logger *slog.Logger) (results []Result, err error) {
	ports, err := freePorts(5)
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

	noopAddr := loopback(ports[4])
	targets := []*target{
		{name: ServerNoop, endpoint: noopAddr},
		{name: ServerChute, endpoint: "http://" + loopback(ports[0])},
	}
	argv := map[string][]string{
		ServerNoop:  noopCommand(noopAddr),
		ServerChute: append(chuteCommand(ports), mc.nodeArgs...),
	}
	if mc.clickhouseURL != "" {
		argv[ServerChute] = append(argv[ServerChute], "--clickhouse-url", mc.clickhouseURL)
	}
	var started []*target
	defer func() { stopTargets(started, logger) }()
	for _, t := range targets {
		logger.Info("starting child", "server", t.name, "args", argv[t.name])
		proc, err := startChild(t.name, mc.exe, argv[t.name], dir, mc.childOutput)
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
		// every row is in ClickHouse.
		for _, e := range []EndToEnd{
			{Rows: 20000, Clients: 16, Batch: 1},
			{Rows: 200000, Clients: 8, Batch: 128},
		} {
			e.Endpoint, e.ClickHouseURL = loopback(ports[0]), mc.clickhouseURL
			logger.Info("end-to-end run starting", "rows", e.Rows, "clients", e.Clients, "batch", e.Batch)
			r, err := runEndToEnd(ctx, e, logger)
			if err != nil {
				return results, err
			}
			*mc.endToEnd = append(*mc.endToEnd, r)
		}
	}
	return results, nil
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
	logger.Info("run starting", "server", t.name, "clients", cfg.Clients, "conns", cfg.conns(), "puts", cfg.Puts)
	r, err := Run(ctx, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("bench: %s at %d clients: %w", t.name, clients, err)
	}
	r.Server = t.name
	logger.Info("run finished", "server", t.name, "clients", r.Clients,
		"puts_per_sec", int64(r.PutsPerSec), "p50", r.P50, "p99", r.P99, "errors", r.Errors)
	return r, nil
}

// chuteCommand is the chute node's command line (after the executable),
// every listener on its own free loopback port.
func chuteCommand(ports []int) []string {
	return []string{
		"--name", "bench",
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
