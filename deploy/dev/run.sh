#!/usr/bin/env bash
# run.sh BIN: the whole pipeline on this machine. Starts a private ClickHouse
# (Debian's clickhouse-server, loopback, temp dir) and one chute node on
# etcd's default client port (its data dir in the same temp dir), creates default.events, puts a row with
# etcdctl and shows it selected back from ClickHouse. Both keep running
# until Ctrl-C. Every port is a variable, for a machine where one is taken:
# CHUTE_RUN_CLIENT_PORT (2379), CHUTE_RUN_PEER_PORT (2380),
# CHUTE_RUN_GOSSIP_PORT (7946, TCP and UDP), CHUTE_RUN_METRICS_PORT (9379),
# CHUTE_RUN_CH_HTTP_PORT (18123), CHUTE_RUN_CH_TCP_PORT (19000).
set -euo pipefail
bin=${1:-bin/chute}
client=${CHUTE_RUN_CLIENT_PORT:-2379} peer=${CHUTE_RUN_PEER_PORT:-2380}
gossip=${CHUTE_RUN_GOSSIP_PORT:-7946} metrics=${CHUTE_RUN_METRICS_PORT:-9379}
ch_http=${CHUTE_RUN_CH_HTTP_PORT:-18123} ch_tcp=${CHUTE_RUN_CH_TCP_PORT:-19000}
for port in "$client" "$peer" "$gossip" "$metrics" "$ch_http" "$ch_tcp"; do
	case $port in
	'' | *[!0-9]*) echo "run.sh: port \"$port\" is not a number" >&2; exit 2 ;;
	esac
done
dir=$(mktemp -d)
. "$(dirname "$0")/clickhouse.sh"
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

"$bin" --name dev --listen-client-urls "http://127.0.0.1:$client" \
	--listen-peer-urls "http://127.0.0.1:$peer" --gossip-listen "127.0.0.1:$gossip" \
	--metrics-listen "127.0.0.1:$metrics" --data-dir "$dir/chute" \
	--clickhouse-url "http://127.0.0.1:$ch_http" >"$dir/chute.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$metrics/readyz" chute "$dir/chute.log"

run() { echo "\$ $*"; "$@"; }
export ETCDCTL_API=3
run etcdctl --endpoints "127.0.0.1:$client" put /q/ch:events/p/1 '{"id":1,"msg":"hello from etcdctl"}'
for _ in $(seq 100); do
	[ "$(ch 'SELECT count() FROM default.events')" -ge 1 ] && break
	sleep 0.1
done
echo "\$ SELECT * FROM default.events"
ch "SELECT * FROM default.events FORMAT PrettyCompact"
echo
echo "chute: etcd API on 127.0.0.1:$client, metrics and /status on http://127.0.0.1:$metrics"
echo "ClickHouse: http://127.0.0.1:$ch_http (table default.events)"
echo "try:  etcdctl --endpoints 127.0.0.1:$client put /q/ch:events/p/2 '{\"id\":2,\"msg\":\"another\"}'"
# The same put without an etcd client, through etcd's JSON gateway.
key=$(printf '/q/ch:events/p/3' | base64 -w0)
value=$(printf '{"id":3,"msg":"from curl"}' | base64 -w0)
echo "or:   curl -X POST http://127.0.0.1:$client/v3/kv/put -d '{\"key\":\"$key\",\"value\":\"$value\"}'"
echo "logs: $dir; press Ctrl-C to stop both"
wait "${pids[1]}"
