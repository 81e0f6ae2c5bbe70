#!/usr/bin/env bash
# bench.sh BIN [REPORT] [BENCH]: make bench. Starts a private ClickHouse,
# then BENCH (chute-bench, default: beside BIN) --matrix --trace
# --clickhouse-url with BIN as the nodes' chute, the benchmark matrix:
# one chute node and three (the producers on the two that do not dispatch),
# unary puts and txns of 128 puts from 100 clients to a ch: queue until
# every row is in ClickHouse, each run metering the CPU per row of every
# node, of this ClickHouse (its pid given with --clickhouse-pid) and of
# the bench itself; next to the floors of the same bench: the no-op etcd
# server's unary and txn CPU per put (the API path), the same server
# holding each call for chute's extra latency (one node's, and the three
# nodes' with one forwarding node's clients), and the rows of the
# median chute runs inserted straight into ClickHouse in 30000-row
# batches at the same rates (ClickHouse's own cost); the one-node unary
# and txn cells again on a node started with --unsafe-no-fsync, with each
# node's queue log fsyncs/s and puts per fsync, and that node's unary
# cell once more paced at the puts/s of the node with fsync; raw JSONEachRow inserts
# unpaced (the ceiling of the sink); what a queued row costs in memory
# on a node whose ClickHouse is unreachable; a node tracing every call;
# plain key puts to three chute nodes next to three etcd members (etcd on
# PATH, Debian's 3.4). The unary and txn cells (with fsync and without),
# their no-op and ClickHouse floors, the KV cells and the memory cell run
# three times each and show their medians; the traced, compression and
# raw cells run once. Each run lasts 20 s; the whole takes about twenty minutes
# on 2 cores. The tables, the targets with pass/fail, the machine and the
# method go to REPORT (default docs/benchmarks.md) and, without the
# machine, to stdout.
set -euo pipefail
bin=${1:-bin/chute}
report=${2:-docs/benchmarks.md}
bench=${3:-$(dirname "$bin")/chute-bench}
dir=$(mktemp -d)
. "$(dirname "$0")/clickhouse.sh"
trap 'kill $ch_pid 2>/dev/null; wait $ch_pid 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
ch_start "$dir/ch" 18124 19001
# What the binary was presumably built from: this tree's commit, and the
# top-level directories with changes not committed.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
changed=$(git diff --name-only HEAD 2>/dev/null | cut -d/ -f1 | sort -u | tr '\n' ' ' || true)
[ -z "$changed" ] || commit="$commit with local changes in ${changed% }"
"$bench" --chute "$bin" --matrix --trace --clickhouse-url http://127.0.0.1:18124 --clickhouse-pid "$ch_pid" \
	--clients 100 --conns 10 --duration 20s --puts 10000000 --repeat 3 \
	--report "$report" --commit "$commit"
