#!/usr/bin/env bash
# bench.sh BIN: make bench. Starts a private ClickHouse, then chute bench
# --matrix --trace: chute next to a no-op etcd server and next to a second
# chute node that traces every put to an OTLP sink in the bench process, for
# 1 and 100 clients, and the end-to-end runs (puts to a ch: queue until every
# row is in ClickHouse; the unary one on the traced node too).
set -euo pipefail
bin=${1:-bin/chute}
dir=$(mktemp -d)
. "$(dirname "$0")/clickhouse.sh"
trap 'kill $ch_pid 2>/dev/null; wait $ch_pid 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
ch_start "$dir/ch" 18124 19001
"$bin" bench --matrix --trace --duration 20s --clickhouse-url http://127.0.0.1:18124
