package bench

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"chute/internal/sysmon"
)

// docSettings are the settings of a bench that its report document
// explains.
type docSettings struct {
	cfg        Config
	matrix     bool
	clickhouse bool
	trace      bool
	queues     int
	txn        int
	rawPosters int
	kv         bool
	repeat     int
	// compression are the values of the compression cells.
	compression []string
}

func docSettingsOf(opts options) docSettings {
	return docSettings{
		cfg:         opts.cfg,
		matrix:      opts.matrix,
		clickhouse:  opts.clickhouseURL != "",
		trace:       opts.trace,
		queues:      opts.queues,
		txn:         opts.cfg.Txn,
		rawPosters:  opts.rawPosters,
		kv:          opts.etcd != "none",
		repeat:      opts.repeat,
		compression: opts.compression,
	}
}

// WriteDoc writes r as a markdown document: the machine, the command, the
// targets, every table, and how the figures were measured.
func (r Report) WriteDoc(w io.Writer, s docSettings) error {
	var b bytes.Buffer
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Written by `chute-bench --report` (`make bench` runs `deploy/dev/bench.sh`);\n" +
		"rerun it rather than editing this file. Ratios come from the figures of the\n" +
		"tables below: one run each, or the median of a cell's runs where it was\n" +
		"repeated; on a shared 2-core machine they move by several percent\n" +
		"from run to run.\n")
	if m := r.Machine; m != nil {
		b.WriteString("\n## Machine\n\n| | |\n|---|---|\n")
		fmt.Fprintf(&b, "| CPUs | %d × %s |\n", m.CPUs, orUnknown(m.CPUModel))
		fmt.Fprintf(&b, "| memory | %.1f GiB |\n", float64(m.MemoryBytes)/(1<<30))
		fmt.Fprintf(&b, "| OS | %s/%s, kernel %s |\n", m.OS, m.Arch, orUnknown(m.Kernel))
		fmt.Fprintf(&b, "| Go | %s |\n", m.GoVersion)
		fmt.Fprintf(&b, "| ClickHouse | %s |\n", orUnknown(m.ClickHouse))
		if m.Etcd != "" {
			fmt.Fprintf(&b, "| etcd | %s |\n", m.Etcd)
		}
		commit := orUnknown(m.Commit)
		if m.Modified {
			commit += " with local changes"
		}
		fmt.Fprintf(&b, "| chute built from | %s |\n", commit)
		fmt.Fprintf(&b, "| started | %s |\n", m.Started.Format("2006-01-02 15:04 MST"))
		fmt.Fprintf(&b, "| load average at start | %s |\n", orUnknown(m.LoadAvg))
		fmt.Fprintf(&b, "| load average at the end | %s |\n", orUnknown(m.LoadAvgEnd))
	}
	if r.Command != "" {
		fmt.Fprintf(&b, "\n## Command\n\n```\n%s\n```\n", r.Command)
	}
	if len(r.Targets) > 0 {
		b.WriteString("\n## Targets\n\n" +
			"CPU per row of each process, each a ratio to a floor measured in the\n" +
			"same bench, and the latency, refusals and memory of a queued row.\n\n")
		r.writeTargets(&b)
	}
	b.WriteString("\n## Puts\n\n")
	r.writePuts(&b)
	r.writeRatios(&b)
	r.writeErrors(&b)
	if hasSpread(r.Results) {
		b.WriteString("\n## Repeated runs\n\nThe rows above that fold several runs show their medians; here are\nthe extremes.\n\n")
		r.writeSpread(&b)
	}
	if r.hasPerRow() {
		b.WriteString("\n## CPU per row against the floors\n\n" +
			"Each process's CPU time over a run, warmup and the wait for its rows\n" +
			"included, over the rows it landed; three nodes are summed. The floors\n" +
			"are measured in the same run (see How it was measured).\n\n")
		r.writePerRow(&b)
	}
	if hasRowCPU(r.Results) {
		b.WriteString("\n## CPU per row of each process\n\n" +
			"Per row landed, warmup included; per put where the run watched no\n" +
			"rows (the no-op server's). Several nodes: each, then their sum.\n\n")
		r.writeRowCPU(&b)
	}
	if hasRows(r.Results) {
		b.WriteString("\n## Rows into ClickHouse\n\n")
		r.writeRows(&b)
	}
	if len(r.Floors) > 0 {
		b.WriteString("\n## ClickHouse floors\n\n" +
			"The rows of the median one-node chute run of each call shape,\n" +
			"inserted straight into ClickHouse in large batches at that run's\n" +
			"rows/s: what those rows cost ClickHouse at the least.\n\n")
		r.writeFloors(&b)
	}
	if hasQueueLog(r.Results) {
		b.WriteString("\n## Queue log\n\nWhat each node's queue log did during the measured phase.\n\n")
		r.writeQueueLog(&b)
	}
	if hasWire(r.Results) {
		b.WriteString("\n## Compression of the inserts\n\nThe one-node txn run on nodes started with each\n" +
			"`--clickhouse-compression`, the bytes their requests carried to\nClickHouse counted on the wire. The other chute runs leave it at\n" +
			"its default, auto, which is none to the bench's ClickHouse on\nloopback.\n\n")
		r.writeCompression(&b)
	}
	if r.Raw != nil {
		b.WriteString("\n## Ceiling of the sink: raw JSONEachRow inserts\n\n")
		r.writeRaw(&b)
	}
	if r.Memory != nil {
		b.WriteString("\n## Memory of a queued row\n\n")
		r.writeMemory(&b)
	}
	b.WriteString("\n## How it was measured\n\n")
	writeMethod(&b, s)
	_, err := w.Write(b.Bytes())
	return err
}

// writeMethod explains the measurement with the settings of s.
func writeMethod(b *bytes.Buffer, s docSettings) {
	c := s.cfg
	bound := fmt.Sprintf("%d puts", c.Puts)
	if c.Duration > 0 {
		bound = fmt.Sprintf("%v or %d puts, whichever comes first", c.Duration, c.Puts)
	}
	fmt.Fprintf(b, "Every run drives the server with the real `clientv3`: %d concurrent\n"+
		"putters share %d client connections round-robin, each making one call at\n"+
		"a time (a unary put, or a txn whose Then branch holds the puts); a run is\n"+
		"%d unmeasured warmup puts, then\n%s. Put latencies are per call,\n"+
		"nearest rank. The no-op server answers Put and Txn without doing\n"+
		"anything, through the same gRPC stack: the ceiling of the API path's\n"+
		"rate and the floor of its CPU on this machine. Both it and chute run\n"+
		"with the Go runtime's monitor thread kept out of its deep sleep\n"+
		"(`GODEBUG=%s`, see internal/sysmon).",
		c.Clients, min(c.Conns, c.Clients), c.Warmup, bound, sysmon.Setting)
	if !s.clickhouse {
		fmt.Fprintf(b, " Keys are %d bytes, values %d random printable bytes.\n", c.KeySize, c.ValSize)
		return
	}
	fmt.Fprintf(b, " Rows are JSON objects of %d bytes\n"+
		"(`{\"id\":<n>,\"v\":\"<padding>\"}`) with %d-byte message keys, put to\n"+
		"`/q/ch:<table>/p/<key>`; calls go round-robin over the run's queues\n"+
		"(one table each, `id UInt64, v String`, MergeTree, created for the run\n"+
		"and dropped after it), a txn's puts all to one queue. A put refused\n"+
		"(`too many requests`: its queue holds max_bytes, 64 MiB by default)\n"+
		"counts as an error, not in puts/s, and its row is not waited for.\n\n",
		c.ValSize, c.KeySize)
	fmt.Fprintf(b, "Rows landing: the bench sums the rows of every table's active parts\n"+
		"(system.parts, which ClickHouse answers from its part metadata) in one query\n"+
		"every %v (every %v in a run paced for its latency) from the start\n"+
		"of the measured phase until the tables hold\n"+
		"every acknowledged row (the warmup's rows are in before it starts).\n"+
		"rows/s is the rows counted divided by the time from the phase's start\n"+
		"to that count. A table's rows are taken to land in the order their\n"+
		"calls were answered, so a row's put-to-row latency runs from the start\n"+
		"of its call to the first count that holds every row answered up to\n"+
		"it: exact up to the poll period. Rows per insert is ClickHouse's own\n"+
		"count (system.events InsertedRows / InsertQuery) over the same time.\n"+
		"A count costs ClickHouse about 1.2 ms of CPU here whatever the\n"+
		"tables hold (18.16's `count()` reads a whole column: 33 ms at 3M\n"+
		"rows), taken from the server under test: runs that measure\n"+
		"throughput count less often. docs/benchmarks-clickhouse-cost.md\n"+
		"measures what ClickHouse spends on chute's rows and why.\n",
		throughputPollInterval, pollInterval)
	if s.matrix && s.clickhouse {
		txn := s.txn
		if txn == 0 {
			txn = defaultMatrixTxn
		}
		fmt.Fprintf(b, "\nThe matrix starts every server as a child process of the bench's own\n"+
			"binary, on loopback, with the client, the servers and ClickHouse\n"+
			"sharing the machine. The first group runs the cells the targets\n"+
			"compare, all their processes up for the whole group: the no-op\n"+
			"server, a chute node, a second one started with `--unsafe-no-fsync`\n"+
			"and three chute nodes. It runs them in rounds, each round no-op\n"+
			"unary, chute unary, the same without fsync and three nodes unary,\n"+
			"then rounds of the same txn-%d, so that the machine's slow and fast\n"+
			"spells, which last minutes here, weigh on a cell and on its floor\n"+
			"alike; the idle processes cost the others little (an idle node of\n"+
			"the three about 2%% of a core, a one-node node under 1%%). Then the\n"+
			"no-op again at chute's latency, unary and txn-%d.\n"+
			"Targets 1 to 3 read the node that fsyncs, the default users run.\n"+
			"The three nodes are chute processes joined by gossip\n"+
			"with the default gossip profile (`lan`, as users run them; `fast`,\n"+
			"for tests, gossips every 20ms and costs an idle cluster about a\n"+
			"quarter of a core); the first gets the first put of every\n"+
			"queue, so it claims and\n"+
			"dispatches them all, and every other put goes to the second and\n"+
			"third nodes (half the connections to each), which forward it;\n"+
			"after each run the first node must still dispatch every queue. Each\n"+
			"group's processes are stopped before the next group starts. Peak RSS\n"+
			"is the largest VmRSS of /proc/<pid>/status sampled every %v\n"+
			"during the run, per node.\n\n", txn, txn, rssPeriod)
		b.WriteString("CPU: the user and system time (utime + stime of /proc/<pid>/stat)\n" +
			"of each node, of the ClickHouse process and of the bench's own process\n" +
			"from just before a run creates its tables to just after it dropped\n" +
			"them, warmup and the wait for the rows included. µs/put divides it by\n" +
			"the run's puts, µs/row by the rows it landed (the warmup's and the\n" +
			"measured rows counted in ClickHouse; the puts where the run watches\n" +
			"no rows, as against the no-op server, where a put is a row); three\n" +
			"nodes are also summed. The ClickHouse process is the one\n" +
			"`--clickhouse-pid` names (`make bench` passes the server it started),\n" +
			"else the one listening on the URL's port, found through\n" +
			"/proc/net/tcp{,6} and /proc/<pid>/fd: all its threads, so the\n" +
			"parsing of the inserts, the merges (some of a cell's may run into the\n" +
			"next) and the bench's own counts of the rows. The client is the\n" +
			"bench's process: the putters and their clientv3 connections, the row\n" +
			"counts, the memory and CPU sampling and whatever else it serves\n" +
			"meanwhile: the wire proxies of the compression cells, the span sink\n" +
			"of the traced one (idle otherwise). Goroutines are not bound to\n" +
			"threads, so these cannot be told apart.\n\n")
		fmt.Fprintf(b, "Floors, measured in the same bench: the no-op server's µs/put (unary\n"+
			"and txn-%d, a put being a row) and the ClickHouse floors. A ClickHouse\n"+
			"floor takes the median one-node chute run of a call shape (fsync on)\n"+
			"and posts as many rows as it landed, the same JSON into a table of the\n"+
			"same schema, as JSONEachRow straight to ClickHouse in batches of %d\n"+
			"rows by %d posters, paced at that run's rows/s, once the one-node\n"+
			"group's processes have stopped; like the chute cells it counts the\n"+
			"table's rows every %v while it posts. ClickHouse µs/row is the\n"+
			"ClickHouse process's CPU over the floor, table creation to drop, over\n"+
			"the rows inserted. Each floor runs as often as the cells it is the\n"+
			"floor of and shows the run of the median ClickHouse µs/row. The\n"+
			"counts are in both sides of the ratio, as they cost ClickHouse the\n"+
			"same per second; before the floors the bench counts an empty table\n"+
			"for a few seconds alone, and the floors table shows the share of\n"+
			"each floor that counting explains. The no-op at chute's latency holds\n"+
			"each put (txn) for the median one-node chute run's p50 less the no-op's\n"+
			"own: the clients keep the same number of calls in flight, so the\n"+
			"server answers fewer calls per second, fewer share a read or a write,\n"+
			"and each costs the gRPC stack more; it is the floor of a server that\n"+
			"answers when chute does, shown beside the targets' no-op, which are\n"+
			"not changed. The no-op at the three nodes' latency holds each put\n"+
			"(txn) for the median three-node run's p50 less the no-op's own and is\n"+
			"driven by half the clients, those of one forwarding node, once the\n"+
			"cluster has stopped: the floor of a forwarding node's first receive.\n"+
			"The no-op server is a plain gRPC server at Go's default GOGC (100);\n"+
			"the chute nodes keep chute's heap floor (the heap may grow by at\n"+
			"least 64 MiB between garbage collections, unless GOGC is set),\n"+
			"which spares them the collections the no-op pays for every\n"+
			"few thousand calls: part of what chute saves against the no-op is\n"+
			"that setting, which the no-op server would gain from too.\n\n",
			txn, floorBatchRows, max(s.rawPosters, 1), throughputPollInterval)
		b.WriteString("Queue log: a chute node keeps its queues in a log under its\n" +
			"`--data-dir`, in the bench's temporary directory (`$TMPDIR`, on tmpfs\n" +
			"fsync would cost nothing), and fsyncs it before it answers a put,\n" +
			"many puts to one fsync; the node started with `--unsafe-no-fsync`\n" +
			"writes it without fsync: targets 5a and 5b compare the two nodes'\n" +
			"CPU per row. Just before and just after the measured phase of\n" +
			"these four runs the bench reads `chute_queue_log_fsyncs_total` and\n" +
			"`chute_queue_log_appended_total` from the node's `/metrics`:\n" +
			"fsyncs/s is the fsyncs over the phase's time, puts per fsync the\n" +
			"records appended (one per put the node keeps) over the fsyncs.\n" +
			"The node without fsync then runs unary and txn once more, each\n" +
			"paced at the puts/s of the node with fsync (its median run of the\n" +
			"same calls): in the closed loop the node that answers sooner serves\n" +
			"more calls a second, and the gRPC stack costs less per call the more\n" +
			"calls a second it serves; at one rate the ratio, shown beside 5a and\n" +
			"5b, is what the fsync costs.\n\n")
		if len(s.compression) > 0 {
			fmt.Fprintf(b, "Compression: one chute node per value of `--clickhouse-compression`\n"+
				"(%s), all up for the group and started after the one-node group\n"+
				"has stopped, each run once as the one-node txn-%d cell. Each node's\n"+
				"`--clickhouse-url` names a TCP proxy of its own in the bench process,\n"+
				"on loopback, which forwards to ClickHouse and counts the bytes it\n"+
				"writes each way: bytes sent/row is what the node's connections\n"+
				"carried to ClickHouse (request lines, headers and bodies as sent,\n"+
				"compressed or not) from the run's first dial until every row was in,\n"+
				"over the rows of the warmup and the measured phase; chute CPU µs/row\n"+
				"is the node's CPU time over the same run and rows. ClickHouse query\n"+
				"CPU µs/row is the growth of system.events UserTimeMicroseconds +\n"+
				"SystemTimeMicroseconds over the run, over the same rows: the CPU of\n"+
				"ClickHouse's query threads (decompressing and parsing the inserts,\n"+
				"and the bench's own counts of the rows), not its background merges,\n"+
				"which the process's CPU in the tables of CPU per row holds. The bench\n"+
				"reads the rows straight from ClickHouse, not through the proxies.\n"+
				"A row's padding is cut from one random buffer per putter, so it\n"+
				"repeats much of the rows sent before it, and the codecs shrink it\n"+
				"far more than they would most real rows: read the bytes saved as an\n"+
				"upper bound, the CPU as what the saving costs.\n\n",
				strings.Join(s.compression, ", "), txn)
		}
		if s.trace {
			b.WriteString("With `--trace` a second chute node runs next to the first with\n" +
				"`OTEL_TRACES_SAMPLER=always_on` and an `OTEL_EXPORTER_OTLP_ENDPOINT`\n" +
				"naming an OTLP/gRPC sink in the bench process that counts the spans\n" +
				"and drops them; no other child inherits the shell's `OTEL_*`\n" +
				"variables. Its unary run compares with the untraced node's.\n\n")
		}
		if s.kv {
			b.WriteString("KV: plain keys (`/bench/kv/<run>/<n>`, values as above), unary\n" +
				"puts from the same putters and connections, the connections spread\n" +
				"over the three members, against three chute nodes\n" +
				"(`--bootstrap-expect 3`, measured once every node's `/readyz` is\n" +
				"200) and against three members of an etcd cluster started by the\n" +
				"bench (`--initial-cluster-state new` on loopback, each with its own\n" +
				"data dir, etcd's defaults otherwise, fsync included); chute's raft\n" +
				"log fsyncs too. Both clusters run for the whole group, the runs\n" +
				"alternate (chute, etcd, chute, ...) so that whatever drifts on the\n" +
				"machine meanwhile weighs on both alike, and each cluster's keys\n" +
				"accumulate over its runs. Both keep their data in a temporary\n" +
				"directory on the same disk, removed when the group stops.\n\n")
		}
		if s.repeat > 1 {
			fmt.Fprintf(b, "With `--repeat %d` the unary and txn cells of one node (with fsync\n"+
				"and without, and the paced ones without) and of three nodes, their\n"+
				"no-op floors, the ClickHouse floors and the KV cells run %d times\n"+
				"each (the first group's and the KV cells in rounds, the others\n"+
				"back to back) on the same processes with fresh tables and\n"+
				"keys; the tables show the median of every figure over the runs,\n"+
				"each on its own (the counts are the median run's), and the repeated\n"+
				"runs table their extremes and the failed puts of all the runs, which\n"+
				"target 2a counts. The memory cell runs %d times too, each on a fresh\n"+
				"node, and shows the run of the median RSS growth per row. The\n"+
				"traced, compression and raw cells run once.\n\n",
				s.repeat, s.repeat, s.repeat)
		}
		fmt.Fprintf(b, "Ceiling of the sink: the same rows posted as JSONEachRow straight to\n"+
			"ClickHouse over HTTP by %d concurrent posters, each with one insert in\n"+
			"flight, in batches of the size ClickHouse saw from chute in the\n"+
			"one-node txn run (at most 100000 rows and 8 MiB, chute's caps); rows/s\n"+
			"counts the rows the table holds after the last answer.\n\n", s.rawPosters)
		fmt.Fprintf(b, "Memory: a chute node whose `--clickhouse-url` is a loopback port\n"+
			"nothing listens on keeps every row of a `ch:` queue while its inserts\n"+
			"are refused. The bench raises the queue's max_bytes, queues a first\n"+
			"tranche of rows, not measured (the drainer's batches in flight and\n"+
			"the requests it builds and retries are the same size whatever the\n"+
			"queue holds), then reads its resident memory (VmRSS) and its\n"+
			"`/metrics` until two garbage\n"+
			"collections have ended (each read allocates, which brings them\n"+
			"about) and takes the heap goal the last one set, then queues as many\n"+
			"rows again (txn-%d, 8 clients), checks `/status` holds them all, and reads\n"+
			"both again: the growth is the second tranche's. The node runs at\n"+
			"GOGC=100, which turns chute's heap floor off: under the floor the\n"+
			"resident memory moves by up to the floor between readings whatever\n"+
			"the queue holds, and a row costs at most what it costs at GOGC 100.\n"+
			"Target 4 holds the RSS growth per row, the heap's\n"+
			"headroom (GOGC) and garbage included, to the row's value and key\n"+
			"plus %d bytes; the key is the message key, the %d bytes after\n"+
			"`/q/ch:<table>/p/`, which chute keeps with the value. The live heap\n"+
			"is shown too: the heap goal is the live heap × (1 + GOGC/100) plus a\n"+
			"term for stacks and globals that barely moves, so the difference of\n"+
			"the goals divided by 1 + GOGC/100 is the growth of the live heap;\n"+
			"less the value, per row, it is what the queue spends on a row (key\n"+
			"included).\n",
			maxTxn, targetRowRSSOverhead, c.KeySize)
	}
}

// orUnknown is s, or "unknown" when empty.
func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
