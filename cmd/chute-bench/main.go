// Command chute-bench is chute's benchmark: a load generator for any
// etcd-API server or cluster, and the matrix behind `make bench`, which
// starts chute nodes from the chute binary (--chute, by default the one
// beside chute-bench) and its own no-op etcd server as child processes,
// and writes docs/benchmarks.md. See package chute/internal/bench.
//
//	chute-bench --endpoints host:port[,...] [flags]   load one server or cluster
//	chute-bench --matrix [--chute bin/chute] [flags]  the matrix; with --clickhouse-url, make bench's
//	chute-bench noop-server --listen host:port        the no-op etcd KV server the matrix starts
//	chute-bench -h                                    every flag and its default
//
// It is a binary of its own so that chute does not link the benchmark and
// its dependencies (clientv3, zap).
//
// Exit codes: 0 on success, 1 when a run or the matrix failed, 2 for a
// usage error.
package main

import (
	"fmt"
	"os"

	"chute/internal/bench"
	"chute/internal/sysmon"
)

func main() {
	// The no-op server runs as chute does (see internal/sysmon), so that
	// the floor it measures is a Go server's at its best, not chute's
	// edge over one.
	if len(os.Args) > 1 && os.Args[1] == bench.NoopServerCommand {
		if err := sysmon.Exec(os.Args); err != nil {
			fmt.Fprintf(os.Stderr, "chute-bench: cannot start again with the runtime's monitor kept awake: %v\n", err)
		}
	}
	os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr))
}
