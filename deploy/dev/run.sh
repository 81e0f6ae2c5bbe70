#!/usr/bin/env bash
# run.sh BIN: the whole pipeline on this machine. Starts a private ClickHouse
# (Debian's clickhouse-server, loopback, temp dir) and one chute node on
# etcd's default client port, creates default.events, puts a row with
# etcdctl and shows it selected back from ClickHouse. Both keep running
# until Ctrl-C.
set -euo pipefail
bin=${1:-bin/chute}
dir=$(mktemp -d)
. "$(dirname "$0")/clickhouse.sh"
ch_http=18123 ch_tcp=19000
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

ch_start "$dir/ch" $ch_http $ch_tcp
pids+=($ch_pid)
ch "CREATE TABLE IF NOT EXISTS default.events (id UInt64, msg String) ENGINE = MergeTree ORDER BY id"

"$bin" --name dev --listen-client-urls http://127.0.0.1:2379 --metrics-listen 127.0.0.1:9379 \
	--clickhouse-url "http://127.0.0.1:$ch_http" >"$dir/chute.log" 2>&1 &
pids+=($!)
wait_http http://127.0.0.1:9379/readyz chute "$dir/chute.log"

run() { echo "\$ $*"; "$@"; }
export ETCDCTL_API=3
run etcdctl --endpoints 127.0.0.1:2379 put /q/ch:events/p/1 '{"id":1,"msg":"hello from etcdctl"}'
for _ in $(seq 100); do
	[ "$(ch 'SELECT count() FROM default.events')" -ge 1 ] && break
	sleep 0.1
done
echo "\$ SELECT * FROM default.events"
ch "SELECT * FROM default.events FORMAT PrettyCompact"
echo
echo "chute: etcd API on 127.0.0.1:2379, metrics and /status on http://127.0.0.1:9379"
echo "ClickHouse: http://127.0.0.1:$ch_http (table default.events)"
echo "try:  etcdctl put /q/ch:events/p/2 '{\"id\":2,\"msg\":\"another\"}'"
echo "logs: $dir; press Ctrl-C to stop both"
wait "${pids[1]}"
