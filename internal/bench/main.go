package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// Main is chute-bench. args are the words after the program name. It
// returns the process exit code: 0 on success, 1 when a run or the matrix
// failed, 2 on a usage error.
//
//	chute-bench --endpoints host:port[,...] [--clients 100] [--conns 10] [--txn 128] ...
//	chute-bench --endpoints host:port --queues 1 --clickhouse-url http://ch:8123 ...
//	chute-bench --matrix [--chute bin/chute] [--matrix-clients 1,100] [--trace] ...
//	chute-bench --matrix --clickhouse-url http://ch:8123 [--report docs/benchmarks.md] ...
//	chute-bench noop-server --listen host:port
//
// The report goes to stdout (markdown, or JSON with --json), and with
// --report to a file too; progress and errors go to stderr, as do the
// matrix children's output.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == NoopServerCommand {
		return noopMain(args[1:], stderr)
	}
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	if opts.progress || isTerminal(stderr) {
		opts.cfg.Progress = stderr
	}
	machine := describeMachine(ctx, opts.clickhouseURL)
	if etcd, err := etcdBinary(opts, exec.LookPath); err == nil && etcd != "" {
		machine.Etcd = etcdVersion(ctx, etcd)
	}
	if opts.commit != "" {
		machine.Commit, machine.Modified = opts.commit, false
	}

	m, runErr := run(ctx, opts, stderr, logger)
	machine.LoadAvgEnd = loadAvg()
	rep := NewReport(m)
	rep.Machine = &machine
	rep.Command = commandLine(args)
	if len(m.Results) > 0 || m.Raw != nil || len(m.Floors) > 0 || m.Memory != nil {
		if err := writeReport(stdout, rep, opts.json); err != nil {
			logger.Error("cannot write report", "err", err)
			return 1
		}
	}
	if runErr != nil {
		logger.Error("bench failed", "err", runErr)
		if opts.report != "" {
			logger.Error("report file not written", "path", opts.report)
		}
		return 1
	}
	if opts.report != "" {
		if err := writeReportFile(opts.report, rep, opts); err != nil {
			logger.Error("cannot write report file", "err", err)
			return 1
		}
		logger.Info("report written", "path", opts.report)
	}
	return 0
}

// run runs the matrix or the single run opts ask for. On error it returns
// what was measured so far.
func run(ctx context.Context, opts options, stderr io.Writer, logger *slog.Logger) (Measured, error) {
	if opts.matrix {
		self, err := os.Executable()
		if err != nil {
			return Measured{}, fmt.Errorf("bench: cannot find own executable for the no-op server: %w", err)
		}
		chute, err := chuteBinary(opts.chute, self, exec.LookPath)
		if err != nil {
			return Measured{}, err
		}
		logger.Info("matrix nodes run", "chute", chute)
		etcd, err := etcdBinary(opts, exec.LookPath)
		if err != nil {
			return Measured{}, err
		}
		out, err := runMatrix(ctx, matrixConfig{
			chute:         chute,
			self:          self,
			base:          opts.cfg,
			clients:       opts.matrixClients,
			nodeArgs:      opts.nodeArgs,
			readyTimeout:  opts.readyTimeout,
			childOutput:   stderr,
			trace:         opts.trace,
			clickhouseURL: opts.clickhouseURL,
			clickhousePID: opts.clickhousePID,
			queues:        opts.queues,
			txn:           opts.cfg.Txn,
			rawPosters:    opts.rawPosters,
			repeat:        opts.repeat,
			etcd:          etcd,
			compression:   opts.compression,
		}, logger)
		return Measured{Results: out.results, Raw: out.raw, Floors: out.floors, CountCost: out.count, Memory: out.memory}, err
	}
	cfg := opts.cfg
	id := newRunID()
	cfg.KeyPrefix = "bench/" + id + "/"
	if opts.queues > 0 {
		cfg.Tables = runTables(id, opts.queues)
		cfg.ClickHouseURL = opts.clickhouseURL
		cfg.Claim = opts.claim
	}
	cfg.Label = opts.label
	logger.Info("run starting", "server", opts.label, "clients", cfg.Clients, "conns", cfg.conns(), "puts", cfg.Puts,
		"txn", cfg.Txn, "queues", len(cfg.Tables))
	r, err := Run(ctx, cfg)
	if err != nil {
		return Measured{}, err
	}
	r.Server = opts.label
	return Measured{Results: []Result{r}}, nil
}

// chuteBinary is the chute binary the matrix nodes run: path when given
// (made absolute: the children run in a temporary directory), else a
// chute beside self (make puts both in bin/), else lookPath's chute.
func chuteBinary(path, self string, lookPath func(string) (string, error)) (string, error) {
	if path != "" {
		return absExe(path)
	}
	beside := filepath.Join(filepath.Dir(self), "chute")
	if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
		return beside, nil
	}
	found, err := lookPath("chute")
	if err != nil {
		return "", fmt.Errorf("bench: no chute binary beside %s nor on PATH; name one with --chute: %w", self, err)
	}
	return found, nil
}

// etcdBinary is the etcd binary of the KV group: none (empty) without
// the ClickHouse plan or when opts.etcd is "none", else opts.etcd found
// by lookPath.
func etcdBinary(opts options, lookPath func(string) (string, error)) (string, error) {
	if opts.clickhouseURL == "" || opts.etcd == "none" {
		return "", nil
	}
	p, err := lookPath(opts.etcd)
	if err != nil {
		return "", fmt.Errorf("bench: no etcd binary %q for the KV group; install etcd or pass --etcd none: %w", opts.etcd, err)
	}
	return absExe(p)
}

// absExe makes a relative path with a directory in it (bin/chute)
// absolute, since a child's relative executable is taken relative to its
// working directory; a bare name, looked up on PATH, and an absolute path
// are left as they are.
func absExe(path string) (string, error) {
	if filepath.IsAbs(path) || !strings.ContainsRune(path, filepath.Separator) {
		return path, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("bench: %s: %w", path, err)
	}
	return abs, nil
}

// commandLine is chute-bench with args, each quoted for a POSIX shell
// when it needs to be.
func commandLine(args []string) string {
	words := []string{"chute-bench"}
	for _, a := range args {
		if a == "" || strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,@%+-") != "" {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

func writeReport(w io.Writer, r Report, asJSON bool) error {
	if asJSON {
		return r.WriteJSON(w)
	}
	return r.WriteMarkdown(w)
}

// writeReportFile writes the report document to path, replacing it.
func writeReportFile(path string, r Report, opts options) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	if err := r.WriteDoc(f, docSettingsOf(opts)); err != nil {
		_ = f.Close()
		return fmt.Errorf("bench: report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	return nil
}
