package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// options is the parsed command line of chute-bench.
type options struct {
	cfg           Config
	label         string
	json          bool
	matrix        bool
	matrixClients []int
	nodeArgs      []string
	readyTimeout  time.Duration
	trace         bool
	clickhouseURL string
	clickhousePID int
	queues        int
	claim         string
	progress      bool
	report        string
	rawPosters    int
	commit        string
	chute         string
	repeat        int
	etcd          string
	compression   []string
}

// parseFlags parses args (the words after chute-bench). It returns
// flag.ErrHelp for -h.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	def := DefaultConfig()
	fs := flag.NewFlagSet("chute-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: chute-bench --endpoints host:port[,...] [flags]\n"+
			"       chute-bench --matrix [--chute path/to/chute] [flags]\n"+
			"       chute-bench noop-server --listen host:port\n\nflags:\n")
		fs.PrintDefaults()
	}
	var (
		o             options
		endpoints     string
		matrixClients string
		nodeArgs      string
		compression   string
	)
	fs.StringVar(&endpoints, "endpoints", "", "comma-separated host:port or http://host:port of an etcd-API server (not with --matrix)")
	fs.StringVar(&o.label, "label", "", "server name in the report (default: the endpoints)")
	fs.IntVar(&o.cfg.Clients, "clients", def.Clients, "concurrent putters")
	fs.IntVar(&o.cfg.Conns, "conns", def.Conns, "clientv3 connections the putters share round-robin (at most --clients are opened), spread over the endpoints, one endpoint each")
	fs.IntVar(&o.cfg.Puts, "puts", def.Puts, "measured puts per run (rows, with --queues)")
	fs.IntVar(&o.cfg.Txn, "txn", 0, "puts per txn, 2.."+fmt.Sprint(maxTxn)+"; 0 or 1 for unary puts (with --matrix --clickhouse-url: the txn runs' size, default 128)")
	fs.DurationVar(&o.cfg.Duration, "duration", 0, "cap on a run's measured phase, 0 for none (a run never exceeds "+MaxRunDuration.String()+")")
	fs.Float64Var(&o.cfg.Rate, "rate", 0, "pace each run at this many puts per second in all, 0 for as fast as the clients go (not with --matrix --clickhouse-url, which paces its own run)")
	fs.IntVar(&o.cfg.KeySize, "key-size", def.KeySize, "key length in bytes")
	fs.IntVar(&o.cfg.ValSize, "val-size", def.ValSize, "value length in bytes")
	fs.IntVar(&o.cfg.Warmup, "warmup", def.Warmup, "unmeasured puts before each run")
	fs.DurationVar(&o.cfg.DialTimeout, "dial-timeout", def.DialTimeout, "bound on connecting and on the first put of each connection")
	fs.DurationVar(&o.cfg.PutTimeout, "put-timeout", def.PutTimeout, "bound on each put")
	fs.BoolVar(&o.json, "json", false, "print the results as JSON instead of a markdown table")
	fs.BoolVar(&o.matrix, "matrix", false, "start a chute node and a no-op server as child processes and benchmark both (with --clickhouse-url: the ClickHouse matrix)")
	fs.StringVar(&matrixClients, "matrix-clients", "1,100", "with --matrix and no --clickhouse-url: comma-separated client counts to run (the ClickHouse matrix runs at --clients)")
	fs.StringVar(&o.chute, "chute", "", "with --matrix: the chute binary the nodes run (default: chute beside this binary, else on PATH)")
	fs.StringVar(&nodeArgs, "node-args", "", "with --matrix: extra space-separated arguments for the chute nodes")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 15*time.Second, "with --matrix: how long each child has to answer a put")
	fs.BoolVar(&o.trace, "trace", false, "with --matrix: also measure a second chute node that traces every call (100% sampling) to an OTLP/gRPC sink in this process, and report the spans the sink received")
	fs.StringVar(&o.clickhouseURL, "clickhouse-url", "", "the ClickHouse (default user, no password) the server inserts into: with --queues, each run creates its tables there and waits until every row is in (rows/s, put-to-row latency); with --matrix, the chute nodes insert into it and the matrix is: 1 and 3 nodes, unary and txn, 1 node with --unsafe-no-fsync, the no-op and ClickHouse floors, raw inserts, memory, and the CPU per row of every process")
	fs.IntVar(&o.clickhousePID, "clickhouse-pid", 0, "with --matrix --clickhouse-url: the ClickHouse server's process, whose CPU time the matrix meters per row (default: the process listening on the URL's port, found through /proc)")
	fs.IntVar(&o.queues, "queues", 0, "put rows to this many ch: queues, tables bench_<run>_0..Q-1 created for each run (needs --clickhouse-url; the matrix's default is 1), 0 for plain keys")
	fs.StringVar(&o.claim, "claim", "", "with --endpoints and --queues: an endpoint that gets the first put of every queue, so its node dispatches them, while the puts go to --endpoints")
	fs.DurationVar(&o.cfg.LandTimeout, "land-timeout", def.LandTimeout, "with --queues: how long the rows may take to land once the puts have ended")
	fs.BoolVar(&o.progress, "progress", false, "draw a progress line on stderr (the default when stderr is a terminal)")
	fs.StringVar(&o.report, "report", "", "also write the results, the machine, the command and how they were measured as a markdown document to this file (make bench: docs/benchmarks.md)")
	fs.StringVar(&o.commit, "commit", "", "what chute was built from, for the report (default: the binary's VCS stamp, which -buildvcs=false leaves out)")
	fs.StringVar(&o.etcd, "etcd", "etcd", "with --matrix --clickhouse-url: the etcd 3.4 binary (a path, or a name on PATH) whose three-member cluster the KV group measures next to three chute nodes; none skips the KV group")
	fs.IntVar(&o.repeat, "repeat", 1, "with --matrix: run the compared cells this many times, 1.."+fmt.Sprint(maxRepeat)+", and report each as the median of its runs with their min and max (--clickhouse-url: the unary and txn runs of one node, with fsync and without, and of three nodes, their no-op and ClickHouse floors, the KV runs and the memory cell; else every cell)")
	fs.StringVar(&compression, "compression-cells", defaultCompressionCells, "with --matrix --clickhouse-url: comma-separated values of chute's --clickhouse-compression (none, gzip, deflate, zstd); the one-node txn run once on a node started with each, inserting through a proxy in this process that counts the bytes sent to ClickHouse; empty for none")
	fs.IntVar(&o.rawPosters, "raw-posters", 2, "with --matrix --clickhouse-url: concurrent posters of the raw JSONEachRow inserts")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, usageError(fs, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}

	o.cfg.Endpoints = splitList(endpoints)
	o.claim = strings.TrimSpace(o.claim)
	o.nodeArgs = strings.Fields(nodeArgs)
	if o.label == "" {
		o.label = strings.Join(o.cfg.Endpoints, ",")
	}
	var err error
	if o.matrixClients, err = parseCounts(matrixClients); err != nil {
		return options{}, usageError(fs, fmt.Errorf("--matrix-clients: %w", err))
	}
	o.compression = splitList(compression)
	if err := checkCompressionCells(o.compression); err != nil {
		return options{}, usageError(fs, fmt.Errorf("--compression-cells: %w", err))
	}
	if err := o.validate(); err != nil {
		return options{}, usageError(fs, err)
	}
	return o, nil
}

// validate checks the flag combinations and the run config.
func (o options) validate() error {
	cfg := o.cfg
	switch {
	case o.matrix && len(cfg.Endpoints) > 0:
		return errors.New("--endpoints and --matrix exclude each other")
	case !o.matrix && len(cfg.Endpoints) == 0:
		return errors.New("--endpoints is required (or --matrix)")
	case o.chute != "" && !o.matrix:
		return errors.New("--chute needs --matrix")
	case o.trace && !o.matrix:
		return errors.New("--trace needs --matrix")
	case o.matrix && o.readyTimeout <= 0:
		return fmt.Errorf("--ready-timeout %v, want positive", o.readyTimeout)
	case o.queues < 0 || o.queues > maxQueues:
		return fmt.Errorf("--queues %d, want 0..%d", o.queues, maxQueues)
	case o.queues > 0 && o.clickhouseURL == "":
		return errors.New("--queues needs --clickhouse-url")
	case !o.matrix && o.clickhouseURL != "" && o.queues == 0:
		return errors.New("--clickhouse-url needs --queues (or --matrix)")
	case o.claim != "" && (o.matrix || o.queues == 0):
		return errors.New("--claim needs --endpoints and --queues")
	case o.matrix && o.clickhouseURL != "" && o.cfg.Rate > 0:
		return errors.New("--rate does not apply to --matrix --clickhouse-url, which paces its own run")
	case o.repeat < 1 || o.repeat > maxRepeat:
		return fmt.Errorf("--repeat %d, want 1..%d", o.repeat, maxRepeat)
	case o.repeat > 1 && !o.matrix:
		return errors.New("--repeat needs --matrix")
	case o.clickhousePID < 0:
		return fmt.Errorf("--clickhouse-pid %d, want a process id", o.clickhousePID)
	case o.clickhousePID > 0 && (!o.matrix || o.clickhouseURL == ""):
		return errors.New("--clickhouse-pid needs --matrix --clickhouse-url")
	case o.rawPosters < 1:
		return fmt.Errorf("--raw-posters %d, want at least 1", o.rawPosters)
	case o.matrix:
		cfg.Endpoints = []string{"matrix"} // the children's, known later
	}
	return cfg.Validate()
}

func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintf(fs.Output(), "chute-bench: %v\n", err)
	fs.Usage()
	return err
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseCounts parses a comma-separated list of client counts.
func parseCounts(s string) ([]int, error) {
	parts := splitList(s)
	if len(parts) == 0 {
		return nil, errors.New("empty list")
	}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > maxClients {
			return nil, fmt.Errorf("client count %q, want 1..%d", p, maxClients)
		}
		out = append(out, n)
	}
	return out, nil
}
