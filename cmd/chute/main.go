package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"chute/internal/gcfloor"
	"chute/internal/sysmon"
)

// version is what --version prints.
const version = "0.1.0-dev"

// statusCommand is the subcommand that prints the cluster's status.
const statusCommand = "status"

// Exit codes of run.
const (
	exitOK    = 0 // clean shutdown, --help, --version
	exitFatal = 1 // the node stopped on an error
	exitUsage = 2 // bad flags, environment or config file
)

// configError is a configuration error found while building the node,
// before anything listens: it exits with exitUsage, as the errors of
// loadConfig do.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }

func (e configError) Unwrap() error { return e.err }

func main() {
	// A node starts again with the runtime's monitor kept out of its deep
	// sleep (see internal/sysmon), unless GODEBUG says otherwise; a
	// subcommand, which prints and exits, runs as it is, its stderr
	// clean of the runtime's trace line. Exec returns only when it did
	// not start again.
	if len(os.Args) < 2 || os.Args[1] != statusCommand {
		if err := sysmon.Exec(os.Args); err != nil {
			slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn(
				"cannot start again with the runtime's monitor kept awake; going on without", "err", err)
		}
	}
	// Unless GOGC says otherwise, the heap may grow by gcfloor's floor
	// between collections, for the life of the process.
	if _, set := os.LookupEnv("GOGC"); !set {
		gcfloor.Start(gcfloor.Config{})
	}
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is the whole binary: it dispatches subcommands, or loads the
// configuration and runs a node until SIGTERM or SIGINT. It returns the
// process's exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case statusCommand:
			return statusMain(args[1:], stdout, stderr)
		}
	}

	cfg, ignored, err := loadConfig(args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return exitOK
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "chute %s\n", version)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "chute: %v\nRun 'chute --help' for usage.\n", err)
		return exitUsage
	}

	// Catch signals before the first log line, so that whoever watches the
	// log may signal from then on.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	routeOTelLogs(logger)
	for _, name := range ignored {
		logger.Warn("ignoring etcd flag", "flag", name)
	}
	// SIGHUP re-reads the configuration (flags, environment, file) and
	// hands it to the node, which applies what can change while running.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan Config, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			next, _, err := loadConfig(args, getenv)
			if err != nil {
				logger.Error("configuration not reloaded", "err", err)
				continue
			}
			offerNewest(reload, next)
		}
	}()
	if err := runNode(ctx, cfg, logger, reload); err != nil {
		if errors.As(err, new(configError)) {
			fmt.Fprintf(stderr, "chute: %v\n", err)
			return exitUsage
		}
		logger.Error("node stopped", "err", err)
		return exitFatal
	}
	return exitOK
}

// printUsage writes --help: every flag with its default, then the etcd
// flags that are accepted and ignored.
func printUsage(w io.Writer) {
	cfg := DefaultConfig()
	var showVersion bool
	var ignored ignoredFlags
	fs, opts := newFlagSet(&cfg, &showVersion, &ignored)

	var b strings.Builder
	b.WriteString(`Usage:
  chute [flags]          run a node
  chute status [flags]   print the cluster's members and queues
  chute --version        print the version
  chute -h | --help      print this help

Every flag can also be set in the YAML file named by --config (CHUTE_CONFIG),
under the flag's name in snake_case (listen_client_urls: [...]), and in the
environment as CHUTE_ and the name in UPPER_SNAKE_CASE (CHUTE_LISTEN_CLIENT_URLS).
Flags win over the environment, the environment over the file, the file over
the defaults. Lists are comma separated, or YAML lists in the file.

Flags:
`)
	for _, o := range opts {
		def, initial := o.def, fs.Lookup(o.name).DefValue
		switch {
		case def != "" && initial != "":
			def += ", " + initial
		case def == "" && initial != "":
			def = initial
		case def == "":
			def = "none"
		}
		fmt.Fprintf(&b, "  --%s\n        %s (default: %s)\n", strings.TrimSpace(o.name+" "+o.arg), o.usage, def)
	}
	b.WriteString("  --version\n        print the version and exit\n")
	b.WriteString("  -h, --help\n        print this help and exit\n")

	b.WriteString("\nFlags accepted for etcd compatibility, ignored (each logs one warning):\n")
	names := make([]string, 0, len(etcdFlags())+1)
	for _, e := range etcdFlags() {
		names = append(names, "--"+e.name)
	}
	names = append(names, "--"+etcdExperimentalPrefix+"*")
	writeNames(&b, names)

	b.WriteString("\nSecurity flags of etcd that chute cannot honour; each stops it with exit 2:\n")
	names = names[:0]
	for _, r := range refusedEtcdFlags() {
		names = append(names, "--"+r.name)
	}
	writeNames(&b, names)

	io.WriteString(w, b.String())
}

// writeNames writes flag names as indented lines of at most 78 columns.
func writeNames(b *strings.Builder, names []string) {
	line := " "
	for _, n := range names {
		if len(line)+1+len(n) > 78 {
			b.WriteString(line + "\n")
			line = " "
		}
		line += " " + n
	}
	b.WriteString(line + "\n")
}

// offerNewest puts v on ch (capacity 1), replacing a value still waiting
// there: a reload that has not been applied yet holds an older
// configuration, which the newest supersedes. The caller is ch's only
// sender, so the second try finds room.
func offerNewest[T any](ch chan T, v T) {
	for range 2 {
		select {
		case ch <- v:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}
