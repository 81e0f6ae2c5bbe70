package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main is `chute bench`. args are the words after "bench". It returns the
// process exit code: 0 on success, 1 when a run or the matrix failed, 2 on
// a usage error.
//
//	chute bench --endpoints host:port[,...] [--clients 100] [--conns 10] ...
//	chute bench --matrix [--matrix-clients 1,100] [--trace] ...
//	chute bench noop-server --listen host:port
//
// The report goes to stdout (markdown, or JSON with --json); progress and
// errors go to stderr, as do the matrix children's output.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "noop-server" {
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

	var e2e []EndToEndResult
	results, runErr := run(ctx, opts, stderr, logger, &e2e)
	if len(results) > 0 {
		if err := writeReport(stdout, NewReport(results), opts.json); err != nil {
			logger.Error("cannot write report", "err", err)
			return 1
		}
	}
	if len(e2e) > 0 {
		if err := writeEndToEnd(stdout, e2e); err != nil {
			logger.Error("cannot write report", "err", err)
			return 1
		}
	}
	if runErr != nil {
		logger.Error("bench failed", "err", runErr)
		return 1
	}
	return 0
}

// run runs the matrix or the single run opts ask for. On error it returns
// the results measured so far.
func run(ctx context.Context, opts options, stderr io.Writer, logger *slog.Logger, e2e *[]EndToEndResult) ([]Result, error) {
	if opts.matrix {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: cannot find own executable for the matrix children: %w", err)
		}
		return runMatrix(ctx, matrixConfig{
			exe:           exe,
			base:          opts.cfg,
			clients:       opts.matrixClients,
			nodeArgs:      opts.nodeArgs,
			readyTimeout:  opts.readyTimeout,
			childOutput:   stderr,
			trace:         opts.trace,
			clickhouseURL: opts.clickhouseURL,
			endToEnd:      e2e,
		}, logger)
	}
	cfg := opts.cfg
	cfg.KeyPrefix = "bench/" + newRunID() + "/"
	logger.Info("run starting", "server", opts.label, "clients", cfg.Clients, "conns", cfg.conns(), "puts", cfg.Puts)
	r, err := Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.Server = opts.label
	return []Result{r}, nil
}

func writeReport(w io.Writer, r Report, asJSON bool) error {
	if asJSON {
		return r.WriteJSON(w)
	}
	return r.WriteMarkdown(w)
}
